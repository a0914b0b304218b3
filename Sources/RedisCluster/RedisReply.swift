/// A reply from Redis as a Swift value, copied out of hiredis's reply object
/// before hiredis frees it.
public enum RedisReply: Equatable, Sendable {
  case string(String)
  case status(String)
  case integer(Int64)
  case array([RedisReply])
  case null
  case error(String)

  /// The text of a bulk string or status reply.
  public var text: String? {
    switch self {
    case .string(let text), .status(let text): text
    case .integer(let value): String(value)
    default: nil
    }
  }

  public var elements: [RedisReply]? {
    if case .array(let elements) = self { return elements }
    return nil
  }
}
