/// WebSocket close codes the server sends (RFC 6455 §7.4.1). The page reads
/// the same numbers from `Public/constants.js`; a unit test compares them.
public enum CloseCode: UInt16, Sendable, CaseIterable {
  case goingAway = 1001
  case unsupportedData = 1003
  case invalidPayload = 1007
  case policyViolation = 1008
  case messageTooBig = 1009
  /// Only the test-only echo route sends it, for a connection it lost track of.
  case internalError = 1011
  case tryAgainLater = 1013
}
