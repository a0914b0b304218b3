/// A close the server decides on: the one value every step that may end a
/// connection hands on (the gate, the hub, the socket layer's reads and
/// writes), so each carries the same thing to the one place that sends it.
public struct CloseDirective: Equatable, Sendable {
  public var code: CloseCode
  /// Said in the Close frame and logged; lws sends at most 120 bytes of it.
  public var reason: String

  public init(_ code: CloseCode, _ reason: String) {
    self.code = code
    self.reason = reason
  }
}
