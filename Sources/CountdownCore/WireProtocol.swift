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
  /// The cluster lost a command's reply and cannot tell whether it applied:
  /// the client should look at the state before it retries.
  case outcomeUnknown = "outcome_unknown"
}

/// A message from a client, decoded and validated: a session command, or
/// one of the few requests the hub answers without sequencing.
public enum ClientRequest: Equatable, Sendable {
  case command(SessionCommand)
  /// A controller asks for a new key; the old one stops working. The hub
  /// makes the key, then sequences `SessionCommand.rotateKey` with its hash.
  case rotateKey
  /// Clock-offset probe: `t` is the client's send time, echoed verbatim in the pong.
  case ping(t: String)
  /// Presents a controller key after the handshake, so that it need not
  /// travel in the URL (where proxies and browser history keep it).
  case auth(key: String)

  /// The ops that are not session commands (`SessionCommand.Op`).
  public enum MessageOp: String, CaseIterable, Sendable {
    case ping
    case auth
  }
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

/// A decoded message: the request and its id.
public struct ClientMessage: Equatable, Sendable {
  public var request: ClientRequest
  public var id: CommandID?
}

/// Turns client text into commands, and state into server messages.
public enum WireCodec {
  /// The largest client message, counted across fragments (close 1009 past it).
  public static let maxMessageBytes = 4096
  /// The longest key an `auth` may present: real keys are 32 hex digits, and
  /// anything longer only costs a hash.
  public static let maxKeyLength = 128

  /// The longest ping `t` literal; the pong repeats it.
  public static let maxPingTLength = CommandID.maxNumberLength
  /// Client text quoted in an error message is cut to this many characters,
  /// so an error costs about the same whatever the client sent.
  public static let maxEchoLength = 32

  /// `text` in quotes for an error message: at most `maxEchoLength` Unicode
  /// scalars (not characters, since one character may join any number of
  /// scalars), with an ellipsis when cut.
  static func echo(_ text: String) -> String {
    let scalars = text.unicodeScalars
    guard scalars.count > maxEchoLength else { return "\"\(text)\"" }
    var cut = String.UnicodeScalarView()
    cut.append(contentsOf: scalars.prefix(maxEchoLength))
    return "\"\(String(cut))…\""
  }

  /// Decodes one text frame. Every failure names the error code the client
  /// gets. A start that names no length runs `defaultSeconds`.
  public static func decode(
    _ text: [UInt8], defaultSeconds: Int
  ) -> Result<ClientMessage, CommandError> {
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
        return .failure(CommandError(.badRequest, "duplicate key \(echo(key))"))
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
    guard case .string(let name)? = fields["op"] else { return fail("op must be a string") }
    let request: ClientRequest
    if let op = SessionCommand.Op(rawValue: name) {
      switch decodeCommand(op, fields, defaultSeconds: defaultSeconds) {
      case .success(let decoded): request = decoded
      case .failure(let failure): return fail(failure.message)
      }
    } else if let op = ClientRequest.MessageOp(rawValue: name) {
      switch op {
      case .ping:
        // Echoed verbatim, so only a short literal the page can read back as a finite number.
        guard case .number(let t)? = fields["t"], t.utf8.count <= maxPingTLength,
          Double(t)?.isFinite == true
        else {
          return fail("t must be a finite number of at most \(maxPingTLength) characters")
        }
        request = .ping(t: t)
      case .auth:
        guard case .string(let key)? = fields["key"], key.unicodeScalars.count <= Self.maxKeyLength
        else { return fail("key must be a string of at most \(Self.maxKeyLength) characters") }
        request = .auth(key: key)
      }
    } else {
      return fail("unknown op \(echo(name))")
    }
    return .success(ClientMessage(request: request, id: id))
  }

  /// A session command's fields, or the message of the `bad_request` they get.
  private static func decodeCommand(
    _ op: SessionCommand.Op, _ fields: [String: JSONValue], defaultSeconds: Int
  ) -> Result<ClientRequest, DecodeFailure> {
    switch op {
    case .start:
      var length: StartLength?
      if let raw = fields["seconds"] {
        guard let value = raw.integer, SessionRecord.secondsRange.contains(value) else {
          return .failure(
            "seconds must be an integer from \(SessionRecord.secondsRange.lowerBound) to \(SessionRecord.secondsRange.upperBound)"
          )
        }
        length = .seconds(value)
      }
      if let raw = fields["until"] {
        guard length == nil else { return .failure("give seconds or until, not both") }
        let range = SessionRecord.epochMsRange
        guard let value = raw.integer, range.contains(Int64(value)) else {
          return .failure(
            "until must be an integer from \(range.lowerBound) to \(range.upperBound): a deadline in epoch milliseconds"
          )
        }
        length = .until(Int64(value))
      }
      var finishedLabel: String?
      if let raw = fields["finishedLabel"] {
        guard case .string(let label) = raw, SessionRecord.isValidFinishedLabel(label) else {
          return .failure(
            "finishedLabel must be a string of 1 to \(SessionConfig.maxFinishedLabelLength) characters, none of them a control character"
          )
        }
        finishedLabel = label
      }
      return .success(
        .command(.start(length ?? .seconds(defaultSeconds), finishedLabel: finishedLabel)))
    case .cancel:
      return .success(.command(.cancel))
    case .pause:
      return .success(.command(.pause))
    case .resume:
      return .success(.command(.resume))
    case .adjust:
      let range = SessionRecord.adjustRange
      guard let value = fields["seconds"]?.integer, value != 0, range.contains(value) else {
        return .failure(
          "seconds must be a non-zero integer from \(range.lowerBound) to \(range.upperBound)")
      }
      return .success(.command(.adjust(seconds: value)))
    case .rotateKey:
      return .success(.rotateKey)
    }
  }

  /// The message of a field's `bad_request`.
  private struct DecodeFailure: Error, ExpressibleByStringInterpolation {
    let message: String
    init(stringLiteral value: String) { message = value }
    init(stringInterpolation: DefaultStringInterpolation) {
      message = String(stringInterpolation: stringInterpolation)
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
