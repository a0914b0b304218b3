import CountdownCore
import Foundation
import Testing

@testable import RedisCluster

@Suite struct FunctionLibraryTests {
  /// The binary carries the library as a string: it must be countdown.lua as committed.
  @Test func embeddedSourceIsTheLuaFile() throws {
    let file = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
      .appendingPathComponent("../../Sources/RedisCluster/countdown.lua")
    let text = try String(contentsOf: file, encoding: .utf8)
    #expect(
      FunctionLibrary.source + "\n" == text,
      "run scripts/embed-lua after editing countdown.lua")
  }

  /// Records to start from, relative to now: every phase, a run whose
  /// deadline has passed, a wait whose timeout has, and each outcome's finish.
  static func bases(at t: Int64) -> [(String, SessionRecord)] {
    [
      ("idle", SessionRecord(revision: 3)),
      (
        "finished",
        SessionRecord(.finished(.elapsed), duration: 5, finishedLabel: "bye", revision: 4)
      ),
      (
        "running", SessionRecord(.running(endsAt: t + 40_000), duration: 60, revision: 5)
      ),
      (
        "running past its deadline",
        SessionRecord(.running(endsAt: t - 20_000), duration: 5, revision: 6)
      ),
      (
        "paused",
        SessionRecord(
          .paused(remainingMs: 30_500), duration: 90, finishedLabel: "fin", revision: 7)
      ),
      (
        "waiting",
        SessionRecord(
          .waiting(startedAt: t - 10_000, timeoutAt: t + 50_000), finishedLabel: "late",
          waitLabel: "Deploying", revision: 8, updatedAt: t - 10_000)
      ),
      (
        "waiting past its timeout",
        SessionRecord(
          .waiting(startedAt: t - 70_000, timeoutAt: t - 10_000), finishedLabel: "late",
          revision: 9, updatedAt: t - 70_000)
      ),
      (
        "waiting without a timeout",
        SessionRecord(
          .waiting(startedAt: t - 5000, timeoutAt: nil), waitLabel: "CI", revision: 10,
          updatedAt: t - 5000)
      ),
      ("done", SessionRecord(.finished(.done), finishedLabel: "ok", revision: 11)),
      ("timed out", SessionRecord(.finished(.timeout), revision: 12)),
    ] + stageBases(at: t)
  }

  static let levels = RunOptions(overtime: true, warnAtSeconds: 30, dangerAtSeconds: 10)

  /// Issue 20's records: runs with options, overtime (new, nearly a day old,
  /// and past a day, which a caller's record may be), a stopped finish, and
  /// a message and blackout kept on an idle session.
  static func stageBases(at t: Int64) -> [(String, SessionRecord)] {
    let day = SessionRecord.maxOvertimeMs
    return [
      (
        "running with levels and overtime",
        SessionRecord(.running(endsAt: t + 40_000), duration: 60, revision: 13, run: levels)
      ),
      (
        "running into overtime",
        SessionRecord(
          .running(endsAt: t - 20_000), duration: 5, revision: 14,
          run: RunOptions(overtime: true))
      ),
      (
        "running past a day of overtime",
        SessionRecord(
          .running(endsAt: t - day - 5000), duration: 5, revision: 15, run: levels,
          message: "Wrap up")
      ),
      (
        "overtime",
        SessionRecord(
          .overtime(since: t - 30_000), duration: 60, finishedLabel: "fin", revision: 16,
          updatedAt: t - 30_000, run: levels, blackout: true)
      ),
      (
        "overtime nearly a day",
        SessionRecord(
          .overtime(since: t - day + 60_000), duration: 60, revision: 17, updatedAt: t - 1000,
          run: RunOptions(overtime: true))
      ),
      (
        "overtime past a day",
        SessionRecord(
          .overtime(since: t - day - 5000), duration: 60, revision: 18, updatedAt: t - day,
          run: RunOptions(overtime: true, warnAtSeconds: 5))
      ),
      (
        "paused with overtime",
        SessionRecord(
          .paused(remainingMs: 30_500), duration: 90, revision: 19,
          run: RunOptions(overtime: true, warnAtSeconds: 20))
      ),
      (
        "paused with levels",
        SessionRecord(
          .paused(remainingMs: 30_500), duration: 90, revision: 20,
          run: RunOptions(warnAtSeconds: 60, dangerAtSeconds: 31))
      ),
      (
        "stopped",
        SessionRecord(
          .finished(.stopped), duration: 60, revision: 21, overMs: 12_000, message: "Wrap up",
          blackout: true)
      ),
      (
        "idle with a message and blackout",
        SessionRecord(revision: 22, message: "倒計時 結束 Take questions", blackout: true)
      ),
    ]
  }

  static let commands: [SessionCommand] = [
    .start(.seconds(5), finishedLabel: nil), .start(.seconds(1), finishedLabel: "倒計時 結束"),
    .start(.seconds(86_400), finishedLabel: nil), .start(.seconds(0), finishedLabel: nil),
    .start(.seconds(86_401), finishedLabel: nil), .start(.until(-1), finishedLabel: nil),
    .cancel, .pause, .resume, .adjust(seconds: 60), .adjust(seconds: -60),
    .adjust(seconds: -86_400), .adjust(seconds: 86_400), .adjust(seconds: 0),
    .adjust(seconds: 86_401), .adjust(seconds: -86_401),
    .wait(label: nil, timeoutSeconds: nil, timeoutLabel: nil),
    .wait(label: "Deploying", timeoutSeconds: 900, timeoutLabel: "Deploy timed out"),
    .wait(label: "倒計時 結束", timeoutSeconds: 1, timeoutLabel: nil),
    .wait(label: nil, timeoutSeconds: 86_400, timeoutLabel: String(repeating: "é", count: 64)),
    .wait(label: nil, timeoutSeconds: 0, timeoutLabel: nil),
    .wait(label: nil, timeoutSeconds: 86_401, timeoutLabel: nil),
    .wait(label: "a\u{0}b", timeoutSeconds: nil, timeoutLabel: nil),
    .wait(label: nil, timeoutSeconds: nil, timeoutLabel: String(repeating: "x", count: 65)),
    .done(label: nil), .done(label: "Deployed"), .fail(label: nil), .fail(label: "Deploy failed"),
    .done(label: "\u{7F}"), .fail(label: String(repeating: "🎉", count: 65)),
    .stop, .message("Wrap up"), .message(nil), .message(""), .message("a\u{0}b"),
    .message("line\nbreak"), .message("\u{7F}"), .message(String(repeating: "é", count: 140)),
    .message(String(repeating: "🎉", count: 140)), .message(String(repeating: "x", count: 141)),
    .message(String(repeating: "y", count: 4096)), .message(" spaced  out "),
    .blackout(true), .blackout(false),
    .start(.seconds(120), finishedLabel: "fin", options: levels),
    .start(.seconds(60), finishedLabel: nil, options: RunOptions(overtime: true)),
    .start(
      .seconds(60), finishedLabel: nil,
      options: RunOptions(warnAtSeconds: 86_400, dangerAtSeconds: 86_399)),
    .start(.seconds(60), finishedLabel: nil, options: RunOptions(dangerAtSeconds: 1)),
    .start(
      .seconds(60), finishedLabel: nil, options: RunOptions(warnAtSeconds: 30, dangerAtSeconds: 30)),
    .start(
      .seconds(60), finishedLabel: nil, options: RunOptions(warnAtSeconds: 30, dangerAtSeconds: 31)),
    .start(.seconds(60), finishedLabel: nil, options: RunOptions(warnAtSeconds: 0)),
    .start(.seconds(60), finishedLabel: nil, options: RunOptions(warnAtSeconds: 86_401)),
    .start(.seconds(60), finishedLabel: nil, options: RunOptions(dangerAtSeconds: Int.max)),
    .start(.seconds(60), finishedLabel: nil, options: RunOptions(warnAtSeconds: Int.min)),
    .start(.seconds(0), finishedLabel: nil, options: levels),
    .adjust(seconds: 20), .adjust(seconds: 29), .adjust(seconds: 31),
  ]

  /// Every command on every phase: the function's record or error is
  /// exactly `SessionRecord.applying`'s at the function's own time, and the
  /// event it records (webhooks on) is the one the single server builds
  /// from that record; a refusal records none.
  @Test func functionMirrorsSessionRecordApplying() throws {
    let redis = try RedisProcess()
    let client = try redis.blocking()
    try client.command(["FUNCTION", "LOAD", "REPLACE", FunctionLibrary.source])
    var cases = 0
    for (name, base) in Self.bases(at: now()) {
      // Deadlines far enough either side of now that the few ms between
      // here and Redis's TIME cannot change an answer.
      var commands = Self.commands
      let t = now()
      commands += [
        .start(.until(t + 500), finishedLabel: nil), .start(.until(t + 5000), finishedLabel: nil),
        .start(.until(t + 2_592_000_000 - 5000), finishedLabel: nil),
        .start(.until(t + 2_592_000_000 + 5000), finishedLabel: nil),
        .adjust(seconds: -40), .adjust(seconds: -31),
      ]
      // A pause or adjust that would leave over 30 days is refused.
      for command in commands {
        cases += 1
        try client.command(["DEL", "countdown:s:mirror"] + RedisSequencer.eventsKeys)
        let reply = try client.command(
          [
            "FCALL", RedisSequencer.function("command"), "6", "countdown:s:mirror",
            "countdown:epoch", "countdown:pos",
          ] + RedisSequencer.eventsKeys
            + CommandCall.arguments(
              command, base: base.fields, session: "mirror", epoch: "E", channel: "countdown:test",
              events: true))
        let recorded = try WebhookStreamTests.stream(client)
        let parts = reply.elements?.compactMap(\.text) ?? []
        let local = now()
        let expected = base.applying(command, at: local)
        switch (parts.first, expected) {
        case ("ok", .success(var record)):
          let got = try #require(RecordMessage.parse(parts[1])).record.get()
          let at = got.updatedAt
          #expect(abs(at - local) < 1000)
          guard case .success(let exact) = base.applying(command, at: at) else {
            Issue.record("\(name), \(command): Swift refuses at the function's time")
            continue
          }
          record = exact
          record.seq = got.seq
          #expect(got == record, "\(name), \(command)")
          let config = WebhookStreamTests.config
          let expected = WebhookEventType.of(command.op, result: record).map {
            WebhookEvent($0, session: "mirror", record: record, at: at, config: config)
          }
          let events = recorded.compactMap { try? StreamEvent.event($0, config: config).get() }
          #expect(events.count == recorded.count, "\(name), \(command): \(recorded)")
          #expect(events.last == expected, "\(name), \(command)")
          #expect(recorded.count == (expected == nil ? 0 : 1), "\(name), \(command)")
        case ("rejected", .failure(let code)):
          #expect(parts[1] == code.rawValue, "\(name), \(command)")
          #expect(recorded.isEmpty, "\(name), \(command)")
        default:
          Issue.record("\(name), \(command): Redis says \(parts), Swift says \(expected)")
        }
      }
    }
    #expect(cases > 100)
  }

  /// Two starts in a row: one ok, one busy; the revision counts the one.
  @Test func secondStartIsBusy() throws {
    let redis = try RedisProcess()
    let client = try redis.blocking()
    try client.command(["FUNCTION", "LOAD", "REPLACE", FunctionLibrary.source])
    var answers: [String] = []
    for _ in 0..<2 {
      let reply = try client.command(
        ["FCALL", RedisSequencer.function("command"), "3", "countdown:s:x", "countdown:epoch"]
          + ["countdown:pos"]
          + CommandCall.arguments(
            .start(.seconds(5), finishedLabel: nil), base: SessionRecord.Fields(), session: "x",
            epoch: "E", channel: "countdown:test"))
      answers.append(reply.elements?.compactMap(\.text).joined(separator: " ") ?? "")
    }
    #expect(answers[0].hasPrefix("ok E 1 x 1 "))
    #expect(answers[1] == "rejected busy")
    #expect(try client.command(["HGET", "countdown:s:x", "revision"]).text == "1")
  }

  /// A call that reaches Redis after its caller's deadline changes nothing.
  @Test func lateCallIsExpired() throws {
    let redis = try RedisProcess()
    let client = try redis.blocking()
    try client.command(["FUNCTION", "LOAD", "REPLACE", FunctionLibrary.source])
    func start(deadline: Int64) throws -> String {
      let reply = try client.command(
        ["FCALL", RedisSequencer.function("command"), "3", "countdown:s:late", "countdown:epoch"]
          + ["countdown:pos"]
          + CommandCall.arguments(
            .start(.seconds(5), finishedLabel: nil), base: SessionRecord.Fields(), session: "late",
            epoch: "E", channel: "countdown:test", deadline: deadline))
      return reply.elements?.first?.text ?? ""
    }
    #expect(try start(deadline: now() - 1000) == "expired")
    #expect(try client.command(["EXISTS", "countdown:s:late"]) == .integer(0))
    #expect(try client.command(["GET", "countdown:pos"]) == .null)
    #expect(try start(deadline: now() + 1000) == "ok")
  }
}
