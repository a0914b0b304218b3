/// A server error code, as the API's error objects spell it (`busy`, `not_running`, …).
///
/// A struct rather than an enum, so that a code a newer server adds still reads as itself.
public struct ErrorCode: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
  public let rawValue: String
  public init(rawValue: String) { self.rawValue = rawValue }
  public var description: String { rawValue }

  public static let badJSON = ErrorCode(rawValue: "bad_json")
  public static let badRequest = ErrorCode(rawValue: "bad_request")
  public static let busy = ErrorCode(rawValue: "busy")
  public static let notRunning = ErrorCode(rawValue: "not_running")
  public static let notPaused = ErrorCode(rawValue: "not_paused")
  public static let notWaiting = ErrorCode(rawValue: "not_waiting")
  public static let rateLimited = ErrorCode(rawValue: "rate_limited")
  public static let forbidden = ErrorCode(rawValue: "forbidden")
  public static let tooManySessions = ErrorCode(rawValue: "too_many_sessions")
  public static let unavailable = ErrorCode(rawValue: "unavailable")
  public static let outcomeUnknown = ErrorCode(rawValue: "outcome_unknown")

  /// Every code this version knows of.
  public static let known: [ErrorCode] = [
    .badJSON, .badRequest, .busy, .notRunning, .notPaused, .notWaiting, .rateLimited, .forbidden,
    .tooManySessions, .unavailable, .outcomeUnknown,
  ]
}

/// What the server said when it refused a request: its error object and the HTTP status.
public struct ServerRefusal: Hashable, Sendable, CustomStringConvertible {
  public let code: ErrorCode
  public let message: String
  /// The HTTP status the refusal came with (409 for `busy`, 403 for `forbidden`, …).
  public let status: Int
  /// Seconds from the `Retry-After` header, when the server sent one (429 and 503).
  public let retryAfter: Double?

  public init(code: ErrorCode, message: String, status: Int, retryAfter: Double? = nil) {
    self.code = code
    self.message = message
    self.status = status
    self.retryAfter = retryAfter
  }

  public var description: String { "\(message) (\(code), HTTP \(status))" }

  /// Whether the same request may succeed later, with nothing decided about it now.
  /// `outcome_unknown` is one: a retry with the same Idempotency-Key is answered from
  /// the first try if that one applied.
  public var isTransient: Bool {
    [.rateLimited, .unavailable, .tooManySessions, .outcomeUnknown].contains(code)
      || status == 502 || status == 503 || status == 504
  }
}

/// Why a request to a countdown server failed.
public enum CountdownError: Error, Hashable, Sendable, CustomStringConvertible {
  /// The server answered with an error object.
  case refused(ServerRefusal)
  /// No answer: connection refused or lost, a timeout, a name that does not resolve.
  case unreachable(String)
  /// An answer that is not what the API describes (not JSON, a missing field, a value out of range).
  case badResponse(status: Int, String)
  /// A value this client would not send: a session id the server refuses, a URL without a host, …
  case invalidArgument(String)

  public var description: String {
    switch self {
    case .refused(let r): return r.description
    case .unreachable(let why): return "the server cannot be reached: \(why)"
    case .badResponse(let status, let why): return "unexpected answer (HTTP \(status)): \(why)"
    case .invalidArgument(let why): return why
    }
  }

  /// The server's error code, when it sent one.
  public var code: ErrorCode? {
    if case .refused(let r) = self { return r.code }
    return nil
  }

  /// Whether trying the same request again may succeed.
  public var isTransient: Bool {
    switch self {
    case .refused(let r): return r.isTransient
    case .unreachable: return true
    case .badResponse(let status, _): return status >= 500
    case .invalidArgument: return false
    }
  }
}
