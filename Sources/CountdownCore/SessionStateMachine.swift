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
}

/// One countdown session, as a value: the seed's `showIndicator`/`hideIndicator`
/// plus a deadline, with every change published as a numbered patch.
///
/// Each event is one `mutating func` taking the current time, so a whole
/// countdown runs in a test without waiting. The caller acts on the returned
/// `Action` and calls `advance(now:)` at (or after) the deadline it names.
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

  private enum State: Sendable {
    case idle
    case running(endsAt: Int64, finishedLabel: String)
    case finished
  }

  private let config: SessionConfig
  private var state: State = .idle
  /// The state every viewer has been (or is being) sent, at `seq`.
  public private(set) var published: CountdownState
  public private(set) var seq: UInt64 = 0
  /// The seq at which each field last changed, by bit position, so a lagging
  /// viewer's many patches can be merged into one.
  private var fieldSeq = InlineArray<8, UInt64>(repeating: 0)
  /// Open connections now; `published.viewers` trails it by the merge interval.
  private var liveViewers = 0
  private var lastViewerPatchAt = Int64.min / 2
  /// When the session last became idle-or-finished with no viewers.
  private var quietSince: Int64

  public init(config: SessionConfig, now: Int64) {
    self.config = config
    self.quietSince = now
    self.published = CountdownState(
      phase: .idle, spinner: false, enabled: true, label: config.idleLabel, remaining: 0,
      duration: 0, endsAt: nil, viewers: 0)
  }

  public var isRunning: Bool {
    if case .running = state { return true }
    return false
  }

  /// Someone pressed Start.
  public mutating func start(seconds: Int, finishedLabel: String?, now: Int64) -> Action {
    guard !isRunning else { return .reject(.busy) }
    guard SessionConfig.secondsRange.contains(seconds) else { return .reject(.badRequest) }
    let endsAt = now + Int64(seconds) * 1000
    state = .running(endsAt: endsAt, finishedLabel: finishedLabel ?? config.finishedLabel)
    var next = published
    next.phase = .running
    next.spinner = true
    next.enabled = false
    next.remaining = seconds
    next.label = String(seconds)
    next.duration = seconds
    next.endsAt = endsAt
    next.viewers = liveViewers
    return publishing(next, now: now)
  }

  /// Someone pressed Cancel.
  public mutating func cancel(now: Int64) -> Action {
    guard isRunning else { return .reject(.notRunning) }
    state = .idle
    var next = published
    next.phase = .idle
    next.label = config.idleLabel
    stopRunning(&next, now: now)
    return publishing(next, now: now)
  }

  /// The number of open connections changed.
  public mutating func viewersChanged(to count: Int, now: Int64) -> Action {
    liveViewers = count
    if count == 0 && !isRunning { quietSince = now }
    guard count != published.viewers, viewerPatchAllowed(now: now) else {
      return .schedule(next: nextDeadline)
    }
    var next = published
    next.viewers = count
    return publishing(next, now: now)
  }

  /// Time passed: tick, finish, flush a merged viewer count, or expire.
  public mutating func advance(now: Int64) -> Action {
    var next = published
    if case .running(let endsAt, let finishedLabel) = state {
      let left = endsAt - now
      if left <= 0 {
        state = .finished
        next.phase = .finished
        next.label = finishedLabel
        stopRunning(&next, now: now)
      } else {
        // Derived from the deadline, never counted, so late wake-ups cannot drift.
        let remaining = Int((left + 999) / 1000)
        next.remaining = remaining
        next.label = String(remaining)
      }
    }
    if next != published || viewerPatchAllowed(now: now) {
      next.viewers = liveViewers
    }
    if next != published {
      return publishing(next, now: now)
    }
    if !isRunning && liveViewers == 0 && now >= quietSince + config.idleExpiryMs {
      return .expire
    }
    return .schedule(next: nextDeadline)
  }

  /// The fields that changed after `seq`: one patch that brings a viewer from there to now.
  public func changes(since seq: UInt64) -> FieldSet {
    var set: FieldSet = []
    for bit in 0..<8 where fieldSeq[bit] > seq {
      set.insert(FieldSet(rawValue: 1 << bit))
    }
    return set
  }

  /// When this session next needs `advance(now:)`, if ever.
  public var nextDeadline: Int64? {
    var deadline: Int64?
    func consider(_ time: Int64) { deadline = min(deadline ?? time, time) }
    if case .running(let endsAt, _) = state {
      // The patch for remaining = r is due at endsAt − r s.
      consider(endsAt - Int64(published.remaining - 1) * 1000)
    }
    if liveViewers != published.viewers {
      consider(lastViewerPatchAt + config.viewerPatchIntervalMs)
    }
    if !isRunning && liveViewers == 0 {
      consider(quietSince + config.idleExpiryMs)
    }
    return deadline
  }

  private func viewerPatchAllowed(now: Int64) -> Bool {
    now >= lastViewerPatchAt + config.viewerPatchIntervalMs
  }

  /// The seed's `hideIndicator`: spinner off, button back.
  private mutating func stopRunning(_ next: inout CountdownState, now: Int64) {
    next.spinner = false
    next.enabled = true
    next.remaining = 0
    next.endsAt = nil
    next.viewers = liveViewers
    if liveViewers == 0 { quietSince = now }
  }

  private mutating func publishing(_ next: CountdownState, now: Int64) -> Action {
    let fields = next.changes(from: published)
    guard !fields.isEmpty else { return .schedule(next: nextDeadline) }
    seq += 1
    for bit in 0..<8 where fields.contains(FieldSet(rawValue: 1 << bit)) {
      fieldSeq[bit] = seq
    }
    if fields.contains(.viewers) { lastViewerPatchAt = now }
    published = next
    return .broadcast(Patch(seq: seq, fields: fields, state: next), next: nextDeadline)
  }
}
