import Testing

@testable import CountdownCore

/// Overtime, warning and danger levels, `stop`, and the presenter's message
/// and blackout, on the state machine and the rules, with time passed in.
@Suite struct StageTests {
  let t0: Int64 = 1_700_000_000_000
  let config = SessionConfig()

  func started(
    seconds: Int, overtime: Bool = false, warn: Int? = nil, danger: Int? = nil
  ) -> SessionStateMachine {
    var machine = SessionStateMachine(config: config, now: t0)
    let options = RunOptions(overtime: overtime, warnAtSeconds: warn, dangerAtSeconds: danger)
    _ = machine.apply(.start(.seconds(seconds), finishedLabel: nil, options: options), now: t0)
    return machine
  }

  /// The level turns to warning in the tick that shows warnAtSeconds, at
  /// exactly endsAt − warn s, and to danger in the one that shows dangerAtSeconds.
  @Test func levelsTurnAtTheirTick() {
    var machine = started(seconds: 10, warn: 5, danger: 2)
    #expect(machine.published.level == .normal)
    #expect(machine.published.warnAtSeconds == 5 && machine.published.dangerAtSeconds == 2)
    var levels: [Int: Level] = [:]
    for remaining in stride(from: 9, through: 1, by: -1) {
      let due = t0 + 10_000 - Int64(remaining) * 1000
      #expect(machine.nextDeadline == due)
      // A millisecond early changes nothing.
      #expect(machine.advance(now: due - 1) == .schedule(next: due))
      guard let patch = broadcastPatch(machine.advance(now: due)) else { return }
      levels[remaining] = patch.state.level
      let turned = remaining == 5 || remaining == 2
      #expect(patch.fields.contains(.level) == turned, "remaining \(remaining)")
    }
    #expect(levels[6] == .normal && levels[5] == .warning && levels[3] == .warning)
    #expect(levels[2] == .danger && levels[1] == .danger)
    let finish = broadcastPatch(machine.advance(now: t0 + 10_000))
    #expect(finish?.state.level == .normal && finish?.state.outcome == .elapsed)
    #expect(finish?.state.warnAtSeconds == nil && finish?.state.overtime == false)
  }

  /// A run shorter than its warning starts in warning; a paused one keeps its level.
  @Test func levelFromTheStartAndWhilePaused() {
    var machine = started(seconds: 30, warn: 60, danger: 10)
    #expect(machine.published.level == .warning)
    _ = machine.apply(.adjust(seconds: -25), now: t0)
    #expect(machine.published.level == .danger)
    _ = machine.apply(.pause, now: t0 + 100)
    #expect(machine.published.phase == .paused && machine.published.level == .danger)
    _ = machine.apply(.adjust(seconds: 100), now: t0 + 200)
    #expect(machine.published.level == .normal)
  }

  /// At zero an overtime run counts up from its deadline: `+0`, `+1`, …,
  /// each tick at overSince + k s however late the wake-up, spinner on.
  @Test func overtimeTicksFromTheDeadline() {
    var machine = started(seconds: 3, overtime: true, warn: 2)
    for second in 1...2 { _ = machine.advance(now: t0 + Int64(second) * 1000) }
    #expect(machine.nextDeadline == t0 + 3000)
    guard let zero = broadcastPatch(machine.advance(now: t0 + 3000)) else { return }
    #expect(zero.state.phase == .overtime && zero.state.label == "+0")
    #expect(zero.state.overSince == t0 + 3000 && zero.state.level == .over)
    #expect(zero.state.spinner && !zero.state.enabled && zero.state.endsAt == nil)
    #expect(zero.fields.isSuperset(of: [.phase, .label, .level, .overSince, .endsAt]))
    #expect(machine.nextDeadline == t0 + 4000)
    #expect(broadcastPatch(machine.advance(now: t0 + 4000))?.state.label == "+1")
    // Woken 700 ms late: the label is still derived from the deadline.
    #expect(broadcastPatch(machine.advance(now: t0 + 5700))?.state.label == "+2")
    #expect(machine.nextDeadline == t0 + 6000)
    #expect(machine.record.status == .overtime(since: t0 + 3000))
  }

