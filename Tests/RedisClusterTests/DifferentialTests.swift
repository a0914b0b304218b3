import CountdownCore
import Foundation
import TestSupport
import Testing

@testable import RedisCluster

/// The Lua function against `SessionRecord.applying`, on a real
/// redis-server: random records and commands, heavy on the edges of every
/// range, must get the same error code or the same record from both.
@Suite(.serialized) struct DifferentialTests {
  static let seed: UInt64 = 0x5EED_16
  static let key = KeyHash(of: "the differential test's key")
  static let cases = 3000
  static let ahead = SessionRecord.aheadMsRange.upperBound
  static let epochMax = SessionRecord.epochMsRange.upperBound

  static func pick<T>(_ choices: [T], _ random: inout SeededRandom) -> T {
    choices[Int.random(in: 0..<choices.count, using: &random)]
  }

  static let labels: [String?] = [
    nil, "fin", "倒計時 結束", String(repeating: "é", count: 64), String(repeating: "🎉", count: 64),
    "a\u{0}b", "\u{1F}", "del\u{7F}", String(repeating: "x", count: 65), "\u{85}next line",
  ]

  /// A record as an instance could hold it (in range), or now and then one
  /// out of range, which the function must refuse as a base.
  static func record(at t: Int64, _ random: inout SeededRandom) -> SessionRecord.Fields {
    let maxDuration = SessionRecord.durationRange.upperBound
    var record = SessionRecord.Fields(
      // Overtime and stopped reach the Lua with stage-cluster's parity work.
      phase: pick(Phase.allCases.filter { $0 != .overtime }, &random),
      duration: pick(
        [
          0, 1, 59, 86_400, maxDuration - 1, maxDuration,
          Int.random(in: 0...maxDuration, using: &random),
        ],
        &random),
      finishedLabel: pick(
        labels.filter { $0.map(SessionRecord.isValidFinishedLabel) ?? true }, &random),
      revision: pick(
        [0, 1, UInt64.random(in: 0...1_000_000, using: &random), SessionRecord.maxCounter - 1],
        &random),
      // Written now: the function takes a caller's record as written at its own time.
      updatedAt: t)
    switch record.phase {
    case .running:
      record.endsAt = pick(
        [
          0, t - 86_400_000, t - 1, t + 5, t + 1500, t + 60_000, t + ahead, t + ahead + 5000,
          epochMax, Int64.random(in: t...(t + ahead), using: &random),
        ], &random)
    case .paused:
      record.remainingMs = pick(
        [
          1, 999, 1000, 1001, 60_000, ahead - 1, ahead, Int64.random(in: 1...ahead, using: &random),
        ],
        &random)
    case .waiting:
      record.duration = 0
      let started = pick([0, t - 86_400_000, t - 1, t], &random)
      record.startedAt = started
      record.timeoutAt = pick(
        [nil, started + 1000, started + 86_400_000, t + 1, t - 1, t + 60_000], &random)
      if let timeoutAt = record.timeoutAt,
        !(1000...86_400_000).contains(timeoutAt - started)
      {
        record.timeoutAt = started + 86_400_000
      }
      record.waitLabel = pick(
        labels.filter { $0.map(SessionRecord.isValidFinishedLabel) ?? true }, &random)
    case .finished:
      record.outcome = pick(Outcome.allCases.filter { $0 != .stopped }, &random)
    case .idle, .overtime:
      break
    }
    if Int.random(in: 0..<12, using: &random) == 0 {
      // Out of range, one field at a time.
      switch Int.random(in: 0..<9, using: &random) {
      case 0: record.duration = pick([-1, maxDuration + 1, Int.min], &random)
      case 1:
        record.finishedLabel = pick(
          ["a\u{0}b", "\u{7F}", String(repeating: "y", count: 65)], &random)
      case 2: record.revision = SessionRecord.maxCounter + 1
      case 3:
        record.phase = .running
        record.endsAt = pick([-1, epochMax + 1, Int64.min, Int64.max], &random)
        record.remainingMs = nil
      case 4:
        record.phase = .paused
        record.endsAt = nil
        record.remainingMs = pick([0, -1, ahead + 1, Int64.max], &random)
      case 5:
        record.phase = .waiting
        record.duration = 0
        record.startedAt = pick([-1, epochMax + 1, Int64.min, Int64.max], &random)
      case 6:
        record.phase = .waiting
        record.duration = pick([0, 5], &random)
        record.startedAt = t
        record.timeoutAt = pick([t, t + 999, t + 86_400_001, -1, Int64.max, nil], &random)
      case 7:
        record.outcome = pick([nil, .done, .timeout], &random)
        record.waitLabel = pick([nil, "w"], &random)
      default:
        record.waitLabel = pick(["a\u{0}b", String(repeating: "y", count: 65)], &random)
      }
    }
    return record
  }

