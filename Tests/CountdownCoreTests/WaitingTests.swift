import Testing

@testable import CountdownCore

/// The waiting phase: the seed's spinner with no deadline, ended by `done`,
/// `fail`, `cancel` or its own timeout, with time passed in.
@Suite struct WaitingTests {
  let t0: Int64 = 1_700_000_000_000
  let config = SessionConfig()

  func waiting(
    label: String? = nil, timeoutSeconds: Int? = nil, timeoutLabel: String? = nil
  ) -> SessionStateMachine {
    var machine = SessionStateMachine(config: config, now: t0)
    _ = machine.apply(
      .wait(label: label, timeoutSeconds: timeoutSeconds, timeoutLabel: timeoutLabel), now: t0)
    return machine
  }

  /// A wait shows the spinner, holds no button, and names its start and timeout in one patch.
  @Test func waitPublishesTheSpinner() {
    var machine = SessionStateMachine(config: config, now: t0)
    let patch = broadcastPatch(
      machine.apply(.wait(label: "Deploying", timeoutSeconds: 900, timeoutLabel: nil), now: t0))
    #expect(
      patch?.state
        == CountdownState(
          phase: .waiting, spinner: true, enabled: false, label: "Deploying", remaining: 0,
          duration: 0, endsAt: nil, viewers: 0, startedAt: t0, timeoutAt: t0 + 900_000))
    #expect(patch?.fields == [.phase, .spinner, .enabled, .label, .startedAt, .timeoutAt])
    #expect(machine.phase == .waiting)
    #expect(machine.nextDeadline == t0 + 900_000)
    #expect(machine.record.status == .waiting(startedAt: t0, timeoutAt: t0 + 900_000))
  }

  /// Without a label or a timeout, the default label shows and nothing is scheduled.
  @Test func waitWithoutTimeoutHasNoDeadline() {
    var machine = waiting()
    #expect(machine.published.label == "Waiting")
    #expect(machine.published.timeoutAt == nil)
    #expect(machine.nextDeadline == nil)
    // Nobody watches for a week: the wait is someone's job, so it is never forgotten.
    for day in 1...7 {
      #expect(machine.advance(now: t0 + Int64(day) * 86_400_000) == .schedule(next: nil))
    }
    #expect(machine.phase == .waiting)
  }

  /// The timeout fires at exactly timeoutAt, not a millisecond before, with the wait's timeout label.
  @Test func timeoutAtExactlyTimeoutAt() {
    var machine = waiting(label: "Deploying", timeoutSeconds: 2, timeoutLabel: "Deploy timed out")
    #expect(machine.advance(now: t0 + 1999) == .schedule(next: t0 + 2000))
    #expect(machine.phase == .waiting)
    let patch = broadcastPatch(machine.advance(now: t0 + 2000))
    #expect(patch?.state.phase == .finished)
    #expect(patch?.state.outcome == .timeout)
    #expect(patch?.state.label == "Deploy timed out")
    #expect(patch?.state.spinner == false && patch?.state.enabled == true)
    #expect(patch?.state.startedAt == nil && patch?.state.timeoutAt == nil)
    #expect(patch?.fields.isSuperset(of: [.phase, .outcome, .startedAt, .timeoutAt]) == true)
    #expect(machine.record.status == .finished(.timeout))
    #expect(machine.record.waitLabel == nil)
  }

  /// A timeout without its own label shows "Timed out"; a late wake-up finishes it too.
  @Test func timeoutDefaultLabelAndLateWakeUp() {
    var machine = waiting(timeoutSeconds: 1)
    let patch = broadcastPatch(machine.advance(now: t0 + 60_000))
    #expect(patch?.state.label == "Timed out")
    #expect(patch?.state.outcome == .timeout)
  }

  /// done and fail finish the wait with their outcome and label, or the default words.
  @Test(arguments: [
    (SessionCommand.done(label: "Deployed"), Outcome.done, "Deployed"),
    (.done(label: nil), .done, "Done"),
    (.fail(label: "Deploy failed"), .failed, "Deploy failed"),
    (.fail(label: nil), .failed, "Failed"),
  ])
  func doneAndFail(command: SessionCommand, outcome: Outcome, label: String) {
    var machine = waiting(label: "Deploying", timeoutSeconds: 900, timeoutLabel: "late")
    let patch = broadcastPatch(machine.apply(command, now: t0 + 5000))
    #expect(patch?.state.phase == .finished)
    #expect(patch?.state.outcome == outcome)
    #expect(patch?.state.label == label)
    #expect(patch?.state.startedAt == nil && patch?.state.timeoutAt == nil)
    // The timeout no longer applies.
    #expect(machine.nextDeadline != t0 + 900_000)
    #expect(machine.advance(now: t0 + 900_000).isBroadcast == false)
    #expect(machine.published.outcome == outcome)
  }

  /// cancel while waiting goes back to idle, with no outcome.
  @Test func cancelWhileWaiting() {
    var machine = waiting(timeoutSeconds: 60)
    let patch = broadcastPatch(machine.cancel(now: t0 + 10))
    #expect(patch?.state.phase == .idle)
    #expect(patch?.state.outcome == nil && patch?.state.startedAt == nil)
    #expect(patch?.state.label == "Ready")
    #expect(machine.record.waitLabel == nil)
  }

  /// Every op that a waiting session refuses, with its error, leaving it unchanged.
  @Test(arguments: [
    (SessionCommand.start(.seconds(5), finishedLabel: nil), ErrorCode.busy),
    (.wait(label: nil, timeoutSeconds: nil, timeoutLabel: nil), .busy),
    (.pause, .notRunning),
    (.adjust(seconds: 30), .notRunning),
    (.adjust(seconds: -30), .notRunning),
    (.resume, .notPaused),
  ])
  func waitingRefuses(command: SessionCommand, code: ErrorCode) {
    var machine = waiting(timeoutSeconds: 60)
    let before = machine.record
    #expect(machine.apply(command, now: t0 + 10) == .reject(code))
    #expect(machine.record == before)
  }

  /// done and fail anywhere but waiting are not_waiting; wait anywhere running is busy.
  @Test func refusalsOutsideWaiting() {
    var idle = SessionStateMachine(config: config, now: t0)
    #expect(idle.apply(.done(label: nil), now: t0) == .reject(.notWaiting))
    #expect(idle.apply(.fail(label: "x"), now: t0) == .reject(.notWaiting))
    var running = SessionStateMachine(config: config, now: t0)
    _ = running.start(seconds: 60, finishedLabel: nil, now: t0)
    #expect(running.apply(.done(label: nil), now: t0) == .reject(.notWaiting))
    #expect(
      running.apply(.wait(label: nil, timeoutSeconds: nil, timeoutLabel: nil), now: t0)
        == .reject(.busy))
    _ = running.apply(.pause, now: t0 + 1000)
    #expect(running.apply(.fail(label: nil), now: t0 + 1000) == .reject(.notWaiting))
    #expect(
      running.apply(.wait(label: nil, timeoutSeconds: 5, timeoutLabel: nil), now: t0 + 1000)
        == .reject(.busy))
    var finished = waiting()
    _ = finished.apply(.done(label: nil), now: t0 + 1)
    #expect(finished.apply(.done(label: nil), now: t0 + 2) == .reject(.notWaiting))
    #expect(finished.apply(.cancel, now: t0 + 2) == .reject(.notRunning))
  }

  /// A wait may follow any finish, and a start may follow a finished wait.
  @Test func waitAfterFinishAndStartAfterWait() {
    var machine = SessionStateMachine(config: config, now: t0)
    _ = machine.start(seconds: 1, finishedLabel: "end", now: t0)
    let end = broadcastPatch(machine.advance(now: t0 + 1000))
    #expect(end?.state.outcome == .elapsed)
    #expect(end?.state.label == "end")
    let wait = broadcastPatch(
      machine.apply(.wait(label: nil, timeoutSeconds: nil, timeoutLabel: nil), now: t0 + 2000))
    #expect(wait?.state.phase == .waiting && wait?.state.outcome == nil)
    #expect(wait?.state.startedAt == t0 + 2000)
    #expect(wait?.state.duration == 0)
    _ = machine.apply(.fail(label: nil), now: t0 + 3000)
    let start = broadcastPatch(machine.start(seconds: 5, finishedLabel: nil, now: t0 + 4000))
    #expect(start?.state.phase == .running && start?.state.outcome == nil)
  }

  /// A countdown adjusted to nothing finishes as elapsed, as one that ran out.
  @Test func adjustToNothingIsElapsed() {
    var machine = SessionStateMachine(config: config, now: t0)
    _ = machine.start(seconds: 5, finishedLabel: nil, now: t0)
    let patch = broadcastPatch(machine.apply(.adjust(seconds: -10), now: t0))
    #expect(patch?.state.outcome == .elapsed)
    #expect(patch?.state.label == "Countdown finished")
  }

  /// Labels and timeouts out of range are bad_request in the rules too, not only the decoder.
  @Test(arguments: [
    SessionCommand.wait(label: "", timeoutSeconds: nil, timeoutLabel: nil),
    .wait(label: "a\u{0}b", timeoutSeconds: nil, timeoutLabel: nil),
    .wait(label: nil, timeoutSeconds: nil, timeoutLabel: String(repeating: "x", count: 65)),
    .wait(label: nil, timeoutSeconds: 0, timeoutLabel: nil),
    .wait(label: nil, timeoutSeconds: 86_401, timeoutLabel: nil),
    .wait(label: nil, timeoutSeconds: Int.max, timeoutLabel: nil),
    .wait(label: nil, timeoutSeconds: Int.min, timeoutLabel: nil),
  ])
  func rulesRefuseBadWaits(command: SessionCommand) {
    #expect(SessionRecord().applying(command, at: t0) == .failure(.badRequest))
  }

  /// done or fail with a bad label is bad_request and the wait goes on.
  @Test func badDoneLabelKeepsWaiting() throws {
    let record = try SessionRecord().applying(
      .wait(label: nil, timeoutSeconds: nil, timeoutLabel: nil), at: t0
    ).get()
    #expect(
      record.applying(.done(label: String(repeating: "é", count: 65)), at: t0)
        == .failure(.badRequest))
    #expect(record.applying(.fail(label: "\u{7F}"), at: t0) == .failure(.badRequest))
    #expect(
      try record.applying(.fail(label: String(repeating: "é", count: 64)), at: t0).get().outcome
        == .failed)
  }

  /// A restart before the timeout brings the wait back, to time out at the original timeoutAt.
  @Test func restoreBeforeTimeoutKeepsTheDeadline() throws {
    let machine = waiting(label: "Build", timeoutSeconds: 60, timeoutLabel: "Build timed out")
    let stored = machine.record
    #expect(stored.damage == nil)
    var back = SessionStateMachine(
      restoring: try SessionRecord(validating: stored.fields), config: .init(config),
      now: t0 + 30_000)
    #expect(back.phase == .waiting)
    #expect(back.published.startedAt == t0)
    #expect(back.published.label == "Build")
    #expect(back.nextDeadline == t0 + 60_000)
    #expect(back.seq > machine.seq)
    let patch = broadcastPatch(back.advance(now: t0 + 60_000))
    #expect(patch?.state.outcome == .timeout && patch?.state.label == "Build timed out")
  }

  /// A restart after timeoutAt passed while the server was down finds the wait finished, timed out.
  @Test func restoreAfterTimeoutIsFinished() {
    let stored = waiting(timeoutSeconds: 60, timeoutLabel: "Too late").record
    let back = SessionStateMachine(restoring: stored, config: .init(config), now: t0 + 60_000)
    #expect(back.phase == .finished)
    #expect(back.published.outcome == .timeout)
    #expect(back.published.label == "Too late")
    #expect(back.record.status == .finished(.timeout))
    #expect(back.record.damage == nil)
    // The same at any later time, and a wait with no timeout stays waiting however long.
    let later = SessionStateMachine(
      restoring: stored, config: .init(config), now: t0 + 30 * 86_400_000)
    #expect(later.published.outcome == .timeout)
    let open = SessionStateMachine(
      restoring: waiting().record, config: .init(config), now: t0 + 30 * 86_400_000)
    #expect(open.phase == .waiting)
  }

  /// A command sequenced after the timeout sees the session finished: a late done is not_waiting.
  @Test func doneAfterTimeoutIsNotWaiting() throws {
    let record = try SessionRecord().applying(
      .wait(label: nil, timeoutSeconds: 1, timeoutLabel: nil), at: t0
    ).get()
    #expect(record.applying(.done(label: nil), at: t0 + 999).map(\.outcome) == .success(.done))
    #expect(record.applying(.done(label: nil), at: t0 + 1000) == .failure(.notWaiting))
    #expect(
      try record.applying(.wait(label: nil, timeoutSeconds: nil, timeoutLabel: nil), at: t0 + 1000)
        .get().startedAt == t0 + 1000)
  }

  /// A waiting or finished record comes back from its flat form exactly.
  @Test func recordsRoundTrip() throws {
    for record in [
      waiting(label: "w", timeoutSeconds: 86_400, timeoutLabel: "t").record,
      waiting().record,
      SessionRecord(.finished(.failed), finishedLabel: "no", revision: 2, updatedAt: t0),
      SessionRecord(.finished(.timeout), revision: 2, updatedAt: t0),
    ] {
      #expect(try SessionRecord(validating: record.fields) == record)
    }
  }
}

extension SessionStateMachine.Action {
  var isBroadcast: Bool {
    if case .broadcast = self { return true }
    return false
  }
}
