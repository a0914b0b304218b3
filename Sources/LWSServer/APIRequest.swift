import CountdownCore

/// One request to `/api/v1`, read whole from lws before anything is decided:
/// pure values, so routing and every refusal are decided (and tested) here.
struct APIRequest: Equatable {
  enum Method: String, Equatable {
    case get = "GET"
    case head = "HEAD"
    case post = "POST"
    case options = "OPTIONS"
    case put = "PUT"
    case patch = "PATCH"
    case delete = "DELETE"
  }

  var method: Method
  /// The path as lws decoded it, `/api/v1/…`.
  var path: String
  /// URL arguments, each `name=value` as lws decoded it.
  var query: [String] = []
  var contentType: String?
  var contentLength: String?
  var authorization: String?
  var origin: String?
  var host: String?
  var idempotencyKey: String?

  static let prefix = "/api/v1"
}

/// Where a request goes, or why it goes nowhere.
enum APIRoute: Equatable {
  case openAPI
  case read(session: String)
  case command(session: String)
  /// `GET …/events`: the SSE stream (`CountdownServer+EventStream.swift`).
  case events(session: String)
  case list(after: String?, limit: Int)
  /// A CORS preflight for a route that takes these methods.
  case preflight(methods: String)
  /// `POST /qr.svg`: a QR code of the body (`QRCodeAnswers`).
  case qrCode
  case refuse(APIRefusal)

  /// The route of `request`'s method and path, before any header is judged.
  static func of(_ request: APIRequest) -> APIRoute {
    if request.path == QRCodeAnswers.path {
      return request.method == .post ? .qrCode : .refuse(.methodNotAllowed(allow: "POST"))
    }
    guard request.path.hasPrefix(APIRequest.prefix) else { return .refuse(.notFound) }
    let rest = request.path.dropFirst(APIRequest.prefix.count)
    let segments = rest.split(separator: "/", omittingEmptySubsequences: false).dropFirst()
    guard rest.hasPrefix("/") else { return .refuse(.notFound) }
    let parts = segments.map(String.init)
    func only(_ methods: String, _ route: APIRoute, head: Bool = true) -> APIRoute {
      switch request.method {
      case .options: return .preflight(methods: methods)
      case .head where head && methods.contains("GET"): return route
      case let method where methods.split(separator: ",").contains { $0.trimmed == method.rawValue }:
        return route
      default: return .refuse(.methodNotAllowed(allow: allow(methods, head: head)))
      }
    }
    switch parts.count {
    case 1 where parts[0] == "openapi.json":
      return only("GET", .openAPI)
    case 1 where parts[0] == "sessions":
      switch APIListQuery.parse(request.query) {
      case .success(let query): return only("GET", .list(after: query.after, limit: query.limit))
      case .failure(let refusal):
        return request.method == .options ? .preflight(methods: "GET") : .refuse(refusal)
      }
    case 2 where parts[0] == "sessions" && SessionID.isValid(parts[1]):
      return only("GET", .read(session: parts[1]))
    case 3 where parts[0] == "sessions" && SessionID.isValid(parts[1]) && parts[2] == "commands":
      return only("POST", .command(session: parts[1]))
    case 3 where parts[0] == "sessions" && SessionID.isValid(parts[1]) && parts[2] == "events":
      // A stream has no HEAD: its headers are the start of the stream.
      return only("GET", .events(session: parts[1]), head: false)
    default:
      return .refuse(.notFound)
    }
  }

  /// `Allow`: every method a resource answers, not only the ones a CORS
  /// preflight names (RFC 9110 10.2.1): a GET also answers HEAD, except an
  /// event stream's, and every resource answers OPTIONS.
  static func allow(_ methods: String, head: Bool = true) -> String {
    methods + (head && methods.contains("GET") ? ", HEAD" : "") + ", OPTIONS"
  }
}

extension Substring {
  fileprivate var trimmed: Substring {
    var text = self
    while text.first == " " { text.removeFirst() }
    while text.last == " " { text.removeLast() }
    return text
  }
}

/// A request refused by its route or headers, before the hub sees it. Each
/// body is an error object like the WebSocket's, with the nearest code.
enum APIRefusal: Error, Equatable {
  case notFound
  case methodNotAllowed(allow: String)
  case badQuery(String)
  case unsupportedType
  case tooLarge
  case lengthRequired
  case badHeader(String)
  /// No credentials where a token is required.
  case unauthorized
  /// Credentials (or an Origin) that are not accepted.
  case forbidden(String)

