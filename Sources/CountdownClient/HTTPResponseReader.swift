/// An HTTP/1.1 response read incrementally from whatever chunks a socket hands over: the
/// status line and headers, then the body as `Content-Length`, `chunked` or read to the
/// close says. Every part a peer controls has a limit, so a server that never ends a line,
/// a header block or a chunk cannot grow memory: past a limit `feed` throws.
struct HTTPResponseReader: Sendable {
  enum Event: Sendable, Equatable {
    /// The status and the headers, names lowercased, in the order sent.
    case head(status: Int, headers: [Header])
    case body([UInt8])
    /// The body is complete (never sent for a body read to the close: see `finish`).
    case end
  }

  struct Header: Sendable, Equatable {
    var name: String
    var value: String
  }

  /// Why the bytes are not an HTTP/1.1 response this client reads.
  struct Malformed: Error, Equatable, CustomStringConvertible {
    let why: String
    var description: String { why }
  }

  /// The status line and the headers together.
  static let maxHead = 16 * 1024
  /// A chunk-size line, extensions included.
  static let maxChunkLine = 1024

  private enum Body: Equatable {
    case length(Int)
    case chunked(Chunked)
    case untilClose
  }

  private enum Chunked: Equatable {
    case size
    case data(Int)
    /// The CRLF after a chunk's data.
    case dataEnd
    case trailers
  }

  private var head: [UInt8] = []
  private var body: Body? = nil

  /// Whether any byte of the answer has come.
  var started: Bool { !head.isEmpty || body != nil }
  private var line: [UInt8] = []
  private var done = false

  mutating func feed(_ bytes: some Collection<UInt8>) throws(Malformed) -> [Event] {
    var events: [Event] = []
    var rest = Array(bytes)[...]
    while !rest.isEmpty, !done {
      guard let body else {
        rest = try readHead(rest, into: &events)
        continue
      }
      switch body {
      case .untilClose:
        events.append(.body(Array(rest)))
        rest = []
      case .length(let left):
        let n = min(left, rest.count)
        events.append(.body(Array(rest.prefix(n))))
        rest = rest.dropFirst(n)
        self.body = .length(left - n)
        if left - n == 0 { finishBody(&events) }
      case .chunked(let state):
        rest = try readChunked(state, rest, into: &events)
      }
    }
    return events
  }

  /// The peer closed the connection: whether the response was whole.
  mutating func finish() throws(Malformed) -> [Event] {
    if done { return [] }
    guard let body else { throw Malformed(why: "the connection closed before the headers ended") }
    switch body {
    case .untilClose:
      done = true
      return [.end]
    case .length(let left):
      throw Malformed(why: "the connection closed \(left) bytes before the body's end")
    case .chunked:
      throw Malformed(why: "the connection closed inside a chunked body")
    }
  }

  private mutating func finishBody(_ events: inout [Event]) {
    done = true
    events.append(.end)
  }

  private mutating func readHead(_ bytes: ArraySlice<UInt8>, into events: inout [Event])
    throws(Malformed) -> ArraySlice<UInt8>
  {
    let before = head.count
    let taken = bytes.prefix(Self.maxHead + 1 - before)
    head.append(contentsOf: taken)
    // The head ends at the first empty line, LF or CRLF.
    var i = max(0, before - 3)
    while i < head.count {
      defer { i += 1 }
      guard head[i] == 0x0A else { continue }
      var end = 0
      if i + 1 < head.count, head[i + 1] == 0x0A { end = i + 2 }
      if i + 2 < head.count, head[i + 1] == 0x0D, head[i + 2] == 0x0A { end = i + 3 }
      guard end > 0 else { continue }
      head.removeLast(head.count - end)
      try parseHead(into: &events)
      return bytes.dropFirst(end - before)
    }
    guard head.count <= Self.maxHead else {
      throw Malformed(why: "headers over \(Self.maxHead / 1024) KB")
    }
    return bytes.dropFirst(taken.count)
  }

