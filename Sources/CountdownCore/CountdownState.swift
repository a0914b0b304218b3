/// Every field a viewer renders: the seed's button (spinner, enabled) and label.
///
/// This is the `state` object of the wire protocol; field order here is the
/// order in which the encoder writes them.
public struct CountdownState: Equatable, Sendable {
  public var phase: Phase
  public var spinner: Bool
  public var enabled: Bool
  public var label: String
  public var remaining: Int
  public var duration: Int
  /// Epoch milliseconds of the deadline while running.
  public var endsAt: Int64?
  /// The exact time left while paused.
  public var remainingMs: Int64?
  public var viewers: Int
  /// The server cannot confirm this state with the rest of its cluster
  /// (cluster mode, Redis unreachable): the countdown goes on from what it
  /// knew, but a change made elsewhere may be missing.
  public var stale: Bool
  /// Epoch milliseconds when the wait began, while waiting.
  public var startedAt: Int64?
  /// Epoch milliseconds when the wait times out, while waiting with a timeout.
  public var timeoutAt: Int64?
  /// How the session ended, while finished.
  public var outcome: Outcome?
  /// How near the end the run is: the colour every screen shows.
  public var level: Level
  /// The deadline an overtime run passed, while in overtime.
  public var overSince: Int64?
  /// How far past zero a stopped run went, once stopped.
  public var overMs: Int64?
  /// The run counts on into overtime at zero.
  public var overtime: Bool
  /// The run's level times, while it runs, is paused or in overtime.
  public var warnAtSeconds: Int?
  public var dangerAtSeconds: Int?
  /// The presenter's message.
  public var message: String?
  /// Every viewer's screen but the controller's is blank.
  public var blackout: Bool

  public init(
    phase: Phase, spinner: Bool, enabled: Bool, label: String, remaining: Int, duration: Int,
    endsAt: Int64?, remainingMs: Int64? = nil, viewers: Int, stale: Bool = false,
    startedAt: Int64? = nil, timeoutAt: Int64? = nil, outcome: Outcome? = nil,
    level: Level = .normal, overSince: Int64? = nil, overMs: Int64? = nil, overtime: Bool = false,
    warnAtSeconds: Int? = nil, dangerAtSeconds: Int? = nil, message: String? = nil,
    blackout: Bool = false
  ) {
    self.phase = phase
    self.spinner = spinner
    self.enabled = enabled
    self.label = label
    self.remaining = remaining
    self.duration = duration
    self.endsAt = endsAt
    self.remainingMs = remainingMs
    self.viewers = viewers
    self.stale = stale
    self.startedAt = startedAt
    self.timeoutAt = timeoutAt
    self.outcome = outcome
    self.level = level
    self.overSince = overSince
    self.overMs = overMs
    self.overtime = overtime
    self.warnAtSeconds = warnAtSeconds
    self.dangerAtSeconds = dangerAtSeconds
    self.message = message
    self.blackout = blackout
  }

  /// The fields whose values differ between two states.
  public func changes(from old: CountdownState) -> FieldSet {
    var set: FieldSet = []
    if phase != old.phase { set.insert(.phase) }
    if spinner != old.spinner { set.insert(.spinner) }
    if enabled != old.enabled { set.insert(.enabled) }
    if label != old.label { set.insert(.label) }
    if remaining != old.remaining { set.insert(.remaining) }
    if duration != old.duration { set.insert(.duration) }
    if endsAt != old.endsAt { set.insert(.endsAt) }
    if remainingMs != old.remainingMs { set.insert(.remainingMs) }
    if viewers != old.viewers { set.insert(.viewers) }
    if stale != old.stale { set.insert(.stale) }
    if startedAt != old.startedAt { set.insert(.startedAt) }
    if timeoutAt != old.timeoutAt { set.insert(.timeoutAt) }
    if outcome != old.outcome { set.insert(.outcome) }
    if level != old.level { set.insert(.level) }
    if overSince != old.overSince { set.insert(.overSince) }
    if overMs != old.overMs { set.insert(.overMs) }
    if overtime != old.overtime { set.insert(.overtime) }
    if warnAtSeconds != old.warnAtSeconds { set.insert(.warnAtSeconds) }
    if dangerAtSeconds != old.dangerAtSeconds { set.insert(.dangerAtSeconds) }
    if message != old.message { set.insert(.message) }
    if blackout != old.blackout { set.insert(.blackout) }
    return set
  }
}
