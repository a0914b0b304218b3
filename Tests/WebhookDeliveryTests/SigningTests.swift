import Testing

@testable import WebhookDelivery

@Suite struct SigningTests {
  private func hex(_ bytes: [UInt8]) -> String {
    bytes.map {
      String($0, radix: 16).count == 1 ? "0" + String($0, radix: 16) : String($0, radix: 16)
    }
    .joined()
  }

  /// HMAC-SHA256 matches RFC 4231's vectors, a short key and one longer than a block (hashed first).
  @Test func hmacMatchesRFC4231() {
    let short = StandardWebhookSigner(key: Array("Jefe".utf8))
    #expect(
      hex(short.mac(Array("what do ya want for nothing?".utf8)))
        == "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843")
    let long = StandardWebhookSigner(key: [UInt8](repeating: 0xaa, count: 131))
    #expect(
      hex(long.mac(Array("Test Using Larger Than Block-Size Key - Hash Key First".utf8)))
        == "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54")
  }

  /// The signature is the Standard Webhooks reference libraries' for their own example.
  @Test func signatureMatchesTheSpecificationsExample() throws {
    let secret = try WebhookSecret(parsing: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
    let signer = StandardWebhookSigner(secret: secret)
    #expect(
      signer.signature(
        id: "msg_p5jXN8AQM9LWM0D4loKWxJek", timestamp: 1_614_265_330,
        body: Array(#"{"test": 2432232314}"#.utf8))
        == "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=")
  }

  /// Base64 round-trips every length's padding, and refuses what is not standard base64.
  @Test func base64RoundTripsAndRefusesBadInput() {
    for count in 0...10 {
      let bytes = (0..<count).map { UInt8(truncatingIfNeeded: $0 &* 97 &+ 251) }
      #expect(Base64.decode(Base64.encode(bytes)) == bytes)
    }
    #expect(Base64.encode(Array("foob".utf8)) == "Zm9vYg==")
    for bad in [
      "Zm9vYg=", "Zm9vY===", "Zm=vYg==", "Zm9v-g==", "Zm9v_g==", "Zm9v Yg==", "Zm9\0Yg==", "=AAA",
    ] {
      #expect(Base64.decode(bad) == nil, "\(bad)")
    }
  }

  /// A secret needs its prefix, standard base64 and a 24-64 byte key; spaces and a line end around it are fine.
  @Test func secretParsingEdges() throws {
    let key24 = Base64.encode([UInt8](repeating: 7, count: 24))
    let key64 = Base64.encode([UInt8](repeating: 7, count: 64))
    #expect(try WebhookSecret(parsing: "whsec_\(key24)\n").key.count == 24)
    #expect(try WebhookSecret(parsing: "  whsec_\(key64)\r\n").key.count == 64)
    let cases: [(String, WebhookSecret.ParseError)] = [
      ("", .empty), (" \n\t", .empty), (key24, .missingPrefix), ("WHSEC_\(key24)", .missingPrefix),
      ("whsec_", .wrongLength(0)),
      ("whsec_" + Base64.encode([UInt8](repeating: 7, count: 23)), .wrongLength(23)),
      ("whsec_" + Base64.encode([UInt8](repeating: 7, count: 65)), .wrongLength(65)),
      ("whsec_" + Base64.encode([UInt8](repeating: 7, count: 67)), .tooLong),
      ("whsec_" + String(repeating: "A", count: 4096), .tooLong),
      ("whsec_\(key24.dropLast())", .badBase64), ("whsec_\0\(key24.dropFirst())", .badBase64),
      ("whsec_ \(key24)", .badBase64), ("whsec_" + key24.replacing("B", with: "-"), .badBase64),
    ]
    for (text, expected) in cases {
      #expect(throws: expected, "\(text.prefix(40))") { try WebhookSecret(parsing: text) }
    }
  }

  /// Only http and https URLs with a host pass; spaces, control characters, NUL and 4 KB are refused, and the shown URL hides a password.
  @Test func endpointParsingEdges() throws {
    for good in [
      "http://127.0.0.1:9/hook", "HTTPS://example.com", "https://u:p@h.example/x?y#z",
      "http://[::1]:8080/x", "http://[::1]/x", "http://h:65535",
    ] {
      #expect(try WebhookEndpoint(parsing: good).url == good)
    }
    for bad in [
      "", "ftp://h/x", "file:///etc/passwd", "http://", "http:///x", "http://:80/x", "h/x",
      "http://h/a b", "http://h/\0", "http://h/\u{7f}", "http://h/\n",
      "http://h/" + String(repeating: "a", count: 4096), "http://h:0/", "http://h:65536/",
      "http://h:99999999999999999999/", "http://h:-1/", "http://h:abc/", "http://h:/",
      "http://h:+80/", "http://[::1/x", "http://[::1]x/", "http://[::1]:0/",
    ] {
      #expect(throws: WebhookConfigError.self, "\(bad.prefix(40))") {
        try WebhookEndpoint(parsing: bad)
      }
    }
  }

  /// Logs and --print-config show only scheme://host[:port]: a secret in the userinfo, the
  /// path or the query is replaced by one marker, the whole URL's SHA-256 prefix.
  @Test func shownURLHidesPathQueryAndPassword() throws {
    // printf %s 'https://u:p@h.example/x' | sha256sum
    #expect(
      try WebhookEndpoint(parsing: "https://u:p@h.example/x").description
        == "https://h.example/[redacted:d576aa16]")
    for (url, shown) in [
      ("https://hooks.example.com/PATH-SECRET", "https://hooks.example.com"),
      ("https://hooks.example.com/hook?token=QUERY-SECRET", "https://hooks.example.com"),
      ("http://[::1]:8080/x#FRAGMENT-SECRET", "http://[::1]:8080"),
      ("http://127.0.0.1:9?token=QUERY-SECRET", "http://127.0.0.1:9"),
      ("http://user:PASSWORD@127.0.0.1:9", "http://127.0.0.1:9"),
    ] {
      let description = try WebhookEndpoint(parsing: url).description
      #expect(description.hasPrefix(shown + "/[redacted:"), "\(description)")
      #expect(!description.contains("SECRET") && !description.contains("PASSWORD"))
    }
    // Nothing to hide: shown as given.
    for url in ["https://h.example", "https://h.example/", "http://[::1]:8080/"] {
      #expect(try WebhookEndpoint(parsing: url).description == url)
    }
    // Two endpoints on one host stay apart.
    #expect(
      WebhookEndpoint.redacted("https://h.example/a")
        != WebhookEndpoint.redacted("https://h.example/b"))
    // Text that did not parse is shown the same way (the --webhook error message).
    #expect(WebhookEndpoint.redacted("ftp://u:p@h/SECRET").hasPrefix("ftp://h/[redacted:"))
    #expect(!WebhookEndpoint.redacted("h/SECRET").contains("SECRET"))
  }

  /// The event filter takes the seven types, in any order with spaces after commas, and nothing else.
  @Test func eventFilterParsing() throws {
    let filter = try WebhookEventFilter(parsing: "session.started, session.finished")
    #expect(filter.types == [.started, .finished])
    #expect(filter.description == "session.started,session.finished")
    for bad in ["", "session.started,", "session.bogus", "SESSION.STARTED", "session.started\0"] {
      #expect(throws: WebhookConfigError.self, "\(bad)") { try WebhookEventFilter(parsing: bad) }
    }
  }
}
