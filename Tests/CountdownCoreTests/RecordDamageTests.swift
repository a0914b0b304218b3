import Testing

@testable import CountdownCore

/// Records that come from outside (a row, a Redis hash) are checked before use.
@Suite struct RecordDamageTests {
  let t0: Int64 = 1_700_000_000_000

  /// Every record the command rules produce is undamaged.
  @Test func recordsFromTheRulesAreWhole() {
    var record = SessionRecord()
    #expect(record.damage == nil)
    let commands: [SessionCommand] = [
      .start(.seconds(90), finishedLabel: "Done"), .pause, .adjust(seconds: 30), .resume,
      .adjust(seconds: -86_400), .start(.until(t0 + 2_592_000_000), finishedLabel: nil), .cancel,
      .wait(label: "w", timeoutSeconds: 86_400, timeoutLabel: "t"), .rotateKey(KeyHash(of: "k")),
      .done(label: "ok"), .wait(label: nil, timeoutSeconds: nil, timeoutLabel: nil),
      .fail(label: nil), .wait(label: nil, timeoutSeconds: 1, timeoutLabel: nil), .cancel,
    ]
    for command in commands {
      guard case .success(let next) = record.applying(command, at: t0) else { continue }
      #expect(next.damage == nil, "\(command)")
      record = next
    }
  }

  /// Each field at and past its edge is named as damage, never trusted.
  @Test func edgesAreDamage() {
    let running = SessionRecord.Fields(phase: .running, duration: 60, endsAt: t0, updatedAt: t0)
    #expect(running.damage == nil)
    var bad = running
    bad.endsAt = .max
    #expect(bad.damage != nil)
    bad.endsAt = .min
    #expect(bad.damage != nil)
    bad.endsAt = nil
    #expect(bad.damage != nil)
    bad.endsAt = SessionRecord.epochMsRange.upperBound
    #expect(bad.damage != nil, "in range, but further ahead than any command sets")
    bad = running
    bad.updatedAt = -1
    #expect(bad.damage != nil)
    bad = running
    bad.duration = Int(Int32.max) + 1
    #expect(bad.damage != nil)
    bad.duration = -1
    #expect(bad.damage != nil)
    bad = running
    bad.seq = SessionRecord.maxCounter + 1
    #expect(bad.damage != nil)
    bad = running
    bad.finishedLabel = "a\u{0}b"
    #expect(bad.damage != nil)
    bad.finishedLabel = String(repeating: "x", count: 4096)
    #expect(bad.damage != nil)
    let paused = SessionRecord.Fields(phase: .paused, duration: 60, remainingMs: 0, updatedAt: t0)
    #expect(paused.damage != nil)
    var idle = SessionRecord.Fields(phase: .idle, updatedAt: t0)
    #expect(idle.damage == nil)
    idle.remainingMs = 5
    #expect(idle.damage != nil)
  }

  /// A record read back from its flat fields is the record it was written
  /// from, and a typed record's range damage is its fields' damage.
  @Test func fieldsRoundTrip() throws {
    let records = [
      SessionRecord(.running(endsAt: t0 + 5000), duration: 5, seq: 3, revision: 2, updatedAt: t0),
      SessionRecord(.paused(remainingMs: 1500), duration: 9, finishedLabel: "x", updatedAt: t0),
      SessionRecord(
        .finished(.elapsed), duration: 60, finishedLabel: "bye", revision: 9, updatedAt: t0),
      SessionRecord(.idle, finishedLabel: "kept", updatedAt: t0),
    ]
    for record in records {
      #expect(try SessionRecord(validating: record.fields) == record)
    }
    let ahead = SessionRecord(.running(endsAt: SessionRecord.epochMsRange.upperBound))
    #expect(ahead.damage == ahead.fields.damage)
    #expect(ahead.damage == "a running record's endsAt is more than 30 days after its updatedAt")
  }

  /// Labels are text: control characters and DEL are refused, other scripts are not.
  @Test func labelsAreText() {
    #expect(SessionRecord.isValidFinishedLabel("倒計時結束"))
    #expect(!SessionRecord.isValidFinishedLabel(""))
    for code in [0, 0x1F, 0x7F, 0x0A] {
      #expect(!SessionRecord.isValidFinishedLabel("x" + String(UnicodeScalar(UInt8(code)))))
    }
    #expect(SessionRecord.isValidFinishedLabel(String(repeating: "é", count: 64)))
    #expect(!SessionRecord.isValidFinishedLabel(String(repeating: "é", count: 65)))
  }

  /// A waiting record's times and labels, and a finished one's outcome, at
  /// and past their edges are named as damage.
  @Test func waitingEdgesAreDamage() {
    let waiting = SessionRecord.Fields(
      phase: .waiting, updatedAt: t0, startedAt: t0, timeoutAt: t0 + 1000, waitLabel: "w")
    #expect(waiting.damage == nil)
    var bad = waiting
    for startedAt: Int64? in [
      nil, .min, .max, -1, t0 + 1, SessionRecord.epochMsRange.upperBound + 1,
    ] {
      bad.startedAt = startedAt
      #expect(bad.damage != nil, "startedAt \(String(describing: startedAt))")
    }
    bad = waiting
    for timeoutAt: Int64 in [.min, .max, t0, t0 + 999, t0 + 86_400_001, -1] {
      bad.timeoutAt = timeoutAt
      #expect(bad.damage != nil, "timeoutAt \(timeoutAt)")
    }
    bad.timeoutAt = t0 + 86_400_000
    #expect(bad.damage == nil)
    bad = waiting
    for label in ["", "a\u{0}b", "\u{7F}", String(repeating: "x", count: 4096)] {
      bad.waitLabel = label
      #expect(bad.damage != nil, "waitLabel \(label.debugDescription)")
    }
    bad = waiting
    bad.duration = 1
    #expect(bad.damage != nil)
    bad = waiting
    bad.outcome = .done
    #expect(bad.damage != nil)
    bad = waiting
    bad.endsAt = t0 + 5000
    #expect(bad.damage != nil)
    var finished = SessionRecord.Fields(phase: .finished, updatedAt: t0, outcome: .timeout)
    #expect(finished.damage == nil)
    finished.outcome = nil
    #expect(finished.damage != nil)
    finished.outcome = .done
    finished.waitLabel = "w"
    #expect(finished.damage != nil)
    finished.waitLabel = nil
    finished.timeoutAt = t0
    #expect(finished.damage != nil)
    var idle = SessionRecord.Fields(phase: .idle, updatedAt: t0, outcome: .elapsed)
    #expect(idle.damage != nil)
    idle.outcome = nil
    idle.startedAt = t0
    #expect(idle.damage != nil)
  }
}
