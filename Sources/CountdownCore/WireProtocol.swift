/// The `code` of an error message, as documented in the README.
public enum ErrorCode: String, Error, Equatable, Sendable, CaseIterable {
  case badJSON = "bad_json"
  case badRequest = "bad_request"
  case busy
  case notRunning = "not_running"
  case notPaused = "not_paused"
  case rateLimited = "rate_limited"
  case forbidden
  case tooManySessions = "too_many_sessions"
  /// Storage or the cluster could not take the command; nothing changed.
  case unavailable
}

/// A command from a client, decoded and validated.
public enum ClientCommand: Equatable, Sendable {
  /// `length` is nil when the client named neither `seconds` nor `until`:
  /// the server's default applies.
  case start(StartLength?, finishedLabel: String?)
  case cancel
  case pause
  case resume
  case adjust(seconds: Int)
  /// Clock-offset probe: `t` is the client's send time, echoed verbatim in the pong.
  case ping(t: String)
  /// Presents a controller key after the handshake, so that it need not
  /// travel in the URL (where proxies and browser history keep it).
  case auth(key: String)
  /// A controller asks for a new key; the old one stops working.
  case rotateKey
}

/// Why a client message was refused, with the `id` to echo (nil when it had none).
public struct CommandError: Error, Equatable, Sendable {
  public var code: ErrorCode
  public var message: String
  public var id: CommandID?

  public init(_ code: ErrorCode, _ message: String, id: CommandID? = nil) {
    self.code = code
    self.message = message
    self.id = id
  }
}

/// A command's `id`, kept as the JSON text to echo back verbatim.
public struct CommandID: Equatable, Sendable {
  public let json: [UInt8]
  public static let maxStringLength = 128
  /// Longer number literals are refused: every echo of one is queued per reply.
  public static let maxNumberLength = 32

  init?(_ value: JSONValue) {
    var writer = JSONWriter(reservingCapacity: 16)
    switch value {
    case .number(let literal) where literal.utf8.count <= Self.maxNumberLength:
      writer.raw(Array(literal.utf8))
    case .string(let text) where text.unicodeScalars.count <= Self.maxStringLength:
      writer.string(text)
    default: return nil
    }
    json = writer.bytes
  }
}

/// A decoded message: the command and its id.
public struct ClientMessage: Equatable, Sendable {
  public var command: ClientCommand
  public var id: CommandID?
}

/// Turns client text into commands, and state into server messages.
public enum WireCodec {
  /// The largest client message, counted across fragments (close 1009 past it).
  public static let maxMessageBytes = 4096
  /// The longest key an `auth` may present: real keys are 32 hex digits, and
  /// anything longer only costs a hash.
  public static let maxKeyLength = 128

