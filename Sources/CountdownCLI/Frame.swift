/// What the one line shows of a session at one moment, before it is drawn for a terminal or
/// a pipe. Built from the state by the caller, so it holds no clock of its own.
public struct Frame: Equatable, Sendable {
  /// `idle`, `running`, `paused`, `waiting`, `overtime` or `finished`, as the server spells it.
  public var phase: String
  /// True while running or waiting: the seed's spinner.
  public var spinning: Bool
  /// The clock-style time left while running or paused, else the session's label.
  public var label: String
  /// While waiting, the time elapsed as a clock that counts up.
  public var elapsed: String?
  /// How a finished session ended: `elapsed`, `done`, `failed` or `timeout`.
  public var outcome: String?
  /// A word on the link rather than the session ("reconnecting…").
  public var note: String?
  /// `warning`, `danger` or `over`: said in words as well as in colour; nil when normal.
  public var level: String?
  /// The presenter's message.
  public var message: String?
  /// Viewers' screens are blanked.
  public var blackout: Bool

  public init(
    phase: String, spinning: Bool, label: String, elapsed: String? = nil,
    outcome: String? = nil, note: String? = nil, level: String? = nil, message: String? = nil,
    blackout: Bool = false
  ) {
    self.phase = phase
    self.spinning = spinning
    self.label = label
    self.elapsed = elapsed
    self.outcome = outcome
    self.note = note
    self.level = level
    self.message = message
    self.blackout = blackout
  }

  /// The frame of a state. `label` is what the big label shows (the clock while running,
  /// paused or in overtime, else the server's text), `elapsed` the time elapsed while waiting.
  public static func of(
    phase: String, spinner: Bool, label: String, elapsed: String?, outcome: String?,
    stale: Bool, connected: Bool, level: String? = nil, message: String? = nil,
    blackout: Bool = false
  ) -> Frame {
    var frame = Frame(
      phase: phase, spinning: spinner, label: label, message: message, blackout: blackout)
    if level != "normal" { frame.level = level }
    if phase == "waiting" { frame.elapsed = elapsed }
    if phase == "finished" { frame.outcome = outcome }
    if !connected {
      frame.note = "reconnecting…"
    } else if stale {
      frame.note = "may be out of date"
    }
    return frame
  }

  /// Whether the outcome counts as success (`--exit-on-finish` exits 0 for it): a run that
  /// ran out or was stopped by its operator, or a job that said done.
  public var succeeded: Bool { outcome == "elapsed" || outcome == "done" || outcome == "stopped" }
}
