/// One countdown session, as a value: the seed's `showIndicator`/`hideIndicator`
/// plus a deadline, with every change published as a numbered patch.
///
/// Commands reach it only as durable records (`adopt`), made by
/// `SessionRecord.applying` at the time the sequencer fixed, so a command
/// replayed from storage or another instance yields the same state. Each
/// event is one `mutating func` taking the current time, so a whole countdown
/// runs in a test without waiting. The caller acts on the returned `Action`
/// and calls `advance(now:)` at (or after) the deadline it names.
///
/// A server may hold a million of these, so the stored form is compact: the
/// published state is derived on demand from the phase, a few 32-bit counts
/// and the run's own finished label, never stored as strings.
public struct SessionStateMachine: Sendable {
  /// What the owner of a session must do after an event.
  public enum Action: Equatable, Sendable {
    /// Send this patch to every viewer, then wake the session at `next` (nil: no timer).
    case broadcast(Patch, next: Int64?)
    /// Nothing to send; wake the session at `next` (nil: no timer).
    case schedule(next: Int64?)
    /// Refuse the command; the session is unchanged.
    case reject(ErrorCode)
    /// The session has been quiet with no viewers long enough to be forgotten.
    case expire
  }

  /// A start's own finished label, when it named one, travels with the run;
  /// a wait's labels travel with the wait.
  private enum State: Sendable {
    case idle
    case running(endsAt: Int64, Run?)
    case paused(remainingMs: Int64, Run?)
    /// Counting up from the deadline the run passed.
    case overtime(since: Int64, Run?)
    /// The rest of a wait is boxed: waits are few, and the box keeps every
    /// session's state no larger than a run's.
    case waiting(startedAt: Int64, Wait)
    /// A stopped run's time over in ms (< 0: none), which fits 32 bits.
    case finished(label: Run?, outcome: Outcome, overMs: Int32)
  }

  /// What a run carries beside its time, its own finished label and
  /// options, boxed and shared by the copies of one state: most runs have
  /// neither (nil), and the box keeps every session's state one word smaller.
  /// A finished session keeps the label it shows in one too.
  final class Run: Sendable {
    let finishedLabel: String?
    let options: RunOptions

    private init(finishedLabel: String?, options: RunOptions) {
      self.finishedLabel = finishedLabel
      self.options = options
    }

    /// A box for these, or nil when there is nothing to keep.
    static func of(finishedLabel: String?, options: RunOptions = .none) -> Run? {
      finishedLabel == nil && options == .none
        ? nil : Run(finishedLabel: finishedLabel, options: options)
    }
  }

  /// The presenter's message and blackout, boxed: few sessions have one.
  final class Notice: Sendable {
    let message: String?
    let blackout: Bool

    init(message: String?, blackout: Bool) {
      self.message = message
      self.blackout = blackout
    }
  }

  /// A wait's timeout and labels, shared by the copies of one state.
  final class Wait: Sendable {
    let timeoutAt: Int64?
    let label: String?
    let timeoutLabel: String?

    init(timeoutAt: Int64?, label: String?, timeoutLabel: String?) {
      self.timeoutAt = timeoutAt
      self.label = label
      self.timeoutLabel = timeoutLabel
    }
  }

  /// How many recent patches' field sets are kept to merge a lagging viewer's
  /// patches exactly; a viewer further behind is sent every field.
  public static let mergeWindow = 8

  /// Patches a session can publish per second without a command (a tick and
  /// a viewer count): with the time since a stored record, it bounds the seq
  /// a restart must skip past so that seq never goes back.
  public static let maxUnstoredPatchesPerSecond: UInt64 = 5

  private let config: SessionConfig.Shared
  private var state: State = .idle
  /// The instance cannot confirm the session's state (a cluster cut off).
  /// Declared next to `state`, whose tag byte leaves room for it.
  private var stale = false
  public private(set) var seq: UInt64 = 0
  /// Commands applied: the record's revision.
  public private(set) var revision: UInt64 = 0
  /// When the last command was sequenced, for the record.
  private var updatedAt: Int64 = 0
  /// The fields of patch `s` at slot `s % mergeWindow`.
  private var recentFields = InlineArray<8, UInt16>(repeating: 0)
  /// The message and blackout, when either is set.
  private var notice: Notice?
  /// What viewers were last told; the label is derived from these and `state`.
  /// In overtime, the whole seconds over.
  private var remaining: Int32 = 0
  private var duration: Int32 = 0
  private var publishedViewers: Int32 = 0
  /// Open connections now; `publishedViewers` trails it by the merge interval.
  private var liveViewers: Int32 = 0
  private var lastViewerPatchAt = Int64.min / 2
  /// When the session last became quiet (not running) with no viewers.
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