  var status: UInt32 {
    switch self {
    case .notFound: 404
    case .methodNotAllowed: 405
    case .badQuery, .badHeader: 400
    case .unsupportedType: 415
    case .tooLarge: 413
    case .lengthRequired: 411
    case .unauthorized: 401
    case .forbidden: 403
    }
  }

  var error: CommandError {
    switch self {
    case .notFound: CommandError(.badRequest, "no such endpoint")
    case .methodNotAllowed(let allow): CommandError(.badRequest, "this endpoint takes \(allow)")
    case .badQuery(let message), .badHeader(let message): CommandError(.badRequest, message)
    case .unsupportedType:
      CommandError(.badRequest, "a command must be sent as Content-Type: application/json")
    case .tooLarge:
      CommandError(.badRequest, "a command is at most \(WireCodec.maxMessageBytes) bytes")
    case .lengthRequired: CommandError(.badRequest, "a command needs a Content-Length")
    case .unauthorized:
      CommandError(.forbidden, "this endpoint needs Authorization: Bearer <token>")
    case .forbidden(let message): CommandError(.forbidden, message)
    }
  }

  /// Extra headers the status calls for.
  var headers: [(String, String)] {
    switch self {
    case .methodNotAllowed(let allow): [("allow", allow)]
    case .unauthorized: [("www-authenticate", "Bearer")]
    default: []
    }
  }
}

/// `?after=ID&limit=N` of the session list.
struct APIListQuery: Equatable {
  static let defaultLimit = 100
  static let maxLimit = 1000

  var after: String?
  var limit: Int

  static func parse(_ arguments: [String]) -> Result<APIListQuery, APIRefusal> {
    var query = APIListQuery(after: nil, limit: defaultLimit)
    var seen: Set<String> = []
    for argument in arguments {
      let pair = argument.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
      let name = String(pair[0])
      let value = pair.count > 1 ? String(pair[1]) : ""
      guard seen.insert(name).inserted else { return .failure(.badQuery("\(name) is repeated")) }
      switch name {
      case "after":
        guard SessionID.isValid(value) else {
          return .failure(.badQuery("after must be a session id"))
        }
        query.after = value
      case "limit":
        guard value.utf8.count <= 4, let number = Int(value), (1...maxLimit).contains(number)
        else { return .failure(.badQuery("limit must be a whole number from 1 to \(maxLimit)")) }
        query.limit = number
      default:
        return .failure(.badQuery("unknown argument \(WireCodec.echo(name))"))
      }
    }
    return .success(query)
  }
}

/// The checks a command's headers pass before its body is read.
enum APICommandHeaders {
  /// `application/json`, with at most a UTF-8 charset parameter (JSON is UTF-8).
  static func isJSON(_ contentType: String?) -> Bool {
    guard let contentType else { return false }
    let parts = contentType.split(separator: ";", omittingEmptySubsequences: false)
    guard parts[0].trimmed.lowercased() == "application/json" else { return false }
    for parameter in parts.dropFirst() {
      let pair = parameter.split(separator: "=", maxSplits: 1)
      guard pair.count == 2, pair[0].trimmed.lowercased() == "charset" else { return false }
      var value = pair[1].trimmed.lowercased()
      if value.hasPrefix("\""), value.hasSuffix("\""), value.count >= 2 {
        value = String(value.dropFirst().dropLast())
      }
      guard value == "utf-8" else { return false }
    }
    return true
  }

  /// The body's announced length, refused past `maxBytes` before any of it is read.
  static func length(_ contentLength: String?, maxBytes: Int) -> Result<Int, APIRefusal> {
    guard let contentLength else { return .failure(.lengthRequired) }
    guard !contentLength.isEmpty, contentLength.utf8.allSatisfy({ (48...57).contains($0) })
    else { return .failure(.badHeader("content-length must be a number")) }
    guard contentLength.utf8.count <= 12, let length = Int(contentLength), length <= maxBytes
    else { return .failure(.tooLarge) }
    return .success(length)
  }

  /// RFC draft-ietf-httpapi-idempotency-key: 1–255 printable ASCII characters.
  static func idempotencyKey(_ value: String?) -> Result<String?, APIRefusal> {
    guard let value else { return .success(nil) }
    guard IdempotencyKey.isValid(value) else {
      return .failure(.badHeader("Idempotency-Key must be 1 to 255 printable ASCII characters"))
    }
    return .success(value)
  }

