/// Settings shared by every session's state machine.
public struct SessionConfig: Equatable, Sendable {
  /// Seconds a start uses when the command names none (the seed's demo used 5).
  public var defaultSeconds: Int
  /// The label while idle.
  public var idleLabel: String
  /// The label after a run ends, unless the start named its own.
  public var finishedLabel: String
  /// Viewer-count changes are merged into at most one patch per this many ms.
  public var viewerPatchIntervalMs: Int64
  /// An idle or finished session with no viewers is forgotten after this many ms.
  public var idleExpiryMs: Int64

  public static let secondsRange = 1...86_400
  public static let maxFinishedLabelLength = 64

  public init(
    defaultSeconds: Int = 5, idleLabel: String = "Ready",
    finishedLabel: String = "Countdown finished", viewerPatchIntervalMs: Int64 = 250,
    idleExpiryMs: Int64 = 60_000
  ) {
    self.defaultSeconds = defaultSeconds
    self.idleLabel = idleLabel
    self.finishedLabel = finishedLabel
    self.viewerPatchIntervalMs = viewerPatchIntervalMs
    self.idleExpiryMs = idleExpiryMs
  }

  /// One immutable copy that every state machine of a hub points at, so a
  /// million sessions do not carry a million copies of the labels.
  public final class Shared: Sendable {
    public let value: SessionConfig
    public init(_ value: SessionConfig) { self.value = value }
  }
}

/// One countdown session, as a value: the seed's `showIndicator`/`hideIndicator`
/// plus a deadline, with every change published as a numbered patch.
///
/// Each event is one `mutating func` taking the current time, so a whole
/// countdown runs in a test without waiting. The caller acts on the returned
/// `Action` and calls `advance(now:)` at (or after) the deadline it names.
///
/// A server may hold a million of these, so the stored form is compact (about
/// 90 bytes): the published state is derived on demand from the phase, three
/// 32-bit counts and the run's own finished label, never stored as strings.
public struct SessionStateMachine: Sendable {
  /// What the owner of a session must do after an event.
  public enum Action: Equatable, Sendable {
    /// Send this patch to every viewer, then wake the session at `next` (nil: no timer).
    case broadcast(Patch, next: Int64?)
    /// Nothing to send; wake the session at `next` (nil: no timer).
    case schedule(next: Int64?)
    /// Refuse the command; the session is unchanged.
    case reject(ErrorCode)
    /// The session has been idle with no viewers long enough to be forgotten.
    case expire
  }

  /// A start's own finished label, when it named one, travels with the run.
  private enum State: Sendable {
    case idle
    case running(endsAt: Int64, finishedLabel: String?)
    case finished(label: String?)
  }

  /// How many recent patches' field sets are kept to merge a lagging viewer's
  /// patches exactly; a viewer further behind is sent every field.
  public static let mergeWindow = 8

  private let config: SessionConfig.Shared
  private var state: State = .idle
  public private(set) var seq: UInt64 = 0
  /// The fields of patch `s` at slot `s % mergeWindow`.
  private var recentFields = InlineArray<8, FieldSet>(repeating: [])
  /// What viewers were last told; the label is derived from these and `state`.
  private var remaining: Int32 = 0
  private var duration: Int32 = 0
  private var publishedViewers: Int32 = 0
  /// Open connections now; `publishedViewers` trails it by the merge interval.
  private var liveViewers: Int32 = 0
  private var lastViewerPatchAt = Int64.min / 2
  /// When the session last became idle-or-finished with no viewers.
  private var quietSince: Int64

  /// A machine that points at a hub's shared settings.
  public init(config: SessionConfig.Shared, now: Int64) {
    self.config = config
    self.quietSince = now
  }

  /// A machine with settings of its own (tests and one-off use).
  public init(config: SessionConfig, now: Int64) {
    self.init(config: SessionConfig.Shared(config), now: now)
  }

  public var isRunning: Bool {
    if case .running = state { return true }
    return false
  }

  /// The state every viewer has been (or is being) sent, at `seq`.
  public var published: CountdownState {
    let settings = config.value
    switch state {
    case .idle:
      return settled(.idle, label: settings.idleLabel)
    case .running(let endsAt, _):
      return CountdownState(
        phase: .running, spinner: true, enabled: false, label: String(remaining),
        remaining: Int(remaining), duration: Int(duration), endsAt: endsAt,
        viewers: Int(publishedViewers))
    case .finished(let label):
      return settled(.finished, label: label ?? settings.finishedLabel)
    }
  }