  /// A session brought back from its durable record at `now`: a run whose
  /// deadline has passed comes back finished, and `seq` starts past every
  /// patch that could have been sent since the record was written.
  public init(restoring record: SessionRecord, config: SessionConfig.Shared, now: Int64) {
    self.init(config: config, now: now)
    skipSeq(pastPatchesSince: record, now: now)
    take(record.settled(at: now), now: now)
  }

  /// Moves `seq` past every patch that could have been sent since `record`
  /// was written, here before a restart or on another instance, so that a
  /// client that saw such a patch never sees seq go back.
  /// The record may come from outside (a row, a Redis hash): the elapsed
  /// time and the skip saturate rather than trap, and the floor stays within
  /// what a page's number holds.
  mutating func skipSeq(pastPatchesSince record: SessionRecord, now: Int64) {
    let (elapsedMs, overflow) = now.subtractingReportingOverflow(record.updatedAt)
    let elapsedSeconds = overflow || elapsedMs < 0 ? 1 : UInt64(elapsedMs / 1000) + 1
    let (skip, skipOverflow) = elapsedSeconds.multipliedReportingOverflow(
      by: Self.maxUnstoredPatchesPerSecond)
    let (floor, floorOverflow) = record.seq.addingReportingOverflow(skip)
    raiseSeq(
      to: skipOverflow || floorOverflow
        ? SessionRecord.maxCounter : min(floor, SessionRecord.maxCounter))
  }

  /// Moves `seq` to at least `floor` without a patch.
  mutating func raiseSeq(to floor: UInt64) {
    guard floor > seq else { return }
    seq = floor
    // Nobody can be merged exactly across the skipped seqs.
    recentFields = InlineArray(repeating: FieldSet.all.coarse)
  }

  public var isRunning: Bool {
    if case .running = state { return true }
    return false
  }

  public var phase: Phase {
    switch state {
    case .idle: .idle
    case .running: .running
    case .paused: .paused
    case .waiting: .waiting
    case .finished: .finished
    case .overtime: .overtime
    }
  }

  /// The session's durable facts now: what a store keeps.
  public var record: SessionRecord {
    let status: SessionRecord.Status
    let label: String?
    var waitLabel: String?
    var options = RunOptions.none
    var overMs: Int64?
    switch state {
    case .idle: (status, label) = (.idle, nil)
    case .running(let endsAt, let run):
      (status, label, options) = (.running(endsAt: endsAt), run.finishedLabel, run.options)
    case .paused(let remainingMs, let run):
      (status, label, options) = (.paused(remainingMs: remainingMs), run.finishedLabel, run.options)
    case .overtime(let since, let run):
      (status, label, options) = (.overtime(since: since), run.finishedLabel, run.options)
    case .waiting(let startedAt, let wait):
      (status, label) = (
        .waiting(startedAt: startedAt, timeoutAt: wait.timeoutAt), wait.timeoutLabel
      )
      waitLabel = wait.label
    case .finished(let run, let outcome, let over):
      (status, label) = (.finished(outcome), run.finishedLabel)
      overMs = over < 0 ? nil : Int64(over)
    }
    return SessionRecord(
      status, duration: Int(duration), finishedLabel: label, waitLabel: waitLabel, seq: seq,
      revision: revision, updatedAt: updatedAt, run: options, overMs: overMs,
      message: notice?.message, blackout: notice?.blackout ?? false)
  }

  /// The state every viewer has been (or is being) sent, at `seq`.
  public var published: CountdownState {
    var state = phaseState
    state.message = notice?.message
    state.blackout = notice?.blackout ?? false
    return state
  }

