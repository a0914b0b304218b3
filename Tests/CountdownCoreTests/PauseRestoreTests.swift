import Testing

@testable import CountdownCore

/// Pause, resume, adjust and restore as the state machine publishes them.
@Suite struct PauseRestoreTests {
  let t0: Int64 = 1_700_000_000_000
  let config = SessionConfig.Shared(SessionConfig())

  /// Pause publishes the seed's hideIndicator with the frozen time, and nothing ticks while paused.
  @Test func pausePublishesFrozenState() {
    var machine = SessionStateMachine(config: config, now: t0)
    _ = machine.start(seconds: 10, finishedLabel: nil, now: t0)
    let patch = broadcastPatch(machine.apply(.pause, now: t0 + 2300))
    #expect(
      patch?.fields == [.phase, .spinner, .enabled, .label, .remaining, .endsAt, .remainingMs])
    #expect(patch?.state.phase == .paused)
    #expect(patch?.state.spinner == false)
    #expect(patch?.state.enabled == true)
    #expect(patch?.state.endsAt == nil)
    #expect(patch?.state.remainingMs == 7700)
    #expect(patch?.state.remaining == 8)
    #expect(patch?.state.label == "8")
    // Only the quiet-session expiry is left to wake for: no ticks.
    #expect(machine.nextDeadline == t0 + 2300 + SessionConfig().pausedExpiryMs)
    #expect(machine.advance(now: t0 + 60_000) == .schedule(next: machine.nextDeadline))
  }

  /// Resume runs to its own time plus the frozen milliseconds, ticking from the new deadline.
  @Test func resumeTicksFromNewDeadline() {
    var machine = SessionStateMachine(config: config, now: t0)
    _ = machine.start(seconds: 10, finishedLabel: nil, now: t0)
    _ = machine.apply(.pause, now: t0 + 2300)
    let patch = broadcastPatch(machine.apply(.resume, now: t0 + 5000))
    #expect(patch?.state.endsAt == t0 + 5000 + 7700)
    #expect(patch?.state.remainingMs == nil)
    #expect(patch?.fields.contains(.remainingMs) == true)
    #expect(machine.nextTickDue == t0 + 5000 + 7700 - 7000)
  }

  /// An adjust patch carries the new remaining and label at once, not at the next tick.
  @Test func adjustPublishesAtOnce() {
    var machine = SessionStateMachine(config: config, now: t0)
    _ = machine.start(seconds: 10, finishedLabel: nil, now: t0)
    let patch = broadcastPatch(machine.apply(.adjust(seconds: 60), now: t0 + 500))
    #expect(patch?.state.remaining == 70)
    #expect(patch?.state.label == "70")
    #expect(patch?.state.duration == 70)
    #expect(patch?.state.endsAt == t0 + 70_000)
    let finish = broadcastPatch(machine.apply(.adjust(seconds: -80), now: t0 + 600))
    #expect(finish?.state.phase == .finished)
    #expect(finish?.state.label == "Countdown finished")
  }

  /// A session restored mid-run ticks on its original deadline.
  @Test func restoreMidRunKeepsDeadline() {
    var original = SessionStateMachine(config: config, now: t0)
    _ = original.start(seconds: 60, finishedLabel: "done", now: t0)
    var restored = SessionStateMachine(restoring: original.record, config: config, now: t0 + 2500)
    #expect(restored.published.endsAt == t0 + 60_000)
    #expect(restored.published.remaining == 58)
    #expect(restored.nextTickDue == t0 + 3000)
    let tick = broadcastPatch(restored.advance(now: t0 + 3000))
    #expect(tick?.state.remaining == 57)
    _ = restored.advance(now: t0 + 60_000)
    #expect(restored.published.label == "done")
  }

  /// A restored paused session keeps its exact milliseconds; a passed deadline restores as finished.
  @Test func restorePausedAndPassed() {
    var machine = SessionStateMachine(config: config, now: t0)
    _ = machine.start(seconds: 5, finishedLabel: nil, now: t0)
    let running = machine.record
    _ = machine.apply(.pause, now: t0 + 1234)
    let paused = SessionStateMachine(restoring: machine.record, config: config, now: t0 + 99_000)
    #expect(paused.published.phase == .paused)
    #expect(paused.published.remainingMs == 3766)
    let late = SessionStateMachine(restoring: running, config: config, now: t0 + 5000)
    #expect(late.published.phase == .finished)
    #expect(late.published.endsAt == nil)
  }

  /// Restored seq is past every patch that could have been sent since the record was written.
  @Test func restoredSeqNeverGoesBack() {
    var machine = SessionStateMachine(config: config, now: t0)
    _ = machine.start(seconds: 100, finishedLabel: nil, now: t0)
    let record = machine.record
    var now = t0
    // Ticks and a viewer count every 250 ms for 30 s: the most a session sends without a command.
    for step in 1...120 {
      now = t0 + Int64(step) * 250
      _ = machine.viewersChanged(to: step % 7, now: now)
      _ = machine.advance(now: now)
    }
    let restored = SessionStateMachine(restoring: record, config: config, now: now)
    #expect(restored.seq > machine.seq)
  }

  /// A record no newer than the session's (a replay) changes nothing.
  @Test func staleRecordIsIgnored() {
    var machine = SessionStateMachine(config: config, now: t0)
    _ = machine.start(seconds: 10, finishedLabel: nil, now: t0)
    let old = machine.record
    _ = machine.apply(.pause, now: t0 + 1000)
    let seq = machine.seq
    _ = machine.adopt(old, now: t0 + 2000)
    #expect(machine.seq == seq)
    #expect(machine.phase == .paused)
  }

  /// The record a machine reports restores to the same published state.
  @Test func recordRoundTrips() {
    var machine = SessionStateMachine(config: config, now: t0)
    _ = machine.apply(.start(.until(t0 + 3_725_000), finishedLabel: "x"), now: t0)
    _ = machine.apply(.adjust(seconds: 5), now: t0 + 10)
    let copy = SessionStateMachine(restoring: machine.record, config: config, now: t0 + 10)
    var expected = machine.published
    expected.viewers = 0
    #expect(copy.published == expected)
    #expect(copy.record.revision == machine.record.revision)
    #expect(copy.published.remaining == 3730)
  }

  /// A big audience gets its viewer count less often: frames per second stay bounded.
  @Test func viewerPatchesScaleWithAudience() {
    var machine = SessionStateMachine(config: config, now: t0)
    var patches = 0
    var now = t0
    for viewer in 1...10_000 {
      now = t0 + Int64(viewer) / 10  // 10k joins over one second
      if case .broadcast = machine.viewersChanged(to: viewer, now: now) { patches += 1 }
      if let due = machine.nextDeadline, due <= now, case .broadcast = machine.advance(now: now) {
        patches += 1
      }
    }
    // At 250 ms a patch, a 1 s storm would send 4 patches, each to thousands of viewers;
    // stretched, the count patches cost at most about viewerFramesPerSecond frames a second.
    #expect(patches >= 1 && patches <= 3)
  }
}
