import Foundation
import Testing

@testable import CountdownClient

/// The stage (overtime, levels, message, blackout) as the library reads and sends it.
struct StageValueTests {
  static let overtimeJSON = #"""
    {"phase":"overtime","spinner":true,"enabled":false,"label":"+12","remaining":0,"duration":60,
     "endsAt":null,"viewers":1,"outcome":null,"level":"over","overSince":1796024364226,
     "overMs":null,"overtime":true,"warnAtSeconds":120,"dangerAtSeconds":30,
     "message":"Wrap up","blackout":true}
    """#

  /// An overtime state decodes with every new field; one from a server without them is
  /// normal, with no run options, no message and no blackout.
  @Test func stateDecodes() throws {
    let s = try JSONDecoder().decode(SessionState.self, from: Data(Self.overtimeJSON.utf8))
    #expect(s.phase == .overtime && s.level == .over && s.overSince == 1_796_024_364_226)
    #expect(s.overtime && s.warnAtSeconds == 120 && s.dangerAtSeconds == 30)
    #expect(s.message == "Wrap up" && s.blackout && s.overMs == nil)
    #expect(s.millisecondsLeft(serverNow: 1_796_024_376_226) == nil)
    #expect(s.millisecondsOver(serverNow: 1_796_024_376_226) == 12_000)
    let old = try JSONDecoder().decode(SessionState.self, from: Data(ValueTests.stateJSON.utf8))
    #expect(old.level == .normal && !old.overtime && old.message == nil && !old.blackout)
    #expect(old.millisecondsOver(serverNow: 0) == nil)
  }

  /// Each new field out of its range or of the wrong type is refused while reading: ±2^63,
  /// 2^64, 1e400, a fraction, a level or outcome the contract does not name, a string flag.
  @Test(arguments: [
    #""overSince":9223372036854775807"#, #""overSince":-1"#, #""overSince":1e400"#,
    #""overMs":86400001"#, #""overMs":-9223372036854775808"#, #""overMs":1.5"#,
    #""warnAtSeconds":0"#, #""warnAtSeconds":86401"#, #""dangerAtSeconds":18446744073709551616"#,
    #""level":"amber""#, #""level":3"#, #""outcome":"halted""#, #""overtime":"yes""#,
    #""blackout":1"#, #""message":42"#, #""phase":"overtimes""#,
  ])
  func outOfRange(field: String) {
    let key = String(field.split(separator: ":")[0])
    var object = Self.overtimeJSON.replacingOccurrences(
      of: #"(?m)\#(key):[^,}]*"#, with: "", options: .regularExpression)
    object = object.replacingOccurrences(of: "{", with: "{" + field + ",")
    #expect(throws: (any Error).self, "\(object)") {
      try JSONDecoder().decode(SessionState.self, from: Data(object.utf8))
    }
  }

  /// A stop's patch sets outcome, overMs and level and clears overSince, the run's options.
  @Test func patchApplies() throws {
    let s = try JSONDecoder().decode(SessionState.self, from: Data(Self.overtimeJSON.utf8))
    let frame = try JSONDecoder().decode(
      PatchFrame.self,
      from: Data(
        #"{"seq":9,"patch":{"phase":"finished","spinner":false,"enabled":true,"label":"Time!","outcome":"stopped","overMs":12345,"level":"normal","overSince":null,"overtime":false,"warnAtSeconds":null,"dangerAtSeconds":null,"message":null,"blackout":false}}"#
          .utf8))
    let after = frame.patch.applied(to: s)
    #expect(after.phase == .finished && after.outcome == .stopped && after.overMs == 12_345)
    #expect(after.level == .normal && after.overSince == nil && !after.overtime)
    #expect(after.warnAtSeconds == nil && after.dangerAtSeconds == nil)
    #expect(after.message == nil && !after.blackout)
  }

  /// The overtime clock is the server's label: +0 … +59, +1:00 … +59:59, +1:00:00 on.
  @Test func overClock() {
    let cases: [(Int64, String)] = [
      (-5, "+0"), (0, "+0"), (59, "+59"), (60, "+1:00"), (3599, "+59:59"), (3600, "+1:00:00"),
      (86_400, "+24:00:00"),
    ]
    for (seconds, label) in cases { #expect(ClockFormat.over(seconds: seconds) == label) }
  }

  /// The new commands' JSON: start's options only when given, stop, a message (null to
  /// clear it, which JSONEncoder would otherwise leave out) and a blackout.
  @Test func commandBodies() throws {
    func json(_ c: Command) throws -> String { String(decoding: try c.body(), as: UTF8.self) }
    #expect(
      try json(
        .start(
          seconds: 1200,
          options: StartOptions(overtime: true, warnAtSeconds: 120, dangerAtSeconds: 30)))
        == #"{"dangerAtSeconds":30,"op":"start","overtime":true,"seconds":1200,"warnAtSeconds":120}"#
    )
    #expect(try json(.start(seconds: 5, options: StartOptions())) == #"{"op":"start","seconds":5}"#)
    #expect(
      try json(.startUntil(epochMs: 7, options: StartOptions(warnAtSeconds: 9)))
        == #"{"op":"start","until":7,"warnAtSeconds":9}"#)
    #expect(try json(.stop) == #"{"op":"stop"}"#)
    #expect(try json(.message("Wrap up")) == #"{"op":"message","text":"Wrap up"}"#)
    #expect(try json(.message(nil)) == #"{"op":"message","text":null}"#)
    #expect(try json(.blackout(true)) == #"{"on":true,"op":"blackout"}"#)
    #expect(try json(.blackout(false)) == #"{"on":false,"op":"blackout"}"#)
  }

  /// The levels are the contract's, all of them, and the new ops are ones it names.
  @Test func contract() throws {
    let c = try ClientContractTests.contract()
    #expect(try #require(c["levels"] as? [String]) == Level.allCases.map(\.rawValue))
    let ops = Set(try #require(c["ops"] as? [String]))
    #expect(Set([Command.stop, .message(nil), .blackout(true)].map(\.op)).isSubset(of: ops))
    let levelSeconds = try #require(c["levelSeconds"] as? [String: Int])
    #expect(Int64(levelSeconds["min"]!)...Int64(levelSeconds["max"]!) == Bounds.levelSeconds)
    let maxOver = try #require(c["maxOvertimeSeconds"] as? Int)
    #expect(Bounds.overMs.upperBound == Int64(maxOver) * 1000)
  }
}

/// The stage's commands against the real server binary.
@Suite(.serialized)
struct StageCommandTests {
  /// A talk through the library: start with overtime and levels, a message and a blackout,
  /// overtime read back, then stop with the time over; bad values are the server's refusals.
  @Test func talk() async throws {
    let server = try ServerProcess()
    let client = try CountdownClient(base: server.base, session: "talk")
    let started = try await client.send(
      .start(
        seconds: 1, options: StartOptions(overtime: true, warnAtSeconds: 60, dangerAtSeconds: 1)))
    #expect(started.state.level == .danger && started.state.overtime)
    #expect(started.state.warnAtSeconds == 60 && started.state.dangerAtSeconds == 1)
    let endsAt = try #require(started.state.endsAt)
    #expect(try await client.send(.message("Wrap up")).state.message == "Wrap up")
    #expect(try await client.send(.blackout(true)).state.blackout)
    // The event stream says when the deadline has passed on the server.
    var watched: SessionUpdate?
    for await update in client.changes() where update.phase == .overtime {
      watched = update
      break
    }
    #expect(watched?.state?.overSince == endsAt)
    #expect(watched?.timeOver().map { $0 >= 0 } == true)
    let snap = try await client.fetch()
    #expect(snap.state.phase == .overtime && snap.state.overSince == endsAt)
    #expect(snap.state.level == .over && snap.state.label.hasPrefix("+"))
    let stopped = try await client.send(.stop)
    #expect(stopped.state.outcome == .stopped && stopped.state.overSince == nil)
    let over = try #require(stopped.state.overMs)
    #expect(over >= snap.serverTime - endsAt)
    #expect(try await client.send(.message(nil)).state.message == nil)
    do {
      _ = try await client.send(.stop)
      Issue.record("a second stop was applied")
    } catch CountdownError.refused(let refusal) {
      #expect(refusal.code == .notRunning)
    }
    do {
      _ = try await client.send(.message(String(repeating: "x", count: 141)))
      Issue.record("a 141-character message was applied")
    } catch CountdownError.refused(let refusal) {
      #expect(refusal.code == .badRequest)
    }
  }
}
