import Testing

@testable import CountdownCLI

@Suite struct TokenTests {
  private func token(file: String? = nil, env: String? = nil) -> Result<String?, UsageError> {
    Result { () throws(UsageError) in
      try resolveToken(
        fileText: file, fileName: file == nil ? nil : "/t",
        environment: env.map { ["COUNTDOWN_TOKEN": $0] } ?? [:])
    }
  }

  /// The file wins over the environment, the line end an editor leaves is dropped, and no
  /// token at all is none rather than an empty one.
  @Test func sources() throws {
    #expect(try token(env: "abc").get() == "abc")
    #expect(try token(file: "from-file\n", env: "abc").get() == "from-file")
    #expect(try token(file: "  t0k\r\n").get() == "t0k")
    #expect(try token().get() == nil)
  }

  /// Anything that cannot go in a header as one token is refused: empty, NUL, a space or line
  /// break inside, non-ASCII, over 4096 bytes.
  @Test func badTokens() throws {
    for bad in [
      "", "\n", "a\u{0}b", "two words", "a\nb", "tök", String(repeating: "a", count: 4097),
    ] {
      guard case .failure(let e) = token(file: bad) else {
        Issue.record("accepted \(bad.debugDescription.prefix(40))")
        continue
      }
      #expect(e.message.contains("token file"))
      guard case .failure = token(env: bad) else {
        Issue.record("accepted from env \(bad.debugDescription.prefix(40))")
        continue
      }
    }
    #expect(try token(file: String(repeating: "a", count: 4096)).get()?.count == 4096)
  }
}