  /// The published state but for the presenter's notice.
  private var phaseState: CountdownState {
    let settings = config.value
    switch state {
    case .idle:
      return settled(.idle, label: settings.idleLabel)
    case .running(let endsAt, let run):
      return with(
        run.options,
        CountdownState(
          phase: .running, spinner: true, enabled: false, label: String(remaining),
          remaining: Int(remaining), duration: Int(duration), endsAt: endsAt, remainingMs: nil,
          viewers: Int(publishedViewers), stale: stale))
    case .paused(let remainingMs, let run):
      return with(
        run.options,
        CountdownState(
          phase: .paused, spinner: false, enabled: true, label: String(remaining),
          remaining: Int(remaining), duration: Int(duration), endsAt: nil,
          remainingMs: remainingMs, viewers: Int(publishedViewers), stale: stale))
    case .overtime(let since, let run):
      return with(
        run.options,
        CountdownState(
          phase: .overtime, spinner: true, enabled: false,
          label: Self.overtimeLabel(seconds: Int(remaining)), remaining: 0,
          duration: Int(duration), endsAt: nil, remainingMs: nil, viewers: Int(publishedViewers),
          stale: stale, overSince: since))
    case .waiting(let startedAt, let wait):
      return CountdownState(
        phase: .waiting, spinner: true, enabled: false, label: wait.label ?? settings.waitingLabel,
        remaining: 0, duration: 0, endsAt: nil, remainingMs: nil, viewers: Int(publishedViewers),
        stale: stale, startedAt: startedAt, timeoutAt: wait.timeoutAt)
    case .finished(let run, let outcome, let overMs):
      var state = settled(
        .finished, label: run.finishedLabel ?? settings.finishedLabel(for: outcome))
      state.outcome = outcome
      state.overMs = overMs < 0 ? nil : Int64(overMs)
      return state
    }
  }

  /// A run's state with its options, and the level they give: from the
  /// seconds shown, or over in overtime.
  private func with(_ options: RunOptions, _ state: CountdownState) -> CountdownState {
    var state = state
    state.level = state.phase == .overtime ? .over : options.level(remaining: state.remaining)
    state.overtime = options.overtime
    state.warnAtSeconds = options.warnAtSeconds
    state.dangerAtSeconds = options.dangerAtSeconds
    return state
  }

  /// The label in overtime: `+` and the seconds over, clock style from a minute.
  public static func overtimeLabel(seconds: Int) -> String {
    func two(_ value: Int) -> String { value < 10 ? "0\(value)" : String(value) }
    let (hours, minutes, rest) = (seconds / 3600, seconds / 60 % 60, seconds % 60)
    if hours > 0 { return "+\(hours):\(two(minutes)):\(two(rest))" }
    if minutes > 0 { return "+\(minutes):\(two(rest))" }
    return "+\(seconds)"
  }

  /// The seed's `hideIndicator`: spinner off, button back.
  private func settled(_ phase: Phase, label: String) -> CountdownState {
    CountdownState(
      phase: phase, spinner: false, enabled: true, label: label, remaining: 0,
      duration: Int(duration), endsAt: nil, remainingMs: nil, viewers: Int(publishedViewers),
      stale: stale)
  }

  /// A sequenced command's record: the session takes it and publishes the
  /// difference. A record no newer than the session's (a replay) changes nothing.
  public mutating func adopt(_ record: SessionRecord, now: Int64) -> Action {
    guard record.revision > revision else { return .schedule(next: nextDeadline) }
    let before = published
    take(record.settled(at: now), now: now)
    return publishing(from: before, now: now)
  }

  /// Applies a command here and now, without a sequencer: tests and tools.
  public mutating func apply(_ command: SessionCommand, now: Int64) -> Action {
    switch record.applying(command, at: now) {
    case .failure(let code): return .reject(code)
    case .success(let next): return adopt(next, now: now)
    }
  }

  /// Someone pressed Start.
  public mutating func start(seconds: Int, finishedLabel: String?, now: Int64) -> Action {
    apply(.start(.seconds(seconds), finishedLabel: finishedLabel), now: now)
  }

  /// Someone pressed Cancel.
  public mutating func cancel(now: Int64) -> Action {
    apply(.cancel, now: now)
  }

