/// Turns client text into commands (`WireCodec+Decode.swift`), and state into
/// server messages.
public enum WireCodec {
  /// The largest client message, counted across fragments (close 1009 past it).
  public static let maxMessageBytes = 4096
  /// The longest key an `auth` may present: real keys are 32 hex digits, and
  /// anything longer only costs a hash.
  public static let maxKeyLength = 128

  /// The longest ping `t` literal; the pong repeats it.
  public static let maxPingTLength = 32
  /// Client text quoted in an error message is cut to this many characters,
  /// so an error costs about the same whatever the client sent.
  public static let maxEchoLength = 32

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

  /// `{"type":"ack",...}`; a `rotate_key`'s ack carries the new key, and an
  /// HTTP command's the state it left (a request has no snapshot to read).
  public static func ack(
    id: CommandID?, seq: UInt64, key: String? = nil, state: CountdownState? = nil
  ) -> [UInt8] {
    var writer = JSONWriter(reservingCapacity: state == nil ? 48 : 256)
    writer.raw("{\"type\":\"ack\",\"id\":")
    writeID(id, to: &writer)
    writer.raw(",\"seq\":")
    writer.integer(seq)
    if let key {
      writer.raw(",\"key\":")
      writer.string(key)
    }
    if let state {
      writer.raw(",\"state\":")
      writeFields(.all, of: state, to: &writer)
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

  static func writeFields(
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
    if fields.contains(.startedAt) {
      key("\"startedAt\":")
      if let startedAt = state.startedAt { writer.integer(startedAt) } else { writer.raw("null") }
    }
    if fields.contains(.timeoutAt) {
      key("\"timeoutAt\":")
      if let timeoutAt = state.timeoutAt { writer.integer(timeoutAt) } else { writer.raw("null") }
    }
    if fields.contains(.outcome) {
      key("\"outcome\":")
      if let outcome = state.outcome { writer.string(outcome.rawValue) } else { writer.raw("null") }
    }
    if fields.contains(.level) {
      key("\"level\":")
      writer.string(state.level.rawValue)
    }
    if fields.contains(.overSince) {
      key("\"overSince\":")
      if let since = state.overSince { writer.integer(since) } else { writer.raw("null") }
    }
    if fields.contains(.overMs) {
      key("\"overMs\":")
      if let overMs = state.overMs { writer.integer(overMs) } else { writer.raw("null") }
    }
    if fields.contains(.overtime) {
      key("\"overtime\":")
      writer.bool(state.overtime)
    }
    if fields.contains(.warnAtSeconds) {
      key("\"warnAtSeconds\":")
      if let seconds = state.warnAtSeconds { writer.integer(seconds) } else { writer.raw("null") }
    }
    if fields.contains(.dangerAtSeconds) {
      key("\"dangerAtSeconds\":")
      if let seconds = state.dangerAtSeconds { writer.integer(seconds) } else { writer.raw("null") }
    }
    if fields.contains(.message) {
      key("\"message\":")
      if let message = state.message { writer.string(message) } else { writer.raw("null") }
    }
    if fields.contains(.blackout) {
      key("\"blackout\":")
      writer.bool(state.blackout)
    }
    writer.raw("}")
  }
}
