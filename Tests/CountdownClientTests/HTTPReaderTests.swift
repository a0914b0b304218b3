import Foundation
import Testing

@testable import CountdownClient

/// The HTTP/1.1 response reader of the Linux event stream, without a network.
struct HTTPReaderTests {
  typealias Reader = HTTPResponseReader

  /// Everything `bytes` gives, fed `size` bytes at a time, then the close.
  static func read(_ text: String, size: Int, close: Bool = true) throws -> [Reader.Event] {
    var reader = Reader()
    let bytes = Array(text.utf8)
    var events: [Reader.Event] = []
    var i = 0
    while i < bytes.count {
      events += try reader.feed(bytes[i..<min(i + size, bytes.count)])
      i += size
    }
    if close { events += try reader.finish() }
    return events
  }

  /// The body joined, whatever the cut.
  static func body(_ events: [Reader.Event]) -> String {
    var bytes: [UInt8] = []
    for case .body(let b) in events { bytes += b }
    return String(decoding: bytes, as: UTF8.self)
  }

  /// Chunked, Content-Length and read-to-close bodies come out whole however the bytes are
  /// cut, a CRLF split across reads, chunk extensions and trailers included.
  @Test(arguments: [1, 2, 5, 64, 4096])
  func framings(size: Int) throws {
    let chunked = try Self.read(
      "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
        + "5;x=y\r\nhello\r\n1\r\n \r\nA\r\n0123456789\r\n0\r\nTrailer: t\r\n\r\n", size: size,
      close: false)
    #expect(
      chunked.first
        == .head(
          status: 200,
          headers: [
            .init(name: "content-type", value: "text/event-stream"),
            .init(name: "transfer-encoding", value: "chunked"),
          ]))
    #expect(Self.body(chunked) == "hello 0123456789")
    #expect(chunked.last == .end)
    let sized = try Self.read(
      "HTTP/1.1 503 No\r\nContent-Length: 4\r\nRetry-After:  7 \r\n\r\nbodyEXTRA", size: size,
      close: false)
    #expect(Self.body(sized) == "body" && sized.last == .end)
    if case .head(let status, let headers) = sized.first {
      #expect(status == 503 && headers.value("retry-after") == "7")
    }
    let toClose = try Self.read("HTTP/1.0 200 OK\n\ndata: 1\n\n", size: size)
    #expect(Self.body(toClose) == "data: 1\n\n" && toClose.last == .end)
  }

  /// What a peer controls is bounded: a head over 16 KB, a chunk line over 1 KB, a chunk
  /// size past 15 hex digits are refused, and none grows memory first.
  @Test func limits() throws {
    let big = "HTTP/1.1 200 OK\r\nX: " + String(repeating: "y", count: 1 << 20) + "\r\n\r\n"
    #expect(throws: Reader.Malformed.self) { try Self.read(big, size: 65536) }
    let fits =
      "HTTP/1.1 200 OK\r\nX: " + String(repeating: "y", count: Reader.maxHead - 25) + "\r\n\r\n"
    #expect(try Self.read(fits, size: 65536).count == 2)
    let line =
      "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1" + String(repeating: ";", count: 1024)
    #expect(throws: Reader.Malformed.self) { try Self.read(line, size: 100, close: false) }
    for size in ["1000000000000000", "-1", "zz", "", "0x10", "7fffffffffffffff"] {
      let text = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n\(size)\r\n"
      #expect(throws: Reader.Malformed.self) { try Self.read(text, size: 7, close: false) }
    }
  }

  /// Responses that are not whole or not HTTP are errors, never a short body read as whole.
  @Test(arguments: [
    "", "HTTP/1.1 200 OK\r\n", "\u{0}\u{1B}[2J\r\n\r\n", "HTTP/1.1 20 OK\r\n\r\n",
    "HTTP/2 200\r\n\r\n", "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nabc",
    "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n",
    "HTTP/1.1 200 OK\r\nContent-Length: 99999999999999999999\r\n\r\n",
    "HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n",
    "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nab",
    "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabc\r\n",
    "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n", "HTTP/1.1 200 OK\r\n: x\r\n\r\n",
  ])
  func malformed(text: String) {
    #expect(throws: Reader.Malformed.self) { try Self.read(text, size: 3) }
  }
}