  /// The seed's `hideIndicator`: spinner off, button back.
  private func settled(_ phase: Phase, label: String) -> CountdownState {
    CountdownState(
      phase: phase, spinner: false, enabled: true, label: label, remaining: 0,
      duration: Int(duration), endsAt: nil, viewers: Int(publishedViewers))
  }

  /// Someone pressed Start.
  public mutating func start(seconds: Int, finishedLabel: String?, now: Int64) -> Action {
    guard !isRunning else { return .reject(.busy) }
    guard SessionConfig.secondsRange.contains(seconds) else { return .reject(.badRequest) }
    let before = published
    state = .running(endsAt: now + Int64(seconds) * 1000, finishedLabel: finishedLabel)
    remaining = Int32(seconds)
    duration = Int32(seconds)
    publishedViewers = liveViewers
    return publishing(from: before, now: now)
  }

  /// Someone pressed Cancel.
  public mutating func cancel(now: Int64) -> Action {
    guard isRunning else { return .reject(.notRunning) }
    let before = published
    state = .idle
    stopRunning(now: now)
    return publishing(from: before, now: now)
  }

  /// The number of open connections changed.
  public mutating func viewersChanged(to count: Int, now: Int64) -> Action {
    liveViewers = Int32(clamping: count)
    if count == 0 && !isRunning { quietSince = now }
    guard liveViewers != publishedViewers, viewerPatchAllowed(now: now) else {
      return .schedule(next: nextDeadline)
    }
    let before = published
    publishedViewers = liveViewers
    return publishing(from: before, now: now)
  }

  /// Time passed: tick, finish, flush a merged viewer count, or expire.
  public mutating func advance(now: Int64) -> Action {
    let before = published
    var changed = false
    if case .running(let endsAt, let finishedLabel) = state {
      let left = endsAt - now
      if left <= 0 {
        state = .finished(label: finishedLabel)
        stopRunning(now: now)
        changed = true
      } else {
        // Derived from the deadline, never counted, so late wake-ups cannot drift.
        let next = Int32((left + 999) / 1000)
        changed = next != remaining
        remaining = next
      }
    }
    if changed || viewerPatchAllowed(now: now) {
      publishedViewers = liveViewers
    }
    if changed || publishedViewers != before.viewers {
      return publishing(from: before, now: now)
    }
    if !isRunning && liveViewers == 0 && now >= quietSince + config.value.idleExpiryMs {
      return .expire
    }
    return .schedule(next: nextDeadline)
  }

  /// The fields that changed after `seq`: one patch that brings a viewer from
  /// there to now. Exact within `mergeWindow` patches; beyond, every field,
  /// which brings a viewer to the same state.
  public func changes(since seq: UInt64) -> FieldSet {
    guard seq < self.seq else { return [] }
    guard self.seq - seq <= UInt64(Self.mergeWindow) else { return .all }
    var set: FieldSet = []
    var next = seq + 1
    while next <= self.seq {
      set.formUnion(recentFields[Int(next % UInt64(Self.mergeWindow))])
      next += 1
    }
    return set
  }

  /// When this session next needs `advance(now:)`, if ever.
  public var nextDeadline: Int64? {
    var deadline: Int64?
    func consider(_ time: Int64) { deadline = min(deadline ?? time, time) }
    if case .running(let endsAt, _) = state {
      // The patch for remaining = r is due at endsAt − r s.
      consider(endsAt - Int64(remaining - 1) * 1000)
    }
    if liveViewers != publishedViewers {
      consider(lastViewerPatchAt + config.value.viewerPatchIntervalMs)
    }
    if !isRunning && liveViewers == 0 {
      consider(quietSince + config.value.idleExpiryMs)
    }
    return deadline
  }

  private func viewerPatchAllowed(now: Int64) -> Bool {
    now >= lastViewerPatchAt + config.value.viewerPatchIntervalMs
  }

  private mutating func stopRunning(now: Int64) {
    remaining = 0
    publishedViewers = liveViewers
    if liveViewers == 0 { quietSince = now }
  }

  /// Numbers and records the change from `before` to the state now, if any.
  private mutating func publishing(from before: CountdownState, now: Int64) -> Action {
    let after = published
    let fields = after.changes(from: before)
    guard !fields.isEmpty else { return .schedule(next: nextDeadline) }
    seq += 1
    recentFields[Int(seq % UInt64(Self.mergeWindow))] = fields
    if fields.contains(.viewers) { lastViewerPatchAt = now }
    return .broadcast(Patch(seq: seq, fields: fields, state: after), next: nextDeadline)
  }
}
