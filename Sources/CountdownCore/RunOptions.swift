/// What a start asks of its run beyond its length: whether it counts on into
/// overtime at zero, and when its level turns to warning and to danger.
///
/// Kept with the run (running, paused, overtime) and dropped when it ends.
/// Packed into two 32-bit words, since every running session holds one.
public struct RunOptions: Equatable, Hashable, Sendable {
  /// Overtime in the top bit; the warning's seconds below it.
  private var warnBits: UInt32
  private var dangerBits: UInt32

  /// Seconds left at which a level turns on.
  public static let levelSecondsRange = 1...86_400

  /// No overtime, no levels: a run as before.
  public static let none = RunOptions()

  private static let overtimeBit: UInt32 = 1 << 31
  /// Stands for a value out of range, kept so that `isValid` refuses it.
  private static let invalid: UInt32 = overtimeBit - 1

  /// The values as given: `isValid` says whether a command may set them.
  public init(overtime: Bool = false, warnAtSeconds: Int? = nil, dangerAtSeconds: Int? = nil) {
    func bits(_ seconds: Int?) -> UInt32 {
      guard let seconds else { return 0 }
      return Self.levelSecondsRange.contains(seconds) ? UInt32(seconds) : Self.invalid
    }
    warnBits = bits(warnAtSeconds) | (overtime ? Self.overtimeBit : 0)
    dangerBits = bits(dangerAtSeconds)
  }

  public var overtime: Bool { warnBits & Self.overtimeBit != 0 }
  private var warn: UInt32 { warnBits & ~Self.overtimeBit }

  public var warnAtSeconds: Int? { warn == 0 ? nil : Int(warn) }
  public var dangerAtSeconds: Int? { dangerBits == 0 ? nil : Int(dangerBits) }

  /// Each level within range, and danger below warning when both are set.
  public var isValid: Bool { problem == nil }

  /// Why the options cannot be a run's, or nil.
  public var problem: String? {
    let range = Self.levelSecondsRange
    if warn == Self.invalid || dangerBits == Self.invalid {
      return
        "warnAtSeconds and dangerAtSeconds must be integers from \(range.lowerBound) to \(range.upperBound)"
    }
    if warn > 0, dangerBits > 0, dangerBits >= warn {
      return "dangerAtSeconds must be below warnAtSeconds"
    }
    return nil
  }

  /// The level a run shows with `remaining` whole seconds left.
  public func level(remaining: Int) -> Level {
    if dangerBits > 0, remaining <= Int(dangerBits) { return .danger }
    if warn > 0, remaining <= Int(warn) { return .warning }
    return .normal
  }
}
