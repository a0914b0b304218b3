import Testing

@testable import LWSServer

@Suite struct FrameAncestorsTests {
  /// 'self' and http(s) origins are taken, lowercased, in order, once each.
  @Test func takesSelfAndOrigins() throws {
    let list = try FrameAncestors(
      parsing: "https://OBS.example.com,'self',http://127.0.0.1:8081,https://obs.example.com")
    #expect(list.sources == ["https://obs.example.com", "'self'", "http://127.0.0.1:8081"])
    #expect(try FrameAncestors(parsing: "http://[::1]:9000").sources == ["http://[::1]:9000"])
  }

  /// The policy names exactly the sources, and no header says deny.
  @Test func headersNameTheSourcesAndDropTheDeny() throws {
    let headers = try FrameAncestors(parsing: "'self',https://a.example").headers
    let csp = try #require(headers.first { $0.name == "content-security-policy:" }).value
    // lws 4.1.6's own policy (what the server sends without the flag), with only the
    // frame-ancestors directive changed.
    let lws =
      "default-src 'none'; img-src 'self' data: ; script-src 'self'; font-src 'self'; "
      + "style-src 'self'; connect-src 'self' ws: wss:; frame-ancestors 'none'; "
      + "base-uri 'none';form-action 'self';"
    #expect(
      csp
        == lws.replacing(
          "frame-ancestors 'none'", with: "frame-ancestors 'self' https://a.example"))
    #expect(!headers.contains { $0.name.lowercased().hasPrefix("x-frame-options") })
    #expect(headers.contains { $0 == ("x-content-type-options:", "nosniff") })
    #expect(headers.contains { $0 == ("referrer-policy:", "no-referrer") })
  }

  /// Anything that could change the policy's meaning, or is no origin, is refused.
  @Test func refusesWhatIsNotASource() {
    for text in [
      "https://a.example https://b.example", "https://a.example;script-src *", "*", "'none'",
      "'unsafe-inline'", "self", "https://a.example/", "https://a.example/path", "ftp://a.example",
      "https://", "https://a.example:99999", "https://a.example:-1", "https://u@a.example",
      "https://a.example\u{0}", "https://a.example\r\nx-frame-options: deny", "https://a.example\t",
      "https://\u{e9}.example", "https://a.example,", ",https://a.example", "https://*.example",
      "https://a.example:18446744073709551616", "https://a.example:9223372036854775808",
      "data:", "https://a.example\u{7f}",
    ] {
      #expect(throws: FrameAncestors.ParseError.self, "\(text.debugDescription)") {
        try FrameAncestors(parsing: text)
      }
    }
  }

  /// Empty, too long (a 4 KB list) and too many sources each have their own error.
  @Test func refusesEmptyLongAndMany() {
    #expect(throws: FrameAncestors.ParseError.empty) { try FrameAncestors(parsing: "") }
    let long = "https://" + String(repeating: "a", count: 4096) + ".example"
    #expect(throws: FrameAncestors.ParseError.tooLong) { try FrameAncestors(parsing: long) }
    let many = (1...17).map { "http://a\($0).example" }.joined(separator: ",")
    #expect(throws: FrameAncestors.ParseError.tooMany) { try FrameAncestors(parsing: many) }
    let sixteen = (1...16).map { "http://a\($0).example" }.joined(separator: ",")
    #expect((try? FrameAncestors(parsing: sixteen))?.sources.count == 16)
  }

  /// A refused source is shown in printable ASCII, so a control character cannot reach the terminal.
  @Test func errorShowsTheSourceEscaped() {
    let error = FrameAncestors.ParseError.badSource("https://a\u{1b}[2J")
    #expect(error.description.contains("https://a\\u{1B}[2J"))
    #expect(!error.description.unicodeScalars.contains { $0.value < 0x20 })
  }
}