  private mutating func take(_ record: SessionRecord, now: Int64) {
    revision = record.revision
    updatedAt = record.updatedAt
    duration = Int32(clamping: record.duration)
    notice =
      record.message == nil && !record.blackout
      ? nil : Notice(message: record.message, blackout: record.blackout)
    let run = Run.of(finishedLabel: record.finishedLabel, options: record.run)
    switch record.status {
    case .running(let endsAt):
      state = .running(endsAt: endsAt, run)
      remaining = Self.wholeSeconds(from: now, to: endsAt)
    case .paused(let left):
      state = .paused(remainingMs: left, run)
      remaining = Int32(clamping: SessionRecord.wholeSeconds(left))
    case .overtime(let since):
      state = .overtime(since: since, run)
      remaining = Self.secondsOver(since: since, now: now)
    case .idle:
      state = .idle
      remaining = 0
    case .waiting(let startedAt, let timeoutAt):
      state = .waiting(
        startedAt: startedAt,
        Wait(timeoutAt: timeoutAt, label: record.waitLabel, timeoutLabel: record.finishedLabel))
      remaining = 0
    case .finished(let outcome):
      // Validated records hold at most a day over.
      state = .finished(
        label: Run.of(finishedLabel: record.finishedLabel), outcome: outcome,
        overMs: record.overMs.map { Int32(clamping: $0) } ?? -1)
      remaining = 0
    }
    // A command's patch carries the viewer count as it is now.
    publishedViewers = liveViewers
    if liveViewers == 0 && !isRunning { quietSince = now }
  }

  /// The instance can (no longer) confirm the session's state with its cluster.
  public mutating func staleChanged(to value: Bool, now: Int64) -> Action {
    guard value != stale else { return .schedule(next: nextDeadline) }
    let before = published
    stale = value
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
    // The common case, a tick, changes a known few fields: it needs neither
    // the state before nor a comparison of every field.
    switch state {
    case .running(let endsAt, let run) where endsAt > now:
      // Derived from the deadline, never counted, so late wake-ups cannot drift.
      let next = Self.wholeSeconds(from: now, to: endsAt)
      let options = run.options
      let level: FieldSet =
        options.level(remaining: Int(next)) != options.level(remaining: Int(remaining))
        ? .level : []
      return tick(to: next, fields: [.label, .remaining, level], now: now)
    case .overtime(let since, _) where now < since + SessionRecord.maxOvertimeMs:
      // From the deadline, like the countdown's ticks; `remaining` shows 0.
      return tick(to: Self.secondsOver(since: since, now: now), fields: .label, now: now)
    default:
      break
    }
    let before = published
    var changed = false
    switch state {
    case .running(let endsAt, let run) where endsAt <= now && run.options.overtime:
      // The record's own settling, as for a finish, so every instance agrees.
      take(record.settled(at: now), now: now)
      changed = true
    case .running(_, let run):
      // At or past the deadline: a tick was handled above.
      finish(label: run.finishedLabel, outcome: .elapsed, now: now)
      changed = true
    case .waiting(_, let wait) where wait.timeoutAt.map { $0 <= now } == true:
      // The record's own settling, so every instance (and a restart) that
      // holds this timeoutAt finishes the wait alike.
      finish(label: wait.timeoutLabel, outcome: .timeout, now: now)
      changed = true
    case .overtime:
      // A day over: a tick was handled above.
      take(record.settled(at: now), now: now)
      changed = true
    case .idle, .paused, .waiting, .finished:
      break
    }
    if changed || viewerPatchAllowed(now: now) {
      publishedViewers = liveViewers
    }
    if changed || publishedViewers != before.viewers {
      return publishing(from: before, now: now)
    }
    if let expiry = expiresAt, now >= expiry { return .expire }
    return .schedule(next: nextDeadline)
  }

  /// A tick to `next` shown seconds: `fields` change when the seconds do,
  /// and a viewer count due rides along, as the full comparison would find.
  private mutating func tick(to next: Int32, fields: FieldSet, now: Int64) -> Action {
    let changed = next != remaining
    remaining = next
    let viewersBefore = publishedViewers
    if changed || viewerPatchAllowed(now: now) { publishedViewers = liveViewers }
    var set: FieldSet = changed ? fields : []
    if publishedViewers != viewersBefore { set.insert(.viewers) }
    // A run never expires, so there is nothing else to do.
    guard !set.isEmpty else { return .schedule(next: nextDeadline) }
    return publish(set, published, now: now)
  }

  /// A run or a wait ended by itself at `now`.
  private mutating func finish(label: String?, outcome: Outcome, now: Int64) {
    state = .finished(label: Run.of(finishedLabel: label), outcome: outcome, overMs: -1)
    remaining = 0
    publishedViewers = liveViewers
    if liveViewers == 0 { quietSince = now }
  }

