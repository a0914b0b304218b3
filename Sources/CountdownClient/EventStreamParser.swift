/// One Server-Sent Event.
struct ServerSentEvent: Sendable, Hashable {
  var type: String
  var data: String
  /// The last `id:` seen on the stream, as the spec carries it over to later events.
  var id: String?
}

/// The WHATWG event-stream format, read incrementally from whatever chunks the network
/// hands over: lines end in CRLF, LF or CR (a CRLF may be split across chunks), `:` starts
/// a comment, a blank line dispatches. A line longer than `maxLine` bytes, or an event whose
/// data adds up to more than `maxEvent` bytes, is an error, so a stream without newlines or
/// without blank lines cannot grow memory without bound.
struct EventStreamParser: Sendable {
  struct LineTooLong: Error, CustomStringConvertible {
    var description: String { "an event-stream line over \(EventStreamParser.maxLine / 1024) KB" }
  }

  struct EventTooLong: Error, CustomStringConvertible {
    var description: String { "an event over \(EventStreamParser.maxEvent / 1024) KB" }
  }

  static let maxLine = 64 * 1024
  /// The server's largest event, a snapshot with every label and message at its limit, is a
  /// few KB.
  static let maxEvent = 256 * 1024

  private var line: [UInt8] = []
  private var afterCR = false
  private var atStart = true
  private var type = ""
  private var data: [UInt8] = []
  private var hasData = false
  private var lastID: String?

  mutating func feed(_ bytes: some Sequence<UInt8>) throws -> [ServerSentEvent] {
    var events: [ServerSentEvent] = []
    for byte in bytes {
      if afterCR {
        afterCR = false
        if byte == 0x0A { continue }
      }
      switch byte {
      case 0x0D:
        afterCR = true
        if let e = try endLine() { events.append(e) }
      case 0x0A:
        if let e = try endLine() { events.append(e) }
      default:
        guard line.count < Self.maxLine else { throw LineTooLong() }
        line.append(byte)
      }
    }
    return events
  }

  /// Handles the line just ended; an event when it was the blank line closing one.
  private mutating func endLine() throws -> ServerSentEvent? {
    defer { line.removeAll(keepingCapacity: true) }
    if atStart {
      atStart = false
      if line.starts(with: [0xEF, 0xBB, 0xBF]) { line.removeFirst(3) }
    }
    if line.isEmpty { return dispatch() }
    if line[0] == UInt8(ascii: ":") { return nil }
    let colon = line.firstIndex(of: UInt8(ascii: ":"))
    let name = String(decoding: line[..<(colon ?? line.endIndex)], as: UTF8.self)
    var value = colon.map { line[($0 + 1)...] } ?? []
    if value.first == UInt8(ascii: " ") { value = value.dropFirst() }
    switch name {
    case "event":
      type = String(decoding: value, as: UTF8.self)
    case "data":
      guard data.count + value.count < Self.maxEvent else { throw EventTooLong() }
      if hasData { data.append(0x0A) }
      data.append(contentsOf: value)
      hasData = true
    case "id":
      if !value.contains(0) { lastID = String(decoding: value, as: UTF8.self) }
    default:
      break  // `retry` and unknown fields: the client keeps its own backoff.
    }
    return nil
  }

  private mutating func dispatch() -> ServerSentEvent? {
    defer {
      type = ""
      data.removeAll(keepingCapacity: true)
      hasData = false
    }
    guard hasData else { return nil }
    return ServerSentEvent(
      type: type.isEmpty ? "message" : type, data: String(decoding: data, as: UTF8.self),
      id: lastID)
  }
}
