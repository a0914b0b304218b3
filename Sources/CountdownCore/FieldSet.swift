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
}
