/// What a start asks of its run beyond its length: whether it counts on into
/// overtime at zero, and when its level turns to warning and to danger.
///
/// Kept with the run (running, paused, overtime) and dropped when it ends.
/// Stored compactly, since every running session holds one.
public struct RunOptions: Equatable, Hashable, Sendable {
  public var overtime: Bool
  private var warn: Int32
  private var danger: Int32

  /// Seconds left at which a level turns on.
  public static let levelSecondsRange = 1...86_400

  /// No overtime, no levels: a run as before.
  public static let none = RunOptions()

  /// The values as given: `isValid` says whether a command may set them.
  public init(overtime: Bool = false, warnAtSeconds: Int? = nil, dangerAtSeconds: Int? = nil) {
    self.overtime = overtime
    // Out-of-range values are kept out of range (not clamped into it), so
    // `isValid` still refuses them.
    self.warn = warnAtSeconds.map { Self.levelSecondsRange.contains($0) ? Int32($0) : -1 } ?? 0
    self.danger = dangerAtSeconds.map { Self.levelSecondsRange.contains($0) ? Int32($0) : -1 } ?? 0
  }

  public var warnAtSeconds: Int? { warn == 0 ? nil : Int(warn) }
  public var dangerAtSeconds: Int? { danger == 0 ? nil : Int(danger) }

  /// Each level within range, and danger below warning when both are set.
  public var isValid: Bool {
    guard warn >= 0, danger >= 0 else { return false }
    if warn > 0, danger > 0 { return danger < warn }
    return true
  }

  /// Why the options cannot be a run's, or nil.
  public var problem: String? {
    let range = Self.levelSecondsRange
    if warn < 0 || danger < 0 {
      return
        "warnAtSeconds and dangerAtSeconds must be integers from \(range.lowerBound) to \(range.upperBound)"
    }
    if warn > 0, danger > 0, danger >= warn {
      return "dangerAtSeconds must be below warnAtSeconds"
    }
    return nil
  }

  /// The level a run shows with `remaining` whole seconds left.
  public func level(remaining: Int) -> Level {
    if danger > 0, remaining <= Int(danger) { return .danger }
    if warn > 0, remaining <= Int(warn) { return .warning }
    return .normal
  }
}