  private mutating func parseHead(into events: inout [Event]) throws(Malformed) {
    var lines = head.split(separator: 0x0A, omittingEmptySubsequences: false).map { l in
      l.last == 0x0D ? l.dropLast() : l
    }
    while lines.last?.isEmpty == true { lines.removeLast() }
    guard let statusLine = lines.first else { throw Malformed(why: "no status line") }
    // `HTTP/1.x NNN reason`: only the version and the three digits are read.
    let parts = statusLine.split(separator: 0x20, maxSplits: 2, omittingEmptySubsequences: false)
    guard parts.count >= 2, parts[0].starts(with: Array("HTTP/1.".utf8)), parts[0].count == 8,
      parts[1].count == 3, parts[1].allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }),
      let status = Int(String(decoding: parts[1], as: UTF8.self)), (100...599).contains(status)
    else { throw Malformed(why: "not an HTTP/1.1 status line") }
    var headers: [Header] = []
    for line in lines.dropFirst() {
      guard let colon = line.firstIndex(of: UInt8(ascii: ":")), colon > line.startIndex,
        line[..<colon].allSatisfy({ $0 > 0x20 && $0 < 0x7F })
      else { throw Malformed(why: "a header line without a name") }
      let name = String(decoding: line[..<colon], as: UTF8.self).lowercased()
      let value = String(decoding: line[(colon + 1)...], as: UTF8.self)
        .trimmingSpaces()
      headers.append(Header(name: name, value: value))
    }
    let codings = headers.filter { $0.name == "transfer-encoding" }.map { $0.value.lowercased() }
    let lengths = Set(headers.filter { $0.name == "content-length" }.map(\.value))
    if let last = codings.last {
      guard last.split(separator: ",").last?.trimmingSpaces() == "chunked" else {
        throw Malformed(why: "a transfer coding this client does not read: \(last.prefix(64))")
      }
      body = .chunked(.size)
    } else if let length = lengths.first {
      guard lengths.count == 1, (1...18).contains(length.utf8.count),
        length.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }), let n = Int(length)
      else { throw Malformed(why: "a bad Content-Length") }
      body = .length(n)
    } else {
      body = .untilClose
    }
    head = []
    // 1xx, 204 and 304 have no body.
    events.append(.head(status: status, headers: headers))
    if status < 200 || status == 204 || status == 304 || body == .length(0) {
      finishBody(&events)
    }
  }

  private mutating func readChunked(
    _ state: Chunked, _ bytes: ArraySlice<UInt8>, into events: inout [Event]
  ) throws(Malformed) -> ArraySlice<UInt8> {
    var rest = bytes
    switch state {
    case .data(let left):
      let n = min(left, rest.count)
      events.append(.body(Array(rest.prefix(n))))
      body = .chunked(left - n == 0 ? .dataEnd : .data(left - n))
      return rest.dropFirst(n)
    case .size, .dataEnd, .trailers:
      while let byte = rest.first {
        rest = rest.dropFirst()
        if byte != 0x0A {
          line.append(byte)
          guard line.count <= Self.maxChunkLine else {
            throw Malformed(why: "a chunk line over \(Self.maxChunkLine) bytes")
          }
          continue
        }
        if line.last == 0x0D { line.removeLast() }
        defer { line.removeAll(keepingCapacity: true) }
        switch state {
        case .dataEnd:
          guard line.isEmpty else { throw Malformed(why: "a chunk longer than its size") }
          body = .chunked(.size)
        case .trailers:
          if line.isEmpty { finishBody(&events) }
          // Trailers are read and dropped; each line counts against the chunk-line limit.
          return rest
        case .size:
          let digits = line.prefix { $0 != UInt8(ascii: ";") }.filter { $0 != 0x20 && $0 != 0x09 }
          let isHex = { (c: UInt8) in
            (0x30...0x39).contains(c) || (0x41...0x46).contains(c) || (0x61...0x66).contains(c)
          }
          guard (1...15).contains(digits.count), digits.allSatisfy(isHex),
            let size = Int(String(decoding: digits, as: UTF8.self), radix: 16)
          else { throw Malformed(why: "a bad chunk size") }
          body = .chunked(size == 0 ? .trailers : .data(size))
        case .data: break
        }
        return rest
      }
      return rest
    }
  }
}

extension String {
  /// Without the spaces and tabs at either end.
  func trimmingSpaces() -> String {
    let scalars = unicodeScalars
    guard let first = scalars.firstIndex(where: { $0 != " " && $0 != "\t" }),
      let last = scalars.lastIndex(where: { $0 != " " && $0 != "\t" })
    else { return "" }
    return String(scalars[first...last])
  }
}

extension Substring {
  func trimmingSpaces() -> String { String(self).trimmingSpaces() }
}

extension Array where Element == HTTPResponseReader.Header {
  /// The last value of header `name` (lowercase).
  func value(_ name: String) -> String? { last(where: { $0.name == name })?.value }
}