  /// When a session nobody watches may be forgotten, if it may.
  private var expiresAt: Int64? {
    guard liveViewers == 0 else { return nil }
    let settings = config.value
    switch state {
    // A wait is someone's job still going: it outlives its viewers, as a run
    // does, and overtime does until its day is over.
    case .running, .waiting, .overtime: return nil
    case .paused: return settings.keepsControl ? nil : quietSince + settings.pausedExpiryMs
    case .idle, .finished:
      let kept =
        settings.keepsControl
        ? max(settings.idleExpiryMs, settings.pausedExpiryMs) : settings.idleExpiryMs
      return quietSince + kept
    }
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
      set.formUnion(FieldSet(coarse: recentFields[Int(next % UInt64(Self.mergeWindow))]))
      next += 1
    }
    return set
  }

  /// Whole seconds shown from `now` to a deadline: a deadline from a record
  /// may be decades off (within `epochMsRange`), so the difference is checked
  /// and the count clamped to what a 32-bit field shows.
  static func wholeSeconds(from now: Int64, to endsAt: Int64) -> Int32 {
    let (left, overflow) = endsAt.subtractingReportingOverflow(now)
    if overflow { return endsAt > now ? .max : 0 }
    return Int32(clamping: SessionRecord.wholeSeconds(left))
  }

  /// Whole seconds over from `since` at `now`, clamped to a 32-bit count.
  static func secondsOver(since: Int64, now: Int64) -> Int32 {
    let (over, overflow) = now.subtractingReportingOverflow(since)
    if overflow { return now > since ? .max : 0 }
    return Int32(clamping: max(0, over) / 1000)
  }

  /// When the next tick (or the finish) of a run is due, or a wait's timeout.
  public var nextTickDue: Int64? {
    if case .waiting(_, let wait) = state { return wait.timeoutAt }
    if case .overtime(let since, _) = state {
      let (due, overflow) = since.addingReportingOverflow((Int64(remaining) + 1) * 1000)
      let end = since + SessionRecord.maxOvertimeMs
      return overflow ? end : min(due, end)
    }
    guard case .running(let endsAt, _) = state else { return nil }
    let (due, overflow) = endsAt.subtractingReportingOverflow(Int64(remaining - 1) * 1000)
    return overflow ? endsAt : due
  }

  /// When this session next needs `advance(now:)`, if ever.
  public var nextDeadline: Int64? {
    var deadline: Int64?
    func consider(_ time: Int64) { deadline = min(deadline ?? time, time) }
    // The patch for remaining = r is due at endsAt − r s.
    if let tick = nextTickDue { consider(tick) }
    if liveViewers != publishedViewers {
      consider(lastViewerPatchAt + viewerPatchIntervalMs)
    }
    if let expiry = expiresAt { consider(expiry) }
    return deadline
  }

  /// The configured interval, stretched for a big audience so that a count
  /// patch costs at most `viewerFramesPerSecond` frames a second.
  private var viewerPatchIntervalMs: Int64 {
    max(
      config.value.viewerPatchIntervalMs,
      Int64(liveViewers) * 1000 / SessionConfig.viewerFramesPerSecond)
  }

  private func viewerPatchAllowed(now: Int64) -> Bool {
    now >= lastViewerPatchAt + viewerPatchIntervalMs
  }

  /// Numbers and records the change from `before` to the state now, if any.
  private mutating func publishing(from before: CountdownState, now: Int64) -> Action {
    let after = published
    return publish(after.changes(from: before), after, now: now)
  }

  /// Numbers and records a patch of `fields` to `after`, if any.
  private mutating func publish(_ fields: FieldSet, _ after: CountdownState, now: Int64) -> Action {
    guard !fields.isEmpty else { return .schedule(next: nextDeadline) }
    seq += 1
    recentFields[Int(seq % UInt64(Self.mergeWindow))] = fields.coarse
    if fields.contains(.viewers) { lastViewerPatchAt = now }
    return .broadcast(Patch(seq: seq, fields: fields, state: after), next: nextDeadline)
  }
}

extension Optional where Wrapped == SessionStateMachine.Run {
  /// A run's own finished label; nil for no box.
  var finishedLabel: String? { self?.finishedLabel }
  /// A run's options; none for no box.
  var options: RunOptions { self?.options ?? .none }
}
