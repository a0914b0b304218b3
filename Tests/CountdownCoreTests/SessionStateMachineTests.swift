import Testing

@testable import CountdownCore

/// Unwraps a broadcast, failing the test on any other action.
func broadcastPatch(
  _ action: SessionStateMachine.Action, sourceLocation: SourceLocation = #_sourceLocation
) -> Patch? {
  guard case .broadcast(let patch, _) = action else {
    Issue.record("expected a broadcast, got \(action)", sourceLocation: sourceLocation)
    return nil
  }
  return patch
}

@Suite struct SessionStateMachineTests {
  let t0: Int64 = 1_700_000_000_000
  let config = SessionConfig()

  /// A new session is idle, enabled, with no spinner and seq 0.
  @Test func startsIdle() {
    let machine = SessionStateMachine(config: config, now: t0)
    #expect(machine.seq == 0)
    #expect(machine.published.phase == .idle)
    #expect(machine.published.spinner == false)
    #expect(machine.published.enabled == true)
    #expect(machine.published.endsAt == nil)
    #expect(machine.published.label == "Ready")
  }

  /// Start sets every running field in one patch and schedules the first tick one second on.
  @Test func startPublishesOnePatchAndSchedulesFirstTick() {
    var machine = SessionStateMachine(config: config, now: t0)
    let action = machine.start(seconds: 5, finishedLabel: nil, now: t0)
    let expected = CountdownState(
      phase: .running, spinner: true, enabled: false, label: "5", remaining: 5, duration: 5,
      endsAt: t0 + 5000, viewers: 0)
    #expect(
      action
        == .broadcast(
          Patch(
            seq: 1, fields: [.phase, .spinner, .enabled, .label, .remaining, .duration, .endsAt],
            state: expected), next: t0 + 1000))
  }

  /// Each tick goes out at endsAt − r s with remaining r, then the finish at endsAt (5, 4, 3, 2, 1, done).
  @Test func ticksEverySecondThenFinishes() {
    var machine = SessionStateMachine(config: config, now: t0)
    _ = machine.start(seconds: 5, finishedLabel: nil, now: t0)
    for remaining in stride(from: 4, through: 1, by: -1) {
      let due = t0 + 5000 - Int64(remaining) * 1000
      #expect(machine.nextDeadline == due)
      let patch = broadcastPatch(machine.advance(now: due))
      #expect(patch?.fields == [.label, .remaining])
      #expect(patch?.state.label == String(remaining))
      #expect(patch?.state.remaining == remaining)
    }
    #expect(machine.nextDeadline == t0 + 5000)
    let finish = broadcastPatch(machine.advance(now: t0 + 5000))
    #expect(finish?.fields == [.phase, .spinner, .enabled, .label, .remaining, .endsAt, .outcome])
    #expect(finish?.state.outcome == .elapsed)
    #expect(finish?.state.phase == .finished)
    #expect(finish?.state.label == "Countdown finished")
    #expect(finish?.state.spinner == false)
    #expect(finish?.state.enabled == true)
    #expect(finish?.state.endsAt == nil)
    #expect(finish?.state.duration == 5)
    #expect(machine.seq == 6)
  }

  /// A wake-up that comes late computes the remaining seconds from the deadline, not by counting.
  @Test func lateWakeUpSkipsToTheTrueSecond() {
    var machine = SessionStateMachine(config: config, now: t0)
    _ = machine.start(seconds: 10, finishedLabel: nil, now: t0)
    let patch = broadcastPatch(machine.advance(now: t0 + 3500))
    #expect(patch?.state.remaining == 7)
    #expect(machine.nextDeadline == t0 + 4000)
  }

  /// A wake-up before the next second changes nothing and keeps the same deadline.
  @Test func earlyWakeUpPublishesNothing() {
    var machine = SessionStateMachine(config: config, now: t0)
    _ = machine.start(seconds: 3, finishedLabel: nil, now: t0)
    #expect(machine.advance(now: t0 + 999) == .schedule(next: t0 + 1000))
    #expect(machine.seq == 1)
  }

  /// Start while running is refused with busy and changes nothing.
  @Test func startWhileRunningIsBusy() {
    var machine = SessionStateMachine(config: config, now: t0)
    _ = machine.start(seconds: 5, finishedLabel: nil, now: t0)
    let before = machine.published
    #expect(machine.start(seconds: 3, finishedLabel: nil, now: t0 + 10) == .reject(.busy))
    #expect(machine.published == before)
    #expect(machine.seq == 1)
  }

  /// Cancel returns a running session to idle for everyone.
  @Test func cancelReturnsToIdle() {
    var machine = SessionStateMachine(config: config, now: t0)
    _ = machine.start(seconds: 5, finishedLabel: nil, now: t0)
    let patch = broadcastPatch(machine.cancel(now: t0 + 1200))
    #expect(patch?.state.phase == .idle)
    #expect(patch?.state.spinner == false)
    #expect(patch?.state.enabled == true)
    #expect(patch?.state.endsAt == nil)
    #expect(patch?.state.remaining == 0)
    #expect(patch?.state.label == "Ready")
    #expect(machine.isRunning == false)
  }

  /// Cancel when nothing runs is refused with not_running.
  @Test func cancelWhenIdleIsNotRunning() {
    var machine = SessionStateMachine(config: config, now: t0)
    #expect(machine.cancel(now: t0) == .reject(.notRunning))
  }

  /// A start's own finished label is shown at the end instead of the default.
  @Test func customFinishedLabel() {
    var machine = SessionStateMachine(config: config, now: t0)
    _ = machine.start(seconds: 1, finishedLabel: "倒計時結束", now: t0)
    #expect(broadcastPatch(machine.advance(now: t0 + 1000))?.state.label == "倒計時結束")
  }

  /// A finished session can be started again, and the new run has its own default label.
  @Test func startAgainAfterFinishing() {
    var machine = SessionStateMachine(config: config, now: t0)
    _ = machine.start(seconds: 1, finishedLabel: "done!", now: t0)
    _ = machine.advance(now: t0 + 1000)
    let restart = broadcastPatch(machine.start(seconds: 2, finishedLabel: nil, now: t0 + 5000))
    #expect(restart?.state.phase == .running)
    #expect(restart?.state.endsAt == t0 + 7000)
    _ = machine.advance(now: t0 + 6000)
    #expect(broadcastPatch(machine.advance(now: t0 + 7000))?.state.label == "Countdown finished")
  }

  /// Viewer-count changes go out at once, then are merged to at most one patch per 250 ms.
  @Test func viewerChangesAreMerged() {
    var machine = SessionStateMachine(config: config, now: t0)
    #expect(broadcastPatch(machine.viewersChanged(to: 1, now: t0))?.state.viewers == 1)
    #expect(machine.viewersChanged(to: 2, now: t0 + 10) == .schedule(next: t0 + 250))
    #expect(machine.viewersChanged(to: 3, now: t0 + 20) == .schedule(next: t0 + 250))
    #expect(machine.published.viewers == 1)
    let merged = broadcastPatch(machine.advance(now: t0 + 250))
    #expect(merged?.fields == [.viewers])
    #expect(merged?.state.viewers == 3)
    #expect(machine.seq == 2)
  }

  /// A pending viewer count rides along with the next tick instead of costing its own patch.
  @Test func pendingViewersJoinATick() {
    var machine = SessionStateMachine(config: config, now: t0)
    _ = machine.start(seconds: 5, finishedLabel: nil, now: t0)
    _ = machine.viewersChanged(to: 1, now: t0 + 900)
    // Within 250 ms of the last viewer patch: held back until t0 + 1150.
    #expect(machine.viewersChanged(to: 2, now: t0 + 950) == .schedule(next: t0 + 1000))
    let tick = broadcastPatch(machine.advance(now: t0 + 1000))
    #expect(tick?.fields == [.label, .remaining, .viewers])
    #expect(tick?.state.viewers == 2)
  }

  /// An idle session with no viewers expires after 60 s; a running one never does.
  @Test func expiryOnlyWhenQuiet() {
    var machine = SessionStateMachine(config: config, now: t0)
    _ = machine.viewersChanged(to: 1, now: t0)
    _ = machine.start(seconds: 100, finishedLabel: nil, now: t0)
    _ = machine.viewersChanged(to: 0, now: t0 + 1)
    // The merged viewer count is due before the first tick.
    #expect(machine.nextDeadline == t0 + 250)
    // Still running at +61 s: no expiry, just a tick.
    #expect(broadcastPatch(machine.advance(now: t0 + 61_000))?.state.remaining == 39)
    _ = machine.advance(now: t0 + 100_000)
    #expect(machine.published.phase == .finished)
    #expect(machine.nextDeadline == t0 + 160_000)
    #expect(machine.advance(now: t0 + 159_999) == .schedule(next: t0 + 160_000))
    #expect(machine.advance(now: t0 + 160_000) == .expire)
  }

  /// A viewer returning before expiry keeps the session.
  @Test func returningViewerCancelsExpiry() {
    var machine = SessionStateMachine(config: config, now: t0)
    _ = machine.viewersChanged(to: 1, now: t0)
    _ = machine.viewersChanged(to: 0, now: t0 + 1000)
    _ = machine.viewersChanged(to: 1, now: t0 + 30_000)
    #expect(machine.nextDeadline == nil)
  }

  /// changes(since:) names exactly the fields changed after a seq: the merged catch-up patch.
  @Test func changesSinceComposePatches() {
    var machine = SessionStateMachine(config: config, now: t0)
    _ = machine.start(seconds: 3, finishedLabel: nil, now: t0)  // seq 1
    _ = machine.advance(now: t0 + 1000)  // seq 2
    _ = machine.advance(now: t0 + 2000)  // seq 3
    #expect(machine.changes(since: 2) == [.label, .remaining])
    _ = machine.advance(now: t0 + 3000)  // seq 4: finish
    #expect(
      machine.changes(since: 1) == [
        .phase, .spinner, .enabled, .label, .remaining, .endsAt, .outcome,
      ])
    #expect(machine.changes(since: 0).contains(.duration))
    #expect(machine.changes(since: 4) == [])
  }

  /// Within the merge window a catch-up names only what changed; beyond it, every field.
  @Test func changesSinceBeyondTheWindowIsEveryField() {
    var machine = SessionStateMachine(config: config, now: t0)
    _ = machine.start(seconds: 60, finishedLabel: nil, now: t0)  // seq 1
    let ticks = SessionStateMachine.mergeWindow + 2
    for second in 1...ticks { _ = machine.advance(now: t0 + Int64(second) * 1000) }
    let last = machine.seq
    #expect(
      machine.changes(since: last - UInt64(SessionStateMachine.mergeWindow)) == [
        .label, .remaining,
      ])
    #expect(machine.changes(since: last - UInt64(SessionStateMachine.mergeWindow) - 1) == .all)
  }

  /// A start's own finished label that equals the last tick's label is not re-sent.
  @Test func finishedLabelEqualToLastTickIsNotAChange() {
    var machine = SessionStateMachine(config: config, now: t0)
    _ = machine.start(seconds: 2, finishedLabel: "1", now: t0)
    _ = machine.advance(now: t0 + 1000)
    let finish = broadcastPatch(machine.advance(now: t0 + 2000))
    #expect(finish?.fields == [.phase, .spinner, .enabled, .remaining, .endsAt, .outcome])
    #expect(finish?.state.label == "1")
    #expect(machine.published.label == "1")
    // The next run without a label of its own finishes with the default again.
    _ = machine.start(seconds: 1, finishedLabel: nil, now: t0 + 3000)
    #expect(broadcastPatch(machine.advance(now: t0 + 4000))?.state.label == "Countdown finished")
  }

  /// A 10-minute countdown still ends exactly at its deadline, however many ticks it took.
  @Test func longCountdownEndsOnTime() {
    var machine = SessionStateMachine(config: config, now: t0)
    _ = machine.start(seconds: 600, finishedLabel: nil, now: t0)
    var now = t0
    var ticks = 0
    while let due = machine.nextDeadline, machine.isRunning {
      now = due + 3  // every wake-up a little late
      _ = machine.advance(now: now)
      ticks += 1
    }
    #expect(ticks == 600)
    #expect(now == t0 + 600_000 + 3)
    #expect(machine.published.phase == .finished)
  }
}
