/// The `code` of an error message, as documented in the README.
public enum ErrorCode: String, Error, Equatable, Sendable, CaseIterable {
  case badJSON = "bad_json"
  case badRequest = "bad_request"
  case busy
  case notRunning = "not_running"
  case notPaused = "not_paused"
  /// `done` or `fail` when the session is not waiting.
  case notWaiting = "not_waiting"
  case rateLimited = "rate_limited"
  case forbidden
  case tooManySessions = "too_many_sessions"
  /// Storage or the cluster could not take the command; nothing changed.
  case unavailable
  /// The cluster lost a command's reply and cannot tell whether it applied:
  /// the client should look at the state before it retries.
  case outcomeUnknown = "outcome_unknown"
}
