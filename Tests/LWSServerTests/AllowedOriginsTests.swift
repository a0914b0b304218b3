import Testing

@testable import LWSServer

@Suite struct AllowedOriginsTests {
  /// Origins and `*` are taken lowercased, in order, with a space allowed after a comma.
  @Test func takesOriginsAndStar() throws {
    #expect(
      try AllowedOrigins.parse("https://A.example, http://127.0.0.1:8081,*,http://[::1]:9")
        == ["https://a.example", "http://127.0.0.1:8081", "*", "http://[::1]:9"])
    let longest =
      "https://" + String(repeating: "a", count: 253) + ":65535"
    #expect(try AllowedOrigins.parse(longest) == [longest])
  }

  /// `null`, NUL, a path, a trailing slash, a port past 65535 and the like are refused.
  @Test func refusesWhatIsNotAnOrigin() {
    for text in [
      "null", "NULL", "https://a.example\u{0}", "\u{0}", "https://a.example/",
      "https://a.example/path",
      "https://a.example:65536", "https://a.example:0x50", "https://a.example:-1",
      "https://a.example:9223372036854775808", "https://a.example?x", "https://a.example#x",
      "https://u@a.example", "ftp://a.example", "file://", "https://", "a.example",
      "https://a.example https://b.example", "https://a.example\r\nx: y", "https://*.example",
      "https://\u{e9}.example", "**", "https://a.example\u{7f}", "https://a.example ",
    ] {
      #expect(throws: AllowedOrigins.ParseError.self, "\(text.debugDescription)") {
        try AllowedOrigins.parse(text)
      }
    }
  }

  /// An empty list or entry says so; a 4 KB origin is refused though its name is well formed.
  @Test func refusesEmptyEntriesAndLongOrigins() {
    for text in ["", ",", "https://a.example,", ",https://a.example", "https://a.example,,*", " "] {
      #expect(throws: AllowedOrigins.ParseError.empty, "\(text.debugDescription)") {
        try AllowedOrigins.parse(text)
      }
    }
    let long = "https://" + String(repeating: "a", count: 4096) + ".example"
    #expect(throws: AllowedOrigins.ParseError.badOrigin(long)) { try AllowedOrigins.parse(long) }
    let justOver = "https://" + String(repeating: "a", count: 254) + ":65535"
    #expect(throws: AllowedOrigins.ParseError.self) { try AllowedOrigins.parse(justOver) }
  }

  /// A refused entry is shown in printable ASCII, so a control character cannot reach the terminal.
  @Test func errorShowsTheEntryEscaped() {
    let error = AllowedOrigins.ParseError.badOrigin("null\u{0}\u{1b}[2J")
    #expect(error.description.contains("null\\0\\u{1B}[2J"))
    #expect(!error.description.unicodeScalars.contains { $0.value < 0x20 })
  }
}
