import Testing

@testable import CountdownCore

/// The pure command rules on the durable record: what each command makes of each phase.
@Suite struct SessionRecordTests {
  let t0: Int64 = 1_700_000_000_000

  func running(_ seconds: Int, at: Int64) -> SessionRecord {
    guard
      case .success(let record) = SessionRecord().applying(
        .start(.seconds(seconds), finishedLabel: nil), at: at)
    else { fatalError("a start from idle is always allowed") }
    return record
  }

  func error(_ record: SessionRecord, _ command: SessionCommand, at: Int64) -> ErrorCode? {
    if case .failure(let code) = record.applying(command, at: at) { return code }
    return nil
  }

  /// Start by seconds sets endsAt, duration, revision and the command's time.
  @Test func startBySeconds() {
    let record = running(90, at: t0)
    #expect(record.phase == .running)
    #expect(record.endsAt == t0 + 90_000)
    #expect(record.duration == 90)
    #expect(record.remainingMs == nil)
    #expect(record.revision == 1)
    #expect(record.updatedAt == t0)
  }

  /// A start with `until` ends exactly then; its duration is the whole seconds up to it.
  @Test func startUntil() throws {
    let until = t0 + 3_600_500
    let record = try SessionRecord().applying(.start(.until(until), finishedLabel: "go"), at: t0)
      .get()
    #expect(record.endsAt == until)
    #expect(record.duration == 3601)
    #expect(record.finishedLabel == "go")
  }

  /// `until` must be from 1 s to 30 days ahead.
  @Test func untilRange() {
    let idle = SessionRecord()
    #expect(error(idle, .start(.until(t0 + 999), finishedLabel: nil), at: t0) == .badRequest)
    #expect(error(idle, .start(.until(t0 - 5000), finishedLabel: nil), at: t0) == .badRequest)
    #expect(error(idle, .start(.until(t0 + 1000), finishedLabel: nil), at: t0) == nil)
    #expect(error(idle, .start(.until(t0 + 2_592_000_000), finishedLabel: nil), at: t0) == nil)
    #expect(
      error(idle, .start(.until(t0 + 2_592_000_001), finishedLabel: nil), at: t0) == .badRequest)
  }

  /// Start is busy while running or paused, and allowed again once a run has finished.
  @Test func startBusy() throws {
    let record = running(5, at: t0)
    #expect(error(record, .start(.seconds(5), finishedLabel: nil), at: t0 + 1000) == .busy)
    let paused = try record.applying(.pause, at: t0 + 1000).get()
    #expect(error(paused, .start(.seconds(5), finishedLabel: nil), at: t0 + 2000) == .busy)
    #expect(error(record, .start(.seconds(5), finishedLabel: nil), at: t0 + 5000) == nil)
  }

  /// Pause freezes the exact milliseconds left at the command's time.
  @Test func pauseFreezes() throws {
    let paused = try running(60, at: t0).applying(.pause, at: t0 + 12_345).get()
    #expect(paused.phase == .paused)
    #expect(paused.endsAt == nil)
    #expect(paused.remainingMs == 47_655)
    #expect(paused.revision == 2)
  }

  /// Resume sets endsAt to its own time plus the frozen milliseconds.
  @Test func resumeFromFrozen() throws {
    let paused = try running(60, at: t0).applying(.pause, at: t0 + 10_000).get()
    let resumed = try paused.applying(.resume, at: t0 + 99_000).get()
    #expect(resumed.phase == .running)
    #expect(resumed.endsAt == t0 + 99_000 + 50_000)
    #expect(resumed.remainingMs == nil)
  }

  /// Adjust moves endsAt while running, and duration with it.
  @Test func adjustRunning() throws {
    let later = try running(60, at: t0).applying(.adjust(seconds: 60), at: t0 + 1000).get()
    #expect(later.endsAt == t0 + 120_000)
    #expect(later.duration == 120)
    let sooner = try later.applying(.adjust(seconds: -30), at: t0 + 2000).get()
    #expect(sooner.endsAt == t0 + 90_000)
    #expect(sooner.duration == 90)
  }

  /// Adjust moves the frozen milliseconds while paused.
  @Test func adjustPaused() throws {
    let paused = try running(60, at: t0).applying(.pause, at: t0 + 500).get()
    let adjusted = try paused.applying(.adjust(seconds: -10), at: t0 + 9000).get()
    #expect(adjusted.phase == .paused)
    #expect(adjusted.remainingMs == 49_500)
    #expect(adjusted.duration == 50)
  }

  /// Adjusting to zero or below finishes the run at once, keeping its finished label.
  @Test func adjustToZeroFinishes() throws {
    let record = try SessionRecord().applying(.start(.seconds(30), finishedLabel: "end"), at: t0)
      .get()
    let done = try record.applying(.adjust(seconds: -30), at: t0).get()
    #expect(done.phase == .finished)
    #expect(done.endsAt == nil)
    #expect(done.finishedLabel == "end")
    let paused = try record.applying(.pause, at: t0 + 1000).get()
    #expect(try paused.applying(.adjust(seconds: -60), at: t0 + 2000).get().phase == .finished)
  }

  /// Adjust past 30 days, by zero, or outside ±86400 is a bad request.
  @Test func adjustLimits() throws {
    var record = running(86_400, at: t0)
    for _ in 0..<29 { record = try record.applying(.adjust(seconds: 86_400), at: t0).get() }
    #expect(error(record, .adjust(seconds: 86_400), at: t0) == .badRequest)
    #expect(error(record, .adjust(seconds: 0), at: t0) == .badRequest)
    #expect(error(record, .adjust(seconds: 86_401), at: t0) == .badRequest)
  }

  /// Each command's error in each phase that does not allow it.
  @Test func errorsByPhase() throws {
    let idle = SessionRecord()
    #expect(error(idle, .pause, at: t0) == .notRunning)
    #expect(error(idle, .cancel, at: t0) == .notRunning)
    #expect(error(idle, .adjust(seconds: 5), at: t0) == .notRunning)
    #expect(error(idle, .resume, at: t0) == .notPaused)
    let run = running(5, at: t0)
    #expect(error(run, .resume, at: t0 + 1000) == .notPaused)
    let paused = try run.applying(.pause, at: t0 + 1000).get()
    #expect(error(paused, .pause, at: t0 + 2000) == .notRunning)
    let finished = run.settled(at: t0 + 5000)
    #expect(finished.phase == .finished)
    #expect(error(finished, .adjust(seconds: 5), at: t0 + 6000) == .notRunning)
    #expect(error(finished, .pause, at: t0 + 6000) == .notRunning)
  }

  /// Cancel takes a running or a paused session back to idle.
  @Test func cancelRunningOrPaused() throws {
    #expect(try running(5, at: t0).applying(.cancel, at: t0 + 1).get().phase == .idle)
    let paused = try running(5, at: t0).applying(.pause, at: t0 + 1).get()
    let idle = try paused.applying(.cancel, at: t0 + 2).get()
    #expect(idle.phase == .idle)
    #expect(idle.remainingMs == nil)
  }

  /// A command that comes after the deadline sees a finished run, not a running one.
  @Test func commandsSeeTheSettledRecord() {
    let record = running(5, at: t0)
    #expect(error(record, .pause, at: t0 + 5000) == .notRunning)
    #expect(error(record, .pause, at: t0 + 4999) == nil)
  }
}
