import Foundation

#if canImport(FoundationNetworking)
  import FoundationNetworking
#endif

/// One session of a countdown server, over its HTTP API (docs/protocol.md#http-api):
/// commands with `POST …/commands`, reads with `GET`, and the live state over the
/// Server-Sent Events stream (`changes()`).
public final class CountdownClient: Sendable {
  /// How long to wait and how often to retry.
  public struct Configuration: Sendable, Hashable {
    /// Seconds a request may take before it counts as unreachable.
    public var requestTimeout: Double = 10
    /// Tries of a command in all, the first included, while failures are transient
    /// (unreachable, 429, 503, `outcome_unknown`). Each try sends the same Idempotency-Key.
    public var commandAttempts: Int = 4
    /// The delay between tries; a `Retry-After` from the server is waited out at least, up
    /// to `maxRetryAfter`.
    public var commandBackoff = Backoff(base: 0.25, cap: 2)
    /// The longest `Retry-After` honoured, in seconds, by commands and by the event
    /// stream's reconnects: a server asking for longer is tried again after this.
    public var maxRetryAfter: Double = 30
    /// The event stream's reconnect delay, as the page's.
    public var reconnectBackoff = Backoff(base: 0.5, cap: 10)
    /// Seconds of silence after which an event stream counts as lost. The server writes at
    /// least a keepalive every 13 s.
    public var streamIdleTimeout: Double = 30
    /// A PEM file of the certificates an https server is verified against, in place of the
    /// system's (a server signed by a private CA). Linux only: Apple platforms verify with
    /// the system's trust settings.
    public var caFile: String?

    public init() {}
  }

  /// The server's root, ending in `/` (`http://host:8080/`).
  public let base: URL
  /// The session id.
  public let session: String
  let token: String?
  public let configuration: Configuration

  /// The session ids the server takes: `[A-Za-z0-9_-]{1,64}`.
  public static func isValidSession(_ id: String) -> Bool {
    (1...64).contains(id.utf8.count)
      && id.utf8.allSatisfy { c in
        (c >= 0x30 && c <= 0x39) || (c >= 0x41 && c <= 0x5A) || (c >= 0x61 && c <= 0x7A)
          || c == 0x2D || c == 0x5F
      }
  }

