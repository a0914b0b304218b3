import CountdownCore
import Testing

@testable import LWSServer

/// The pure half of `/api/v1`: routes, header checks, tokens and CORS.
@Suite struct APIRouteTests {
  func route(_ method: APIRequest.Method, _ path: String, query: [String] = []) -> APIRoute {
    APIRoute.of(APIRequest(method: method, path: path, query: query))
  }

  /// Each endpoint takes its method; others get 405 with Allow; OPTIONS is a preflight.
  @Test func routesByMethodAndPath() {
    #expect(route(.get, "/api/v1/sessions/abc") == .read(session: "abc"))
    #expect(route(.head, "/api/v1/sessions/abc") == .read(session: "abc"))
    #expect(route(.post, "/api/v1/sessions/abc/commands") == .command(session: "abc"))
    #expect(route(.get, "/api/v1/sessions/abc/events") == .events(session: "abc"))
    #expect(route(.get, "/api/v1/openapi.json") == .openAPI)
    #expect(route(.get, "/api/v1/sessions") == .list(after: nil, limit: 100))
    #expect(
      route(.post, "/api/v1/sessions/abc")
        == .refuse(.methodNotAllowed(allow: "GET, HEAD, OPTIONS")))
    #expect(
      route(.get, "/api/v1/sessions/abc/commands")
        == .refuse(.methodNotAllowed(allow: "POST, OPTIONS")))
    #expect(route(.options, "/api/v1/sessions/abc/commands") == .preflight(methods: "POST"))
    #expect(
      route(.delete, "/api/v1/sessions/abc")
        == .refuse(.methodNotAllowed(allow: "GET, HEAD, OPTIONS")))
    #expect(route(.post, "/qr.svg") == .qrCode)
    #expect(route(.options, "/qr.svg") == .refuse(.methodNotAllowed(allow: "POST")))
  }

  /// Unknown paths, bad session ids and trailing parts are 404, never another route.
  @Test func unknownPathsAreNotFound() {
    for path in [
      "/api/v1", "/api/v1/", "/api/v1x", "/api/v1/sessions/", "/api/v1/sessions/a b",
      "/api/v1/sessions/" + String(repeating: "a", count: 65), "/api/v1/sessions/abc/",
      "/api/v1/sessions/abc/commands/x", "/api/v1/sessions/../x", "/api/v2/sessions/abc",
    ] {
      #expect(route(.get, path) == .refuse(.notFound), "\(path)")
    }
  }

  /// The list's limit is 1–1000 and its arguments are known and not repeated.
  @Test func listQueryEdges() {
    #expect(
      route(.get, "/api/v1/sessions", query: ["limit=1000", "after=b"])
        == .list(after: "b", limit: 1000))
    for query in [
      ["limit=0"], ["limit=1001"], ["limit=-1"], ["limit=9223372036854775808"], ["limit=1e3"],
      ["limit="], ["after=a b"], ["after="], ["limit=1", "limit=2"], ["page=2"],
    ] {
      guard case .refuse(.badQuery) = route(.get, "/api/v1/sessions", query: query) else {
        Issue.record("\(query) was not refused")
        continue
      }
    }
  }

  /// application/json with at most a UTF-8 charset; anything else is 415's.
  @Test func contentTypes() {
    for good in [
      "application/json", "Application/JSON", "application/json; charset=utf-8",
      "application/json;charset=\"UTF-8\"",
    ] {
      #expect(APICommandHeaders.isJSON(good), "\(good)")
    }
    for bad in [
      nil, "", "text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x",
      "application/json; charset=latin1", "application/jsonx", "application/json; boundary=1",
    ] {
      #expect(!APICommandHeaders.isJSON(bad), "\(String(describing: bad))")
    }
  }

  /// Content-Length over the cap is refused before the body is read; junk is 400.
  @Test func contentLengths() {
    #expect(APICommandHeaders.length("4096", maxBytes: 4096) == .success(4096))
    #expect(APICommandHeaders.length("4097", maxBytes: 4096) == .failure(.tooLarge))
    #expect(APICommandHeaders.length("18446744073709551616", maxBytes: 4096) == .failure(.tooLarge))
    #expect(APICommandHeaders.length(nil, maxBytes: 4096) == .failure(.lengthRequired))
    guard case .failure(.badHeader) = APICommandHeaders.length("-1", maxBytes: 4096) else {
      Issue.record("-1 accepted")
      return
    }
  }

  /// Idempotency keys are 1–255 printable ASCII characters.
  @Test func idempotencyKeys() {
    #expect(
      APICommandHeaders.idempotencyKey(String(repeating: "k", count: 255))
        == .success(String(repeating: "k", count: 255)))
    for bad in ["", String(repeating: "k", count: 256), "a b", "é"] {
      guard case .failure = APICommandHeaders.idempotencyKey(bad) else {
        Issue.record("\(bad) accepted")
        continue
      }
    }
  }

  /// Only listed origins get CORS headers; preflights name the methods and headers.
  @Test func corsOnlyForListedOrigins() {
    let cors = CORSPolicy(allowed: ["https://deck.example"])
    #expect(
      cors.headers(origin: "https://deck.example").contains {
        $0.0 == "access-control-allow-origin"
      })
    #expect(
      !cors.headers(origin: "https://evil.example").contains {
        $0.0 == "access-control-allow-origin"
      })
    let preflight = cors.preflightHeaders(origin: "https://deck.example", methods: "POST")
    #expect(preflight.contains { $0 == ("access-control-allow-methods", "POST") })
    #expect(
      preflight.contains {
        $0.0 == "access-control-allow-headers" && $0.1.contains("idempotency-key")
      })
  }

  /// Statuses follow PLAN18's map; 429 and 503 carry Retry-After.
  @Test func statusMap() {
    #expect(APIResponse.status(of: nil) == 200)
    #expect(APIResponse.status(of: .busy) == 409)
    #expect(APIResponse.status(of: .forbidden) == 403)
    let limited = APIResponse(answer: RequestAnswer(code: .rateLimited, body: []))
    #expect(limited.status == 429 && limited.headers.contains { $0.0 == "retry-after" })
    let full = APIResponse(answer: RequestAnswer(code: .tooManySessions, body: []))
    #expect(full.status == 503 && full.headers.contains { $0.0 == "retry-after" })
  }
}

