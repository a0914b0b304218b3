/// Why an upgrade (or, for `sessionCap`, a join just after it) was refused.
public enum RefusalCause: String, CaseIterable, Sendable {
  case badVersion = "bad_version"
  case badKey = "bad_key"
  case badSessionID = "bad_session_id"
  case origin
  case perIP = "per_ip"
  case totalCap = "total_cap"
  case draining
  case sessionCap = "session_cap"
  /// A header or URL argument that is present but cannot be read whole.
  case badHeader = "bad_header"

  /// The HTTP status of a refusal during the handshake.
  var status: UInt32 {
    switch self {
    case .badVersion: 426
    case .badKey, .badHeader: 400
    case .badSessionID: 404
    case .origin: 403
    case .perIP: 429
    case .totalCap, .draining, .sessionCap: 503
    }
  }
}