  /// Decodes one text frame. Every failure names the error code the client gets.
  public static func decode(_ text: [UInt8]) -> Result<ClientMessage, CommandError> {
    let value: JSONValue
    do throws(JSONParseError) {
      value = try JSONParser.parse(text)
    } catch {
      switch error {
      case .syntax:
        return .failure(CommandError(.badJSON, "the message is not valid JSON"))
      case .tooDeep:
        return .failure(
          CommandError(.badRequest, "JSON nested deeper than \(JSONParser.defaultMaxDepth) levels"))
      case .duplicateKey(let key):
        return .failure(CommandError(.badRequest, "duplicate key \"\(key)\""))
      }
    }
    guard case .object(let fields) = value else {
      return .failure(CommandError(.badRequest, "a command must be a JSON object"))
    }
    var id: CommandID?
    if let raw = fields["id"] {
      guard let parsed = CommandID(raw) else {
        return .failure(
          CommandError(
            .badRequest,
            "id must be a number of at most \(CommandID.maxNumberLength) characters or a string of at most \(CommandID.maxStringLength)"
          ))
      }
      id = parsed
    }
    func fail(_ message: String) -> Result<ClientMessage, CommandError> {
      .failure(CommandError(.badRequest, message, id: id))
    }
    guard case .string(let op)? = fields["op"] else { return fail("op must be a string") }
    switch op {
    case "start":
      var length: StartLength?
      if let raw = fields["seconds"] {
        guard let value = raw.integer, SessionRecord.secondsRange.contains(value) else {
          return fail(
            "seconds must be an integer from \(SessionRecord.secondsRange.lowerBound) to \(SessionRecord.secondsRange.upperBound)"
          )
        }
        length = .seconds(value)
      }
      if let raw = fields["until"] {
        guard length == nil else { return fail("give seconds or until, not both") }
        guard let value = raw.integer else {
          return fail("until must be an integer: a deadline in epoch milliseconds")
        }
        length = .until(Int64(value))
      }
      var finishedLabel: String?
      if let raw = fields["finishedLabel"] {
        guard case .string(let label) = raw, !label.isEmpty,
          label.unicodeScalars.count <= SessionConfig.maxFinishedLabelLength
        else {
          return fail(
            "finishedLabel must be a string of 1 to \(SessionConfig.maxFinishedLabelLength) characters"
          )
        }
        finishedLabel = label
      }
      return .success(ClientMessage(command: .start(length, finishedLabel: finishedLabel), id: id))
    case "cancel":
      return .success(ClientMessage(command: .cancel, id: id))
    case "pause":
      return .success(ClientMessage(command: .pause, id: id))
    case "resume":
      return .success(ClientMessage(command: .resume, id: id))
    case "adjust":
      let range = SessionRecord.adjustRange
      guard let value = fields["seconds"]?.integer, value != 0, range.contains(value) else {
        return fail(
          "seconds must be a non-zero integer from \(range.lowerBound) to \(range.upperBound)")
      }
      return .success(ClientMessage(command: .adjust(seconds: value), id: id))
    case "ping":
      guard case .number(let t)? = fields["t"], t.utf8.count <= CommandID.maxNumberLength else {
        return fail("t must be a number of at most \(CommandID.maxNumberLength) characters")
      }
      return .success(ClientMessage(command: .ping(t: t), id: id))
    case "auth":
      guard case .string(let key)? = fields["key"], key.unicodeScalars.count <= Self.maxKeyLength
      else { return fail("key must be a string of at most \(Self.maxKeyLength) characters") }
      return .success(ClientMessage(command: .auth(key: key), id: id))
    case "rotate_key":
      return .success(ClientMessage(command: .rotateKey, id: id))
    default:
      return fail("unknown op \"\(op)\"")
    }
  }

  /// `{"type":"snapshot",...}`: the whole state, always a connection's first message.
  /// A connection's part in a `--control key` session, told in its snapshot.
  public enum Control: Equatable, Sendable {
    case viewer
    case controller(key: String)
  }

  public static func snapshot(
    session: String, epoch: String, seq: UInt64, serverTime: Int64, state: CountdownState,
    control: Control? = nil
  ) -> [UInt8] {
    var writer = JSONWriter()
    writer.raw("{\"type\":\"snapshot\",\"session\":")
    writer.string(session)
    writer.raw(",\"epoch\":")
    writer.string(epoch)
    writer.raw(",\"seq\":")
    writer.integer(seq)
    writer.raw(",\"serverTime\":")
    writer.integer(serverTime)
    writer.raw(",\"state\":")
    writeFields(.all, of: state, to: &writer)
    switch control {
    case nil: break
    case .viewer: writer.raw(",\"role\":\"viewer\"")
    case .controller(let key):
      writer.raw(",\"role\":\"controller\",\"key\":")
      writer.string(key)
    }
    writer.raw("}")
    return writer.bytes
  }

  /// `{"type":"patch",...}`: only `patch.fields`, as an RFC 7396 merge patch.
  public static func patch(_ patch: Patch) -> [UInt8] {
    var bytes: [UInt8] = []
    bytes.reserveCapacity(128)
    appendPatch(patch, to: &bytes)
    return bytes
  }