  static func command(at t: Int64, _ random: inout SeededRandom) -> SessionCommand {
    let label = pick(labels, &random)
    switch Int.random(in: 0..<10, using: &random) {
    case 0:
      return .start(
        .seconds(
          pick(
            [
              Int.min, -1, 0, 1, 59, 86_400, 86_401, Int.max,
              Int.random(in: 1...86_400, using: &random),
            ],
            &random)), finishedLabel: label)
    case 1:
      return .start(
        .until(
          pick(
            [
              Int64.min, Int64.min + 1, -1, 0, t - 60_000, t + 10, t + 1500, t + 60_000,
              t + ahead - 5000,
              t + ahead + 5000, epochMax, epochMax + 1, Int64.max,
              Int64.random(in: (t + 2000)...(t + ahead - 2000), using: &random),
            ], &random)), finishedLabel: label)
    case 2: return .cancel
    case 3: return .pause
    case 4: return .resume
    case 5:
      return .adjust(
        seconds: pick(
          [
            Int.min, -86_401, -86_400, -61, -1, 0, 1, 60, 86_400, 86_401, Int.max,
            Int.random(in: -86_400...86_400, using: &random),
          ],
          &random))
    case 6:
      return .wait(
        label: label,
        timeoutSeconds: pick(
          [nil, Int.min, -1, 0, 1, 59, 86_400, 86_401, Int.max], &random),
        timeoutLabel: pick(labels, &random))
    case 7: return .done(label: label)
    case 8: return .fail(label: label)
    default:
      return .rotateKey(KeyHash(of: String(random.next())))
    }
  }

  /// Every case agrees: the function's error code is `applying`'s at the
  /// function's time (or, near a boundary, at one end of the call), and its
  /// record is `applying`'s at the exact time it reports; a base out of
  /// range is refused; the function never fails.
  @Test func functionAgreesWithApplying() throws {
    let redis = try RedisProcess()
    let client = try redis.blocking()
    try client.command(["FUNCTION", "LOAD", "REPLACE", FunctionLibrary.source])
    var random = SeededRandom(seed: Self.seed)
    var outcomes: [String: Int] = [:]
    let started = now()
    for index in 0..<Self.cases {
      let t = now()
      let base = Self.record(at: t, &random)
      let command = Self.command(at: t, &random)
      let what = "case \(index): \(command) on \(base)"
      try client.command(["DEL", "countdown:s:diff"])
      let before = now()
      // Key mode (the hash, lost, takes the caller's key), so rotate_key is taken too.
      let reply = try commandCall(client, "diff", command, base: base, presented: Self.key)
      let after = now()
      outcomes[reply.first ?? "?", default: 0] += 1
      guard let base = try? SessionRecord(validating: base) else {
        #expect(reply == ["rejected", "bad_request"], "\(what): a base out of range")
        continue
      }
      switch reply.first {
      case "ok":
        let message = try #require(RecordMessage.parse(reply[1]), "\(what)")
        let got = try message.record.get()
        let at = got.updatedAt
        #expect((before...after).contains(at), "\(what): Redis's time")
        guard case .success(var expected) = base.applying(command, at: at) else {
          Issue.record("\(what): Redis applied it, Swift says \(base.applying(command, at: at))")
          continue
        }
        expected.seq = got.seq
        #expect(got == expected, "\(what)")
        #expect(got.damage == nil, "\(what)")
      case "rejected":
        let code = reply.count == 2 ? reply[1] : "?"
        let answers = [before, after].map { at -> String in
          switch base.applying(command, at: at) {
          case .failure(let code): code.rawValue
          case .success: "ok"
          }
        }
        #expect(answers.contains(code), "\(what): Redis says \(code), Swift says \(answers)")
      default:
        Issue.record("\(what): \(reply)")
      }
    }
    // The generator reaches every outcome, not only refusals.
    #expect((outcomes["ok"] ?? 0) > Self.cases / 5, "\(outcomes)")
    #expect((outcomes["rejected"] ?? 0) > Self.cases / 5, "\(outcomes)")
    #expect(now() - started < 60_000)
  }
}
