/// A parsed JSON value, as the command decoder needs it.
///
/// Numbers keep their literal text so an `id` can be echoed back exactly as
/// the client wrote it, and so integers are not forced through `Double`.
public indirect enum JSONValue: Equatable, Sendable {
  case null
  case bool(Bool)
  case number(String)
  case string(String)
  case array([JSONValue])
  case object([String: JSONValue])

  /// The value as an integer, when it is a number literal with no fraction
  /// or exponent that fits an `Int`: `1e2`, `5.0` and anything past ±2^63
  /// are not integers here, and `-0` is the integer 0 (which every command
  /// field then refuses, as 0 is outside its range).
  public var integer: Int? {
    guard case .number(let literal) = self,
      !literal.contains(where: { $0 == "." || $0 == "e" || $0 == "E" })
    else { return nil }
    return Int(literal)
  }
}