  /// The same, appended to a buffer the caller reuses.
  public static func appendPatch(_ patch: Patch, to bytes: inout [UInt8]) {
    var writer = JSONWriter(appendingTo: bytes)
    bytes = []  // hand the storage to the writer without copying it
    writer.raw("{\"type\":\"patch\",\"seq\":")
    writer.integer(patch.seq)
    writer.raw(",\"patch\":")
    writeFields(patch.fields, of: patch.state, to: &writer)
    writer.raw("}")
    bytes = writer.bytes
  }

  /// `{"type":"pong",...}`: `t` as the client sent it, and the server's time at writing.
  public static func pong(t: String, serverTime: Int64) -> [UInt8] {
    var writer = JSONWriter(reservingCapacity: 64)
    writer.raw("{\"type\":\"pong\",\"t\":")
    writer.raw(Array(t.utf8))
    writer.raw(",\"serverTime\":")
    writer.integer(serverTime)
    writer.raw("}")
    return writer.bytes
  }

  /// `{"type":"ack",...}`; a `rotate_key`'s ack carries the new key.
  public static func ack(id: CommandID?, seq: UInt64, key: String? = nil) -> [UInt8] {
    var writer = JSONWriter(reservingCapacity: 48)
    writer.raw("{\"type\":\"ack\",\"id\":")
    writeID(id, to: &writer)
    writer.raw(",\"seq\":")
    writer.integer(seq)
    if let key {
      writer.raw(",\"key\":")
      writer.string(key)
    }
    writer.raw("}")
    return writer.bytes
  }

  public static func error(_ error: CommandError) -> [UInt8] {
    // Sized to fit, not grown by doubling: a long message may wait in a
    // connection's replies, which are budgeted by what they hold.
    var writer = JSONWriter(
      reservingCapacity: 64 + (error.id?.json.count ?? 4) + error.message.utf8.count)
    writer.raw("{\"type\":\"error\",\"id\":")
    writeID(error.id, to: &writer)
    writer.raw(",\"code\":")
    writer.string(error.code.rawValue)
    writer.raw(",\"message\":")
    writer.string(error.message)
    writer.raw("}")
    return writer.bytes
  }

  private static func writeID(_ id: CommandID?, to writer: inout JSONWriter) {
    if let id { writer.raw(id.json) } else { writer.raw("null") }
  }

  private static func writeFields(
    _ fields: FieldSet, of state: CountdownState, to writer: inout JSONWriter
  ) {
    writer.raw("{")
    var first = true
    func key(_ name: StaticString) {
      if !first { writer.raw(",") }
      first = false
      writer.raw(name)
    }
    if fields.contains(.phase) {
      key("\"phase\":")
      writer.string(state.phase.rawValue)
    }
    if fields.contains(.spinner) {
      key("\"spinner\":")
      writer.bool(state.spinner)
    }
    if fields.contains(.enabled) {
      key("\"enabled\":")
      writer.bool(state.enabled)
    }
    if fields.contains(.label) {
      key("\"label\":")
      writer.string(state.label)
    }
    if fields.contains(.remaining) {
      key("\"remaining\":")
      writer.integer(state.remaining)
    }
    if fields.contains(.duration) {
      key("\"duration\":")
      writer.integer(state.duration)
    }
    if fields.contains(.endsAt) {
      key("\"endsAt\":")
      if let endsAt = state.endsAt { writer.integer(endsAt) } else { writer.raw("null") }
    }
    if fields.contains(.viewers) {
      key("\"viewers\":")
      writer.integer(state.viewers)
    }
    if fields.contains(.remainingMs) {
      key("\"remainingMs\":")
      if let left = state.remainingMs { writer.integer(left) } else { writer.raw("null") }
    }
    if fields.contains(.stale) {
      key("\"stale\":")
      writer.bool(state.stale)
    }
    writer.raw("}")
  }
}
