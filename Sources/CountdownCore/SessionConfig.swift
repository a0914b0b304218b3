/// Settings shared by every session's state machine.
public struct SessionConfig: Equatable, Sendable {
  /// Seconds a start uses when the command names none (the seed's demo used 5).
  public var defaultSeconds: Int
  /// The label while idle.
  public var idleLabel: String
  /// The label after a run ends, unless the start named its own.
  public var finishedLabel: String
  /// The label while waiting, and after each way a wait ends, unless the
  /// wait (or its `done` or `fail`) named its own.
  public var waitingLabel = "Waiting"
  public var doneLabel = "Done"
  public var failedLabel = "Failed"
  public var timeoutLabel = "Timed out"
  /// Viewer-count changes are merged into at most one patch per this many ms.
  public var viewerPatchIntervalMs: Int64
  /// An idle or finished session with no viewers is forgotten after this many ms.
  public var idleExpiryMs: Int64
  /// A paused session with no viewers is kept this long: someone means to resume it.
  public var pausedExpiryMs: Int64
  /// Key mode: a session's controller may come back, so its key must not go
  /// to the next visitor. Never forgotten while running or paused; idle or
  /// finished, kept at least `pausedExpiryMs` after its last viewer left.
  public var keepsControl: Bool

  public static let secondsRange = SessionRecord.secondsRange

  /// The label a finished session shows when nothing named its own.
  public func finishedLabel(for outcome: Outcome) -> String {
    switch outcome {
    case .elapsed, .stopped: finishedLabel
    case .done: doneLabel
    case .failed: failedLabel
    case .timeout: timeoutLabel
    }
  }
  public static let maxFinishedLabelLength = 64
  /// Viewer-count patches to one session cost at most about this many frames a
  /// second: a big audience gets its count less often, so a join storm costs
  /// O(viewers) frames rather than O(viewers × patches).
  public static let viewerFramesPerSecond: Int64 = 4000

  public init(
    defaultSeconds: Int = 5, idleLabel: String = "Ready",
    finishedLabel: String = "Countdown finished", viewerPatchIntervalMs: Int64 = 250,
    idleExpiryMs: Int64 = 60_000, pausedExpiryMs: Int64 = 86_400_000, keepsControl: Bool = false
  ) {
    self.defaultSeconds = defaultSeconds
    self.idleLabel = idleLabel
    self.finishedLabel = finishedLabel
    self.viewerPatchIntervalMs = viewerPatchIntervalMs
    self.idleExpiryMs = idleExpiryMs
    self.pausedExpiryMs = pausedExpiryMs
    self.keepsControl = keepsControl
  }

  /// One immutable copy that every state machine of a hub points at, so a
  /// million sessions do not carry a million copies of the labels.
  public final class Shared: Sendable {
    public let value: SessionConfig
    public init(_ value: SessionConfig) { self.value = value }
  }
}