  /// A client for `session` on the server at `base` (`http://host:8080`, or a path under
  /// which a proxy serves it). `token` is a Bearer credential: an `--api-token-file` token,
  /// or the session's controller key with `--control key`.
  public init(
    base: URL, session: String, token: String? = nil, configuration: Configuration = .init()
  ) throws {
    guard let scheme = base.scheme?.lowercased(), scheme == "http" || scheme == "https",
      base.host != nil
    else { throw CountdownError.invalidArgument("not an http or https URL: \(base)") }
    guard Self.isValidSession(session) else {
      throw CountdownError.invalidArgument(
        "not a session id (1 to 64 of A-Z a-z 0-9 _ -): \(session.prefix(64))")
    }
    if let token {
      guard (1...4096).contains(token.utf8.count),
        token.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F })
      else { throw CountdownError.invalidArgument("a token is visible ASCII without spaces") }
    }
    var parts = URLComponents(url: base, resolvingAgainstBaseURL: true)
    parts?.query = nil
    parts?.fragment = nil
    if let path = parts?.path, !path.hasSuffix("/") { parts?.path = path + "/" }
    guard let root = parts?.url else {
      throw CountdownError.invalidArgument("not a URL the client can use: \(base)")
    }
    self.base = root
    self.session = session
    self.token = token
    self.configuration = configuration
  }

  /// A client for the page's own address, as the Share panel gives it:
  /// `http://host:8080/?session=team-a` (no `session`: the page's `default`). A controller
  /// link's key (`#key=…`, or an old link's `?key=`) becomes the token unless `token` is given.
  public convenience init(
    pageURL: URL, token: String? = nil, configuration: Configuration = .init()
  ) throws {
    guard let parts = URLComponents(url: pageURL, resolvingAgainstBaseURL: true) else {
      throw CountdownError.invalidArgument("not a URL: \(pageURL)")
    }
    let query = parts.queryItems ?? []
    let named = query.last(where: { $0.name == "session" })?.value ?? ""
    let fragment = URLComponents(string: "?" + (parts.fragment ?? ""))?.queryItems ?? []
    let key =
      fragment.last(where: { $0.name == "key" })?.value
      ?? query.last(where: { $0.name == "key" })?.value
    var root = parts
    // The page is the directory's index; a path naming a file (index.html) is not the root.
    if !root.path.hasSuffix("/") {
      root.path = String(root.path[..<(root.path.lastIndex(of: "/") ?? root.path.startIndex)]) + "/"
    }
    guard let url = root.url else { throw CountdownError.invalidArgument("not a URL: \(pageURL)") }
    try self.init(
      base: url, session: named.isEmpty ? "default" : named, token: token ?? key,
      configuration: configuration)
  }

  /// `api/v1/sessions/{id}` plus `suffix`, under `base`.
  func endpoint(_ suffix: String = "") -> URL {
    // The id is [A-Za-z0-9_-] only: nothing to escape.
    URL(string: "api/v1/sessions/\(session)\(suffix)", relativeTo: base)!.absoluteURL
  }

  func request(_ url: URL, method: String) -> URLRequest {
    var r = URLRequest(url: url)
    r.httpMethod = method
    r.timeoutInterval = configuration.requestTimeout
    r.setValue("application/json", forHTTPHeaderField: "Accept")
    if let token { r.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization") }
    return r
  }

  // MARK: - Commands and reads

  /// Whether `key` is one the server takes: 1 to 255 visible ASCII characters.
  public static func isValidIdempotencyKey(_ key: String) -> Bool {
    (1...255).contains(key.utf8.count) && key.utf8.allSatisfy { $0 >= 0x21 && $0 <= 0x7E }
  }

  /// Sends `command` and returns the server's ack, or throws `CountdownError`.
  ///
  /// Transient failures (no answer, `429`, `503`, `outcome_unknown`) are retried up to
  /// `configuration.commandAttempts` tries in all, each with the same `Idempotency-Key`, so
  /// the command applies once however many tries reach the server. Without a key, a new
  /// random one is made for this call, except for `rotateKey`: a keyed answer is built from
  /// what the server remembers, which never holds a key in clear, so a keyed `rotate_key`
  /// would be acked without its new key (a retried rotation only makes another valid key).
  public func send(_ command: Command, idempotencyKey: String? = nil) async throws -> Ack {
    let key = idempotencyKey ?? (command == .rotateKey ? nil : UUID().uuidString)
    if let key, !Self.isValidIdempotencyKey(key) {
      throw CountdownError.invalidArgument(
        "an Idempotency-Key is 1 to 255 visible ASCII characters")
    }
    var req = request(endpoint("/commands"), method: "POST")
    req.setValue("application/json", forHTTPHeaderField: "Content-Type")
    if let key { req.setValue(key, forHTTPHeaderField: "Idempotency-Key") }
    req.httpBody = try command.body()
    let (data, _, _) = try await perform(req, attempts: configuration.commandAttempts)
    return try decode(Ack.self, from: data, status: 200)
  }

  /// Reads the session's snapshot (`GET /api/v1/sessions/{id}`). A session nobody opened
  /// reads as idle at seq 0; reading creates nothing.
  public func fetch() async throws -> SessionSnapshot {
    try await fetchTimed().snapshot
  }

  /// The snapshot, with when its request went out and its answer came in, for the clock.
  func fetchTimed() async throws -> (snapshot: SessionSnapshot, sentAt: Date, receivedAt: Date) {
    let (data, sentAt, receivedAt) = try await perform(
      request(endpoint(), method: "GET"), attempts: configuration.commandAttempts)
    return (try decode(SessionSnapshot.self, from: data, status: 200), sentAt, receivedAt)
  }

  /// The server's clock offset, from a read of the session: a fresh sample for `clock`.
  public func measureClock(into clock: inout ClockOffset) async throws {
    let (snapshot, sentAt, receivedAt) = try await fetchTimed()
    clock.add(serverTime: snapshot.serverTime, sentAt: sentAt, receivedAt: receivedAt)
  }

  /// One request, retried while it fails transiently; the body of a 200, with the times of
  /// the last try's send and answer.
  func perform(_ req: URLRequest, attempts: Int) async throws -> (Data, Date, Date) {
    var attempt = 0
    while true {
      let sentAt = Date()
      do {
        let answer = try await exchange(req)
        if answer.status == 200 { return (answer.body, sentAt, Date()) }
        throw Self.refusal(
          status: answer.status, body: answer.body, retryAfter: Self.retryAfter(answer.retryAfter),
          location: answer.location)
      } catch let error as CountdownError {
        attempt += 1
        guard error.isTransient, attempt < max(1, attempts) else { throw error }
        var delay = configuration.commandBackoff.delay(
          attempt: attempt - 1, random: Double.random(in: 0..<1))
        if case .refused(let r) = error, let after = r.retryAfter {
          delay = max(delay, min(after, configuration.maxRetryAfter))
        }
        try await Task.sleep(nanoseconds: UInt64(delay * 1_000_000_000))
      }
    }
  }

  /// One round trip, whatever its status, bounded in time and size (`Exchange`).
  func exchange(_ req: URLRequest) async throws -> Exchange.Answer {
    do {
      #if canImport(Glibc)
        return try await Exchange.perform(
          req, timeout: configuration.requestTimeout, caFile: configuration.caFile)
      #else
        return try await Exchange.perform(req, timeout: configuration.requestTimeout)
      #endif
    } catch let error as CountdownError {
      throw error
    } catch {
      throw CancellationError()
    }
  }

  /// Whole seconds from a `Retry-After` header, at most an hour; nil for none or a date.
  static func retryAfter(_ header: String?) -> Double? {
    guard let header, header.utf8.count <= 10, let s = Int(header), (0...3600).contains(s) else {
      return nil
    }
    return Double(s)
  }

  /// The error an answer other than 200 stands for: the server's error object when it
  /// sent one, else what the status says. A redirect is named with where it points: it is
  /// never followed.
  static func refusal(status: Int, body: Data, retryAfter: Double?, location: String? = nil)
    -> CountdownError
  {
    struct ErrorObject: Decodable {
      let type: String
      let code: String
      let message: String
    }
    if let e = try? JSONDecoder().decode(ErrorObject.self, from: body), e.type == "error",
      (1...64).contains(e.code.utf8.count)
    {
      return .refused(
        ServerRefusal(
          code: ErrorCode(rawValue: e.code), message: String(e.message.prefix(1024)),
          status: status, retryAfter: retryAfter))
    }
    if (300..<400).contains(status) {
      let to = location.map { " to " + String($0.prefix(200)) } ?? ""
      return .badResponse(status: status, "a redirect\(to), not followed")
    }
    let text = String(decoding: body.prefix(200), as: UTF8.self)
    if [502, 503, 504].contains(status) {
      return .refused(
        ServerRefusal(
          code: .unavailable, message: "HTTP \(status) \(text)", status: status,
          retryAfter: retryAfter))
    }
    return .badResponse(status: status, text.isEmpty ? "no error object" : text)
  }

  func decode<T: Decodable>(_ type: T.Type, from data: Data, status: Int) throws -> T {
    do {
      return try JSONDecoder().decode(T.self, from: data)
    } catch {
      throw CountdownError.badResponse(status: status, "\(T.self): \(Self.describe(error))")
    }
  }

  static func describe(_ error: any Error) -> String {
    if let e = error as? URLError {
      return e.localizedDescription + " (URLError \(e.code.rawValue))"
    }
    if let e = error as? DecodingError {
      switch e {
      case .dataCorrupted(let c), .keyNotFound(_, let c), .typeMismatch(_, let c),
        .valueNotFound(_, let c):
        let path = c.codingPath.map(\.stringValue).joined(separator: ".")
        return path.isEmpty ? c.debugDescription : "\(path): \(c.debugDescription)"
      @unknown default: return "\(e)"
      }
    }
    return "\(error)"
  }
}
