/// What the one line shows of a session at one moment, before it is drawn for a terminal or
/// a pipe. Built from the state by the caller, so it holds no clock of its own.
public struct Frame: Equatable, Sendable {
  /// `idle`, `running`, `paused`, `waiting` or `finished`, as the server spells it.
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

  public init(
    phase: String, spinning: Bool, label: String, elapsed: String? = nil,
    outcome: String? = nil, note: String? = nil
  ) {
    self.phase = phase
    self.spinning = spinning
    self.label = label
    self.elapsed = elapsed
    self.outcome = outcome
    self.note = note
  }

  /// The frame of a state. `label` is what the big label shows (the clock while running or
  /// paused, else the server's text), `elapsed` the time elapsed while waiting.
  public static func of(
    phase: String, spinner: Bool, label: String, elapsed: String?, outcome: String?,
    stale: Bool, connected: Bool
  ) -> Frame {
    var frame = Frame(phase: phase, spinning: spinner, label: label)
    if phase == "waiting" { frame.elapsed = elapsed }
    if phase == "finished" { frame.outcome = outcome }
    if !connected {
      frame.note = "reconnecting…"
    } else if stale {
      frame.note = "may be out of date"
    }
    return frame
  }

  /// Whether the outcome counts as success (`--exit-on-finish` exits 0 for it).
  public var succeeded: Bool { outcome == "elapsed" || outcome == "done" }
}
