/// Every way talking to Redis fails, as one type: hiredis's error codes and
/// Redis's error replies are turned into it in one place (`HiredisBridge`),
/// so callers match on `kind` and show `description`.
public struct RedisError: Error, Equatable, Sendable, CustomStringConvertible {
  public enum Kind: String, Equatable, Sendable {
    /// The address cannot be used (not an IP address, a bad port, a bad URL).
    case badAddress
    /// No connection, or it broke before the reply came.
    case disconnected
    /// Our own deadline for a reply passed (hiredis 0.14 has none of its own).
    case timeout
    /// Redis answered with an error reply.
    case reply
    /// The reply was not what the caller expected.
    case protocolViolation
    /// Redis refused the credentials, or wants some and got none.
    case authentication
  }

  public let kind: Kind
  public let message: String

  public init(_ kind: Kind, _ message: String) {
    self.kind = kind
    self.message = message
  }

  /// An error reply, as an authentication failure when it is one (NOAUTH,
  /// WRONGPASS, or any refusal of AUTH itself).
  static func reply(_ message: String, toAuth: Bool = false) -> RedisError {
    let refused = ["NOAUTH", "WRONGPASS", "NOPERM"].contains { message.hasPrefix($0) }
    return RedisError(toAuth || refused ? .authentication : .reply, message)
  }

  public var description: String {
    switch kind {
    case .badAddress: "bad Redis address: \(message)"
    case .disconnected: "Redis is unreachable: \(message)"
    case .timeout: "Redis did not answer in time: \(message)"
    case .reply: "Redis refused: \(message)"
    case .protocolViolation: "unexpected answer from Redis: \(message)"
    case .authentication:
      "Redis refused to authenticate this server (check the user in --redis and the password in "
        + "--redis-password-file): \(message)"
    }
  }
}