  /// The bearer credential of `Authorization`, if any. Any other credential
  /// (another scheme, a token with a space) is one that is not accepted, as a
  /// wrong token is: the OpenAPI document's bearer scheme says nothing of a
  /// token's form, so the form is no reason for a `400`.
  static func bearer(_ authorization: String?) -> Result<String?, APIRefusal> {
    guard let authorization else { return .success(nil) }
    let parts = authorization.split(separator: " ", omittingEmptySubsequences: true)
    guard parts.count == 2, parts[0].lowercased() == "bearer" else {
      return .failure(.forbidden("Authorization must be Bearer <token>"))
    }
    return .success(String(parts[1]))
  }
}

/// CORS for `--allow-origin`'s origins: only they get an
/// `Access-Control-Allow-Origin`, the server's own pages need none.
struct CORSPolicy {
  /// Lowercased; `*` allows any.
  var allowed: [String]

  static let allowedHeaders = "content-type, authorization, idempotency-key, last-event-id"
  static let maxAgeSeconds = 600

  func headers(origin: String?) -> [(String, String)] {
    guard let origin else { return [] }
    let lowered = origin.lowercased()
    guard allowed.contains(where: { $0 == "*" || $0 == lowered }) else {
      return [("vary", "origin")]
    }
    return [("access-control-allow-origin", origin), ("vary", "origin")]
  }

  func preflightHeaders(origin: String?, methods: String) -> [(String, String)] {
    let base = headers(origin: origin)
    guard base.contains(where: { $0.0 == "access-control-allow-origin" }) else { return base }
    return base + [
      ("access-control-allow-methods", methods),
      ("access-control-allow-headers", Self.allowedHeaders),
      ("access-control-max-age", String(Self.maxAgeSeconds)),
    ]
  }
}

/// An API answer, as bytes on the wire: status line, headers, body.
struct APIResponse: Equatable {
  var status: UInt32
  var body: [UInt8]
  var headers: [(String, String)] = []

  static func == (a: APIResponse, b: APIResponse) -> Bool {
    a.status == b.status && a.body == b.body
      && a.headers.map { "\($0.0): \($0.1)" } == b.headers.map { "\($0.0): \($0.1)" }
  }

  init(status: UInt32, body: [UInt8], headers: [(String, String)] = []) {
    self.status = status
    self.body = body
    self.headers = headers
  }

  init(_ refusal: APIRefusal) {
    self.init(
      status: refusal.status, body: WireCodec.error(refusal.error), headers: refusal.headers)
  }

  /// The status of a hub answer: PLAN18's map of error codes.
  static func status(of code: ErrorCode?) -> UInt32 {
    switch code {
    case nil: 200
    case .badJSON, .badRequest: 400
    case .forbidden: 403
    case .busy, .notRunning, .notPaused, .notWaiting: 409
    case .rateLimited: 429
    case .unavailable, .tooManySessions: 503
    case .outcomeUnknown: 500
    }
  }

  /// Seconds a client should wait before trying again, for a status that says so.
  static let retryAfterSeconds = 1

  init(answer: RequestAnswer) {
    let status = Self.status(of: answer.code)
    self.init(
      status: status, body: answer.body,
      headers: status == 429 || status == 503
        ? [("retry-after", String(Self.retryAfterSeconds))] : [])
  }

  static let reasons: [UInt32: String] = [
    200: "OK", 204: "No Content", 400: "Bad Request", 401: "Unauthorized", 403: "Forbidden",
    404: "Not Found", 405: "Method Not Allowed", 409: "Conflict", 411: "Length Required",
    413: "Content Too Large", 415: "Unsupported Media Type", 426: "Upgrade Required",
    429: "Too Many Requests",
    500: "Internal Server Error", 501: "Not Implemented", 503: "Service Unavailable",
  ]

  /// The whole answer, `extra` headers (CORS, security) after the answer's
  /// own. Every answer is its connection's last (`Callbacks.swift`).
  func bytes(extra: [(String, String)], type: String = "application/json") -> [UInt8] {
    var head = "HTTP/1.1 \(status) \(Self.reasons[status] ?? "Error")\r\n"
    if status != 204 { head += "content-type: \(type)\r\n" }
    for (name, value) in headers + extra { head += "\(name): \(value)\r\n" }
    head += "cache-control: no-store\r\ncontent-length: \(body.count)\r\nconnection: close\r\n\r\n"
    return Array(head.utf8) + body
  }
}