/// An answer's bytes on the wire.
@Suite struct APIResponseTests {
  /// Status line, the answer's headers then the extra ones, the length of the
  /// body, and `connection: close` on every answer.
  @Test func wireForm() {
    let body = Array(#"{"a":1}"#.utf8)
    let text = String(
      decoding: APIResponse(status: 429, body: body, headers: [("retry-after", "1")]).bytes(
        extra: [("vary", "origin")]), as: UTF8.self)
    #expect(text.hasPrefix("HTTP/1.1 429 Too Many Requests\r\ncontent-type: application/json\r\n"))
    #expect(text.contains("retry-after: 1\r\nvary: origin\r\n"))
    #expect(text.contains("content-length: 7\r\nconnection: close\r\n"))
    #expect(text.hasSuffix("\r\n\r\n{\"a\":1}"))
    let closing = String(
      decoding: APIResponse(.tooLarge).bytes(extra: []), as: UTF8.self)
    #expect(closing.hasPrefix("HTTP/1.1 413 ") && closing.contains("connection: close\r\n"))
  }
}

/// `--api-token-file`'s tokens.
@Suite struct APITokensTests {
  /// Blank lines are skipped and each token is found by its index; near misses are not.
  @Test func parsesAndMatches() throws {
    let tokens = try APITokens(
      parsing: Array("\nfirst-token-0123456\r\n\n  \nsecond-token-abcdef\n".utf8))
    #expect(tokens.count == 2)
    #expect(tokens.match("first-token-0123456") == 0)
    #expect(tokens.match("second-token-abcdef") == 1)
    for miss in ["first-token-012345", "first-token-01234567", "", "second-token-abcdeF"] {
      #expect(tokens.match(miss) == nil)
    }
    #expect(!tokens.description.contains("first"))
  }

  /// Short tokens, spaces inside, and an empty file refuse to start.
  @Test func refusesBadFiles() {
    #expect(throws: APITokens.ParseError.tooShort(line: 1)) {
      try APITokens(parsing: Array("short\n".utf8))
    }
    #expect(throws: APITokens.ParseError.notPrintable(line: 2)) {
      try APITokens(parsing: Array("good-token-0123456\nhas a space in it ok\n".utf8))
    }
    #expect(throws: APITokens.ParseError.none) { try APITokens(parsing: Array("\n\n".utf8)) }
    #expect(throws: APITokens.ParseError.self) { try APITokens(file: "/nonexistent/tokens") }
  }
}

/// What the server makes of bytes lws's HTTP parser gave up on.
@Suite struct UnparsedRequestTests {
  /// A method token and a target give the target's path, decoded, without its query.
  @Test func aMethodLwsDoesNotKnowHasItsPathRead() {
    for (line, path) in [
      ("TRACE /api/v1/sessions/a HTTP/1.1\r\n", "/api/v1/sessions/a"),
      ("QUERY /api/v1/sessions?limit=0 HTTP/1.1\r\n", "/api/v1/sessions"),
      ("FOO /api/v1/sessions/%61b%zz%4 HTTP/1.1\r\n", "/api/v1/sessions/ab%zz%4"),
      ("CONNECT example.com:443 HTTP/1.1\r\n", "example.com:443"),
      ("TRACE /a#frag", "/a"), ("M /%00", "/\u{0}"),
    ] {
      #expect(UnparsedRequest(Array(line.utf8)).path == path, "\(line)")
    }
  }

  /// Bytes that are no request line have no path, at the edges.
  @Test func aLineThatIsNoRequestHasNoPath() {
    for bytes in [
      Array("GARBAGE\r\n\r\n".utf8), [0, 1, 2], [], Array(" / HTTP/1.1\r\n".utf8),
      [0xff, 0xfe, 0x20, 0x2f], Array(repeating: UInt8(ascii: "M"), count: 33) + [0x20, 0x2f],
      Array("GET\0 /api/v1 HTTP/1.1".utf8), Array(repeating: UInt8(ascii: "a"), count: 4096),
    ] {
      #expect(UnparsedRequest(bytes).path == nil, "\(bytes.prefix(8))")
    }
  }

  /// Allow names every method a resource answers: HEAD beside GET, and OPTIONS.
  @Test func allowNamesEveryMethod() {
    #expect(APIRoute.allow("GET") == "GET, HEAD, OPTIONS")
    #expect(APIRoute.allow("GET", head: false) == "GET, OPTIONS")
    #expect(APIRoute.allow("POST") == "POST, OPTIONS")
    #expect(
      APIRoute.of(APIRequest(method: .delete, path: "/api/v1/sessions/a/commands"))
        == .refuse(.methodNotAllowed(allow: "POST, OPTIONS")))
  }

  /// An event stream has no HEAD, and every method it refuses names the same Allow.
  @Test func anEventStreamRefusesHeadAndSaysSoAlike() {
    for method in [APIRequest.Method.head, .delete, .put] {
      #expect(
        APIRoute.of(APIRequest(method: method, path: "/api/v1/sessions/a/events"))
          == .refuse(.methodNotAllowed(allow: "GET, OPTIONS")), "\(method)")
    }
  }
}
