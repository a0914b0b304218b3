/// A set of state fields, one bit each: what a patch carries.
public struct FieldSet: OptionSet, Hashable, Sendable {
  public let rawValue: UInt32
  public init(rawValue: UInt32) { self.rawValue = rawValue }

  public static let phase = FieldSet(rawValue: 1 << 0)
  public static let spinner = FieldSet(rawValue: 1 << 1)
  public static let enabled = FieldSet(rawValue: 1 << 2)
  public static let label = FieldSet(rawValue: 1 << 3)
  public static let remaining = FieldSet(rawValue: 1 << 4)
  public static let duration = FieldSet(rawValue: 1 << 5)
  public static let endsAt = FieldSet(rawValue: 1 << 6)
  public static let viewers = FieldSet(rawValue: 1 << 7)
  public static let remainingMs = FieldSet(rawValue: 1 << 8)
  public static let stale = FieldSet(rawValue: 1 << 9)
  public static let startedAt = FieldSet(rawValue: 1 << 10)
  public static let timeoutAt = FieldSet(rawValue: 1 << 11)
  public static let outcome = FieldSet(rawValue: 1 << 12)
  public static let level = FieldSet(rawValue: 1 << 13)
  public static let overSince = FieldSet(rawValue: 1 << 14)
  public static let overMs = FieldSet(rawValue: 1 << 15)
  public static let overtime = FieldSet(rawValue: 1 << 16)
  public static let warnAtSeconds = FieldSet(rawValue: 1 << 17)
  public static let dangerAtSeconds = FieldSet(rawValue: 1 << 18)
  public static let message = FieldSet(rawValue: 1 << 19)
  public static let blackout = FieldSet(rawValue: 1 << 20)

  public static let all: FieldSet = FieldSet(rawValue: 1 << 21 - 1)

  /// A run's options and its overtime fields change together, with the phase.
  static let runGroup: FieldSet = [
    .overSince, .overMs, .overtime, .warnAtSeconds, .dangerAtSeconds,
  ]
  static let noticeGroup: FieldSet = [.message, .blackout]

  /// The set in 16 bits, for the merge window every session keeps: the
  /// first fields and the level one bit each, each group one bit.
  /// `init(coarse:)` gives back a superset, and a merged patch that carries
  /// an unchanged field is still exact.
  var coarse: UInt16 {
    var bits = UInt16(truncatingIfNeeded: rawValue & 0x3FFF)
    if !isDisjoint(with: Self.runGroup) { bits |= 1 << 14 }
    if !isDisjoint(with: Self.noticeGroup) { bits |= 1 << 15 }
    return bits
  }

  init(coarse bits: UInt16) {
    self.init(rawValue: UInt32(bits & 0x3FFF))
    if bits & 1 << 14 != 0 { formUnion(Self.runGroup) }
    if bits & 1 << 15 != 0 { formUnion(Self.noticeGroup) }
  }
}