  /// Overtime's label turns clock style past a minute and an hour.
  @Test func overtimeLabels() {
    let labels = [0, 1, 59, 60, 61, 599, 3599, 3600, 3661, 86_399].map {
      SessionStateMachine.overtimeLabel(seconds: $0)
    }
    #expect(
      labels == [
        "+0", "+1", "+59", "+1:00", "+1:01", "+9:59", "+59:59", "+1:00:00", "+1:01:01",
        "+23:59:59",
      ])
  }

  /// `stop` in overtime finishes `stopped` with the time over; before zero with 0.
  @Test func stopKeepsTheTimeOver() {
    var machine = started(seconds: 2, overtime: true)
    _ = machine.advance(now: t0 + 2000)
    let stop = broadcastPatch(machine.apply(.stop, now: t0 + 47_250))
    #expect(stop?.state.phase == .finished && stop?.state.outcome == .stopped)
    #expect(stop?.state.overMs == 45_250 && stop?.state.label == config.finishedLabel)
    #expect(stop?.state.spinner == false && stop?.state.level == .normal)
    #expect(machine.record.overMs == 45_250 && machine.record.run == .none)

    var early = started(seconds: 20)
    _ = early.apply(.stop, now: t0 + 5000)
    #expect(early.published.outcome == .stopped && early.published.overMs == 0)
    #expect(early.apply(.stop, now: t0 + 6000) == .reject(.notRunning))
    // The next run forgets the last one's time over.
    _ = early.apply(.start(.seconds(5), finishedLabel: nil), now: t0 + 7000)
    #expect(early.published.overMs == nil && early.record.overMs == nil)
  }

  /// Each op's answer in overtime, and `cancel` ends it.
  @Test func opsInOvertime() {
    var machine = started(seconds: 1, overtime: true)
    _ = machine.advance(now: t0 + 1000)
    let at = t0 + 5000
    #expect(machine.apply(.pause, now: at) == .reject(.notRunning))
    #expect(machine.apply(.resume, now: at) == .reject(.notPaused))
    #expect(machine.apply(.start(.seconds(5), finishedLabel: nil), now: at) == .reject(.busy))
    #expect(
      machine.apply(.wait(label: nil, timeoutSeconds: nil, timeoutLabel: nil), now: at)
        == .reject(.busy))
    #expect(machine.apply(.done(label: nil), now: at) == .reject(.notWaiting))
    var cancelled = machine
    _ = cancelled.apply(.cancel, now: at)
    #expect(cancelled.published.phase == .idle && cancelled.published.overSince == nil)
    #expect(cancelled.published.overtime == false)
  }

  /// Adjusting in overtime moves its deadline: far enough it runs again,
  /// not far enough it counts on from the new deadline; and a run adjusted
  /// past zero goes into overtime from the deadline it implies.
  @Test func adjustMovesTheDeadline() {
    var machine = started(seconds: 1, overtime: true)
    _ = machine.advance(now: t0 + 1000)
    _ = machine.apply(.adjust(seconds: 1), now: t0 + 3000)
    #expect(machine.record.status == .overtime(since: t0 + 2000))
    #expect(machine.published.label == "+1")
    _ = machine.apply(.adjust(seconds: 10), now: t0 + 5000)
    #expect(machine.record.status == .running(endsAt: t0 + 12_000))
    #expect(machine.published.level == .normal && machine.published.remaining == 7)
    _ = machine.apply(.adjust(seconds: -20), now: t0 + 6000)
    #expect(machine.record.status == .overtime(since: t0 - 8000))
    #expect(machine.published.label == "+14")
    // More than a day over is refused.
    #expect(machine.apply(.adjust(seconds: -86_400), now: t0 + 6000) == .reject(.badRequest))
  }

  /// Overtime ends by itself a day past the deadline, stopped, with a day over.
  @Test func overtimeStopsAfterADay() {
    var machine = started(seconds: 1, overtime: true)
    let day = SessionRecord.maxOvertimeMs
    _ = machine.advance(now: t0 + 1000)
    #expect(machine.record.selfFinishAt == t0 + 1000 + day)
    // A restart long after: the record settles to the same finish.
    let restored = SessionStateMachine(
      restoring: machine.record, config: SessionConfig.Shared(config), now: t0 + 2 * day)
    #expect(restored.published.outcome == .stopped && restored.published.overMs == day)
    _ = machine.advance(now: t0 + day - 1000)
    #expect(machine.nextDeadline == t0 + day)
    _ = machine.advance(now: t0 + day)
    #expect(machine.published.label == "+23:59:59")
    #expect(machine.nextDeadline == t0 + 1000 + day)
    let end = broadcastPatch(machine.advance(now: t0 + 1000 + day))
    #expect(end?.state.outcome == .stopped && end?.state.overMs == day)
    #expect(machine.record.finishedByItself(by: t0 + 1000 + day) == nil)
  }

  /// Without the option, zero finishes as before: no overtime, no level.
  @Test func withoutOvertimeZeroFinishes() {
    var machine = started(seconds: 1)
    let finish = broadcastPatch(machine.advance(now: t0 + 1000))
    #expect(finish?.state.phase == .finished && finish?.state.outcome == .elapsed)
    #expect(
      finish?.fields.contains(.level) == false && finish?.fields.contains(.overSince) == false)
  }

  /// A restored overtime record counts on from its overSince.
  @Test func restoredOvertimeCountsOn() {
    var machine = started(seconds: 2, overtime: true, warn: 1)
    _ = machine.advance(now: t0 + 2000)
    _ = machine.apply(.message("Wrap up"), now: t0 + 2500)
    let record = machine.record
    #expect(record.fields.endsAt == t0 + 2000 && record.fields.phase == .overtime)
    let back = try? SessionRecord(validating: record.fields)
    #expect(back == record)
    let restored = SessionStateMachine(
      restoring: record, config: SessionConfig.Shared(config), now: t0 + 75_000)
    #expect(restored.published.label == "+1:13" && restored.published.message == "Wrap up")
    #expect(restored.published.warnAtSeconds == 1)
  }

  /// A message is set, kept across runs, cleared by null; a blackout too, in any phase.
  @Test func messageAndBlackout() {
    var machine = SessionStateMachine(config: config, now: t0)
    let set = broadcastPatch(machine.apply(.message("Wrap up"), now: t0))
    #expect(set?.fields == [.message] && set?.state.message == "Wrap up")
    #expect(machine.revision == 1)
    let dark = broadcastPatch(machine.apply(.blackout(true), now: t0 + 1))
    #expect(dark?.fields == [.blackout] && dark?.state.blackout == true)
    _ = machine.apply(.start(.seconds(2), finishedLabel: nil), now: t0 + 2)
    _ = machine.advance(now: t0 + 2002)
    #expect(machine.published.message == "Wrap up" && machine.published.blackout)
    let clear = broadcastPatch(machine.apply(.message(nil), now: t0 + 3000))
    #expect(clear?.fields == [.message] && clear?.state.message == nil)
    _ = machine.apply(.blackout(false), now: t0 + 3001)
    #expect(machine.record.blackout == false && machine.record.message == nil)
    // The same blackout again changes nothing a viewer sees.
    #expect(
      machine.apply(.blackout(false), now: t0 + 3002) == .schedule(next: machine.nextDeadline))
  }

  /// A viewer merged across a message and a level change gets both, and
  /// the fields they travel with, in one patch.
  @Test func mergedPatchesKeepTheNewFields() {
    var machine = started(seconds: 10, warn: 9)
    let seq = machine.seq
    _ = machine.apply(.message("Wrap up"), now: t0 + 10)
    _ = machine.advance(now: t0 + 1000)
    let fields = machine.changes(since: seq)
    #expect(fields.isSuperset(of: [.message, .level, .label, .remaining]))
    #expect(fields.contains(.blackout) && !fields.contains(.overSince))
    #expect(FieldSet(coarse: FieldSet.all.coarse) == .all)
  }

  /// The rules refuse a message that is empty, too long or holds a control character.
  @Test func messageLimits() {
    let record = SessionRecord()
    let ok = String(repeating: "é", count: SessionRecord.maxMessageLength)
    #expect((try? record.applying(.message(ok), at: t0).get())?.message == ok)
    for bad in [
      "", ok + "x", "a\u{0}b", "tab\there", "del\u{7F}", String(repeating: "x", count: 4096),
    ] {
      #expect(record.applying(.message(bad), at: t0) == .failure(.badRequest), "\(bad.count)")
    }
  }

  /// Levels out of range or danger not below warning are refused by the rules.
  @Test func levelRules() {
    let record = SessionRecord()
    for (warn, danger) in [
      (5, 5), (5, 6), (0, nil), (nil, 0), (86_401, nil), (Int.max, 1), (1, Int.min),
    ]
      as [(Int?, Int?)]
    {
      let options = RunOptions(warnAtSeconds: warn, dangerAtSeconds: danger)
      #expect(!options.isValid)
      #expect(
        record.applying(.start(.seconds(10), finishedLabel: nil, options: options), at: t0)
          == .failure(.badRequest), "\(String(describing: warn)) \(String(describing: danger))")
    }
    for (warn, danger) in [(5, 4), (86_400, 1), (nil, 86_400), (1, nil)] as [(Int?, Int?)] {
      #expect(RunOptions(warnAtSeconds: warn, dangerAtSeconds: danger).isValid)
    }
  }

  /// Damaged new fields from storage are damage, not a record.
  @Test func damagedFieldsAreRefused() {
    let base = SessionRecord.Fields(
      phase: .running, duration: 10, endsAt: t0 + 10_000, updatedAt: t0)
    var cases: [SessionRecord.Fields] = []
    var f = base
    f.warnAtSeconds = 5
    f.dangerAtSeconds = 5
    cases.append(f)
    f = base
    f.warnAtSeconds = 86_401
    cases.append(f)
    f = base
    f.overMs = 0
    cases.append(f)
    f = base
    f.message = String(repeating: "x", count: 141)
    cases.append(f)
    f = base
    f.message = "a\u{0}"
    cases.append(f)
    f = SessionRecord.Fields(phase: .idle, updatedAt: t0, overtime: true)
    cases.append(f)
    f = SessionRecord.Fields(phase: .overtime, endsAt: t0, updatedAt: t0)
    cases.append(f)
    f = SessionRecord.Fields(
      phase: .overtime, endsAt: t0 - 86_400_000, updatedAt: t0, overtime: true)
    cases.append(f)
    f = SessionRecord.Fields(phase: .finished, updatedAt: t0, outcome: .stopped)
    cases.append(f)
    f = SessionRecord.Fields(phase: .finished, updatedAt: t0, outcome: .stopped, overMs: -1)
    cases.append(f)
    f = SessionRecord.Fields(phase: .finished, updatedAt: t0, outcome: .elapsed, overMs: 5)
    cases.append(f)
    for fields in cases { #expect(fields.damage != nil, "\(fields)") }
    var good = base
    good.overtime = true
    good.warnAtSeconds = 5
    good.dangerAtSeconds = 4
    good.message = "Wrap up"
    good.blackout = true
    #expect(good.damage == nil)
  }

  /// The decoder takes the new ops and options and refuses every edge value.
  @Test func decodesAndRefusesAtTheEdges() throws {
    func decode(_ text: String) -> Result<ClientMessage, CommandError> {
      WireCodec.decode(Array(text.utf8), defaultSeconds: 5)
    }
    let start = try decode(
      #"{"op":"start","seconds":300,"overtime":true,"warnAtSeconds":120,"dangerAtSeconds":30}"#
    ).get()
    #expect(
      start.request
        == .command(
          .start(
            .seconds(300), finishedLabel: nil,
            options: RunOptions(overtime: true, warnAtSeconds: 120, dangerAtSeconds: 30))))
    #expect(try decode(#"{"op":"stop"}"#).get().request == .command(.stop))
    #expect(try decode(#"{"op":"message","text":null}"#).get().request == .command(.message(nil)))
    #expect(try decode(#"{"op":"blackout","on":true}"#).get().request == .command(.blackout(true)))
    let bad = [
      #"{"op":"start","overtime":1}"#, #"{"op":"start","overtime":"true"}"#,
      #"{"op":"start","overtime":null}"#, #"{"op":"start","warnAtSeconds":9223372036854775808}"#,
      #"{"op":"start","warnAtSeconds":-9223372036854775808}"#,
      #"{"op":"start","warnAtSeconds":1e400}"#,
      #"{"op":"start","warnAtSeconds":-0}"#, #"{"op":"start","warnAtSeconds":"5"}"#,
      #"{"op":"start","warnAtSeconds":5.5}"#, #"{"op":"start","dangerAtSeconds":86401}"#,
      #"{"op":"start","warnAtSeconds":30,"dangerAtSeconds":30}"#, #"{"op":"message"}"#,
      #"{"op":"message","text":""}"#, #"{"op":"message","text":123}"#,
      #"{"op":"message","text":"a\u0000b"}"#,
      #"{"op":"message","text":"\#(String(repeating: "x", count: 141))"}"#,
      #"{"op":"message","text":"\#(String(repeating: "x", count: 4000))"}"#, #"{"op":"blackout"}"#,
      #"{"op":"blackout","on":"yes"}"#, #"{"op":"blackout","on":1}"#,
      #"{"op":"blackout","on":null}"#,
    ]
    for text in bad {
      guard case .failure(let error) = decode(text) else {
        Issue.record("decoded \(text.prefix(80))")
        continue
      }
      #expect(error.code == .badRequest, "\(text.prefix(80))")
    }
  }

  /// Webhooks: `stop` reports a finish, message and blackout their own types.
  @Test func webhookTypes() throws {
    let stopped = SessionRecord(.finished(.stopped), overMs: 0)
    #expect(WebhookEventType.of(.stop, result: stopped) == .finished)
    #expect(WebhookEventType.of(.message, result: SessionRecord()) == .message)
    #expect(WebhookEventType.of(.blackout, result: SessionRecord()) == .blackout)
  }

  /// A start's options are part of its idempotency fingerprint; a plain start's is unchanged.
  @Test func fingerprints() {
    let plain = SessionCommand.start(.seconds(5), finishedLabel: nil)
    #expect(plain.fingerprint == "start seconds 5 ")
    let timed = SessionCommand.start(
      .seconds(5), finishedLabel: nil, options: RunOptions(overtime: true, warnAtSeconds: 3))
    #expect(timed.fingerprint != plain.fingerprint)
    #expect(
      SessionCommand.isFingerprint(
        SessionCommand.message(String(repeating: "é", count: 140)).fingerprint))
    #expect(SessionCommand.message("a").fingerprint != SessionCommand.message(nil).fingerprint)
  }
}
