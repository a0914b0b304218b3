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

  /// The value as an integer, when the number literal stands for one exactly
  /// and it fits an `Int`: JSON Schema's `integer`, so `5.0`, `1e2` and
  /// `-0` are the integers 5, 100 and 0, while `1.5`, `1e-1` and anything
  /// past ±2^63 (`1e19`, `1e400`) are not integers here. Never rounded, and
  /// no literal, however long its digits or exponent, costs more than a pass.
  public var integer: Int? {
    guard case .number(let literal) = self else { return nil }
    return Self.exactInteger(Array(literal.utf8))
  }

  /// The literal as `-? digits × 10^scale` (the parser checked its grammar),
  /// with the zeros that say nothing dropped, then whether that is an `Int`.
  static func exactInteger(_ literal: [UInt8]) -> Int? {
    let zero = UInt8(ascii: "0")
    let negative = literal.first == UInt8(ascii: "-")
    var index = negative ? 1 : 0
    var digits: [UInt8] = []
    var scale = 0
    func isDigit(_ at: Int) -> Bool {
      at < literal.count && (zero...zero + 9).contains(literal[at])
    }
    while isDigit(index) {
      if !digits.isEmpty || literal[index] != zero { digits.append(literal[index] - zero) }
      index += 1
    }
    if index < literal.count, literal[index] == UInt8(ascii: ".") {
      index += 1
      while isDigit(index) {
        if !digits.isEmpty || literal[index] != zero { digits.append(literal[index] - zero) }
        scale -= 1
        index += 1
      }
    }
    if index < literal.count, literal[index] | 0x20 == UInt8(ascii: "e") {
      index += 1
      let negativeExponent = index < literal.count && literal[index] == UInt8(ascii: "-")
      if index < literal.count,
        literal[index] == UInt8(ascii: "-") || literal[index] == UInt8(ascii: "+")
      {
        index += 1
      }
      // Saturated: past this, no digit count within a message brings it back.
      var exponent = 0
      while isDigit(index) {
        exponent = min(1_000_000, exponent * 10 + Int(literal[index] - zero))
        index += 1
      }
      scale += negativeExponent ? -exponent : exponent
    }
    guard index == literal.count else { return nil }
    guard !digits.isEmpty else { return 0 }
    while scale < 0, digits.last == 0 {
      digits.removeLast()
      scale += 1
    }
    // 19 digits always fit a UInt64; Int's ends are checked below.
    guard scale >= 0, digits.count + scale <= 19 else { return nil }
    var magnitude: UInt64 = 0
    for digit in digits { magnitude = magnitude * 10 + UInt64(digit) }
    for _ in 0..<scale { magnitude *= 10 }
    if negative {
      guard magnitude <= UInt64(Int.max) + 1 else { return nil }
      return magnitude == UInt64(Int.max) + 1 ? Int.min : -Int(magnitude)
    }
    guard magnitude <= UInt64(Int.max) else { return nil }
    return Int(magnitude)
  }
}
