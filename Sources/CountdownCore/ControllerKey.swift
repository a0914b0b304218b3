/// A controller key: 128 random bits from the system CSPRNG, held as bits (16
/// bytes, no allocation) and shown as 32 hex digits. Kept and compared as a
/// `KeyHash`.
public struct ControllerKey: Equatable, Sendable {
  private let bits: UInt128

  public init(bits: UInt128) { self.bits = bits }

  public static func generate() -> ControllerKey {
    var generator = SystemRandomNumberGenerator()
    return ControllerKey(bits: generator.next())
  }

  /// The key as clients see it: 32 lowercase hex digits.
  public var hex: String { Self.hex(bits) }

  static func hex<T: FixedWidthInteger & UnsignedInteger>(_ value: T) -> String {
    let digits = String(value, radix: 16)
    return String(repeating: "0", count: T.bitWidth / 4 - digits.count) + digits
  }
}
