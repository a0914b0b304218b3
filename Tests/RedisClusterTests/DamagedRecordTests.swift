import CountdownCore
import Foundation
import Testing

@testable import RedisCluster

/// Hashes and messages in Redis are input: a damaged one is logged and
/// reset or dropped, and every other session carries on.
extension SequencerTests {
  /// Session hashes no instance could have written: each field out of
  /// range, unparseable, or disagreeing with the phase.
  static let damaged: [(String, [String])] = [
    ("duration not a number", ["phase", "idle", "duration", "abc", "revision", "3"]),
    ("duration 1e400", ["phase", "idle", "duration", "1e400", "revision", "3"]),
    ("duration past Int32", ["phase", "idle", "duration", "2147483648", "revision", "3"]),
    (
      "endsAt -2^63",
      ["phase", "running", "duration", "5", "endsAt", "-9223372036854775808", "revision", "3"]
    ),
    (
      "endsAt 2^64",
      ["phase", "running", "duration", "5", "endsAt", "18446744073709551616", "revision", "3"]
    ),
    (
      "endsAt 31 days after updatedAt",
      [
        "phase", "running", "duration", "5", "endsAt", "1796118556403", "updatedAt",
        "1793440156403",
        "revision", "3",
      ]
    ),
    ("endsAt hex", ["phase", "running", "duration", "5", "endsAt", "0x10", "revision", "3"]),
    ("running without endsAt", ["phase", "running", "duration", "5", "revision", "3"]),
    (
      "paused with 0 left",
      ["phase", "paused", "duration", "5", "remainingMs", "0", "revision", "3"]
    ),
    ("unknown phase", ["phase", "exploded", "duration", "5", "revision", "3"]),
    ("revision 2^53+1", ["phase", "idle", "duration", "5", "revision", "9007199254740993"]),
    ("NUL label", ["phase", "finished", "duration", "5", "revision", "3", "label", "a\u{0}b"]),
    ("created -0.5", ["phase", "idle", "duration", "5", "revision", "3", "created", "-0.5"]),
    ("key not hex", ["phase", "idle", "duration", "5", "revision", "3", "key", "zz"]),
    ("waiting without startedAt", ["phase", "waiting", "duration", "0", "revision", "3"]),
    (
      "startedAt -2^63",
      ["phase", "waiting", "duration", "0", "revision", "3", "startedAt", "-9223372036854775808"]
    ),
    (
      "startedAt 1e400",
      ["phase", "waiting", "duration", "0", "revision", "3", "startedAt", "1e400"]
    ),
    (
      "timeoutAt half a second on",
      [
        "phase", "waiting", "duration", "0", "revision", "3", "startedAt", "1000", "timeoutAt",
        "1500",
      ]
    ),
    (
      "timeoutAt 2^64",
      [
        "phase", "waiting", "duration", "0", "revision", "3", "startedAt", "1000", "timeoutAt",
        "18446744073709551616",
      ]
    ),
    (
      "waiting with a duration",
      ["phase", "waiting", "duration", "5", "revision", "3", "startedAt", "1000"]
    ),
    (
      "NUL waitLabel",
      [
        "phase", "waiting", "duration", "0", "revision", "3", "startedAt", "1000", "waitLabel",
        "a\u{0}b",
      ]
    ),
    (
      "4 KB waitLabel",
      [
        "phase", "waiting", "duration", "0", "revision", "3", "startedAt", "1000", "waitLabel",
        String(repeating: "x", count: 4096),
      ]
    ),
    (
      "waitLabel while idle", ["phase", "idle", "duration", "0", "revision", "3", "waitLabel", "w"]
    ),
    ("unknown outcome", ["phase", "finished", "duration", "0", "revision", "3", "outcome", "won"]),
    ("outcome while idle", ["phase", "idle", "duration", "0", "revision", "3", "outcome", "done"]),
    (
      "startedAt while idle", ["phase", "idle", "duration", "0", "revision", "3", "startedAt", "5"]
    ),
  ]

  /// Issue 20's fields, damaged: a run's options out of range, in the wrong
  /// order or on what is no run, overtime without its deadline or option or
  /// a day old, overMs where it does not belong, a message too long or with
  /// NUL, a blackout that is no flag.
  static let stageDamaged: [(String, [String])] = {
    let run = ["phase", "running", "duration", "5", "endsAt", "1793440156403", "revision", "3"]
    let idle = ["phase", "idle", "duration", "0", "revision", "3"]
    let over = [
      "phase", "overtime", "duration", "5", "revision", "3", "updatedAt", "1793440156403",
    ]
    return [
      ("warnAtSeconds 0", run + ["warnAtSeconds", "0"]),
      ("warnAtSeconds 86401", run + ["warnAtSeconds", "86401"]),
      ("warnAtSeconds 2^64", run + ["warnAtSeconds", "18446744073709551616"]),
      ("dangerAtSeconds -2^63", run + ["dangerAtSeconds", "-9223372036854775808"]),
      ("dangerAtSeconds 1e400", run + ["dangerAtSeconds", "1e400"]),
      ("dangerAtSeconds -0", run + ["dangerAtSeconds", "-0"]),
      ("warn equals danger", run + ["warnAtSeconds", "30", "dangerAtSeconds", "30"]),
      ("warn below danger", run + ["warnAtSeconds", "10", "dangerAtSeconds", "30"]),
      ("levels while idle", idle + ["warnAtSeconds", "30"]),
      ("overtime while idle", idle + ["overtime", "1"]),
      ("overtime 2", run + ["overtime", "2"]),
      ("overtime yes", run + ["overtime", "yes"]),
      ("overtime without endsAt", over + ["overtime", "1"]),
      ("overtime without its option", over + ["endsAt", "1793440150000"]),
      (
        "overtime a day before updatedAt",
        over + ["overtime", "1", "endsAt", String(1_793_440_156_403 - 86_400_000)]
      ),
      (
        "overtime 31 days after updatedAt",
        over + ["overtime", "1", "endsAt", String(1_793_440_156_403 + 2_678_400_000)]
      ),
      (
        "overtime with remainingMs",
        over + ["overtime", "1", "endsAt", "1793440150000", "remainingMs", "5"]
      ),
      ("overMs on a run", run + ["overMs", "5"]),
      (
        "overMs on an elapsed finish",
        idle + ["phase", "finished", "outcome", "elapsed", "overMs", "5"]
      ),
      ("stopped without overMs", idle + ["phase", "finished", "outcome", "stopped"]),
      (
        "overMs past a day",
        idle + ["phase", "finished", "outcome", "stopped", "overMs", "86400001"]
      ),
      ("overMs -1", idle + ["phase", "finished", "outcome", "stopped", "overMs", "-1"]),
      ("NUL message", idle + ["message", "a\u{0}b"]),
      ("empty message", idle + ["message", ""]),
      ("141-character message", idle + ["message", String(repeating: "é", count: 141)]),
      ("4 KB message", idle + ["message", String(repeating: "x", count: 4096)]),
      ("blackout 2", idle + ["blackout", "2"]),
      ("blackout true", idle + ["blackout", "true"]),
    ]
  }()

  /// A line of the layout before issue 20 with its new tokens (no overtime,
  /// levels, overMs, blackout or message) put in after the wait label's
  /// length, so that each stays damaged in the one way it was.
  static func withStageTokens(_ line: String) -> String {
    var parts = line.split(separator: " ", maxSplits: 14, omittingEmptySubsequences: false)
    guard parts.count >= 14 else { return line }
    parts.insert("0 - - - 0 0", at: 14)
    return parts.joined(separator: " ")
  }

  /// A viewer opening a damaged session gets a snapshot of a sound one (the
  /// hash reset, idle, its revision moved on), the damage is counted for the
  /// log, and a command there then works.
  @Test func damagedHashIsResetOnOpen() throws {
    let a = Instance(redis, loop: loop, epoch: epoch)
    waitFor(loop, "connected") { a.sequencer.isConnected }
    let client = try redis.blocking()
    for (index, (name, fields)) in (Self.damaged + Self.stageDamaged).enumerated() {
      let session = "dmg\(index)"
      try client.command(["HSET", RedisSequencer.sessionKey(session)] + fields)
      let before = a.sequencer.stats.damagedRecords
      var viewer = Viewer(a.hub, session)
      waitFor(loop, "the snapshot of \(name)") {
        viewer.read(a.hub)
        return viewer.hasSnapshot
      }
      #expect(viewer.state["phase"] as? String == "idle", "\(name)")
      #expect(a.sequencer.stats.damagedRecords == before + 1, "\(name)")
      let hash = try client.command(["HGETALL", RedisSequencer.sessionKey(session)])
      let texts = hash.elements?.compactMap(\.text) ?? []
      var stored: [String: String] = [:]
      for pair in stride(from: 0, to: texts.count - 1, by: 2) {
        stored[texts[pair]] = texts[pair + 1]
      }
      #expect(stored["phase"] == "idle", "\(name)")
      #expect(stored["label"] == nil && stored["endsAt"] == nil, "\(name)")
      viewer.send(a.hub, #"{"op":"start","seconds":60,"id":1}"#)
      waitFor(loop, "the start's ack in \(name)") {
        viewer.read(a.hub)
        return viewer.reply(1) != nil
      }
      #expect(viewer.reply(1)?["type"] as? String == "ack", "\(name)")
    }
  }

  /// A damaged hash under a session already open is replaced by the
  /// caller's own record at its next command (the reply says why).
  @Test func damagedHashIsReplacedByTheCommand() throws {
    let client = try redis.blocking()
    for (name, fields) in Self.damaged + Self.stageDamaged where !name.hasPrefix("key") {
      try client.command(["DEL", RedisSequencer.sessionKey("c")])
      try client.command(["HSET", RedisSequencer.sessionKey("c")] + fields)
      let base = SessionRecord.Fields(phase: .idle, duration: 5, revision: 7)
      let reply = try commandCall(
        client, "c", .start(.seconds(30), finishedLabel: nil), base: base, epoch: epoch)
      #expect(reply.first == "ok" && reply.count == 3, "\(name): \(reply)")
      let record = try #require(RecordMessage.parse(reply[1])).record.get()
      #expect(record.damage == nil && record.revision == 8 && record.phase == .running, "\(name)")
    }
  }

  /// A damaged hash whose key is sound keeps that key: another key's holder
  /// cannot take the session over through the damage.
  @Test func damagedHashKeepsItsSoundKey() throws {
    let client = try redis.blocking()
    let key = KeyHash(of: "the host's"), other = KeyHash(of: "another")
    try client.command([
      "HSET", RedisSequencer.sessionKey("dk"), "phase", "idle", "duration", "x", "key", key.hex,
    ])
    let start = SessionCommand.start(.seconds(30), finishedLabel: nil)
    #expect(
      try commandCall(client, "dk", start, presented: other, epoch: epoch) == [
        "rejected", "forbidden",
      ])
    #expect(try commandCall(client, "dk", start, presented: key, epoch: epoch).first == "ok")
    #expect(try client.command(["HGET", RedisSequencer.sessionKey("dk"), "key"]).text == key.hex)
  }

  /// A caller's base record out of range is refused, never stored.
  @Test func damagedBaseIsRefused() throws {
    let client = try redis.blocking()
    let bases = [
      SessionRecord.Fields(phase: .running, duration: 5, endsAt: nil, revision: 1),
      SessionRecord.Fields(phase: .running, duration: 5, endsAt: .max, revision: 1),
      SessionRecord.Fields(phase: .paused, duration: 5, remainingMs: -1, revision: 1),
      SessionRecord.Fields(phase: .idle, duration: -1),
      SessionRecord.Fields(phase: .idle, duration: 5, finishedLabel: "\u{7F}"),
      SessionRecord.Fields(phase: .idle, duration: 5, revision: .max),
    ]
    for base in bases {
      #expect(
        try commandCall(
          client, "b", .start(.seconds(30), finishedLabel: nil), base: base, epoch: epoch) == [
            "rejected", "bad_request",
          ], "\(base)")
      #expect(try client.command(["EXISTS", RedisSequencer.sessionKey("b")]) == .integer(0))
    }
  }

  /// Messages on the changes channel that are damaged records, or no
  /// records at all, are counted for the log and dropped: the session
  /// open here keeps its state, and another session's change still arrives.
  @Test func damagedMessagesAreDropped() throws {
    let a = Instance(redis, loop: loop, epoch: epoch)
    waitFor(loop, "connected") { a.sequencer.isConnected }
    var viewer = Viewer(a.hub, "m")
    var other = Viewer(a.hub, "n")
    waitFor(loop, "the snapshots") {
      viewer.read(a.hub)
      other.read(a.hub)
      return viewer.hasSnapshot && other.hasSnapshot
    }
    let client = try redis.blocking()
    let channel = RedisSequencer.channel(redis.address)
    let t = now()
    let stage = "0 - - - 0 0"
    // Issue 20's tokens, damaged: each line sound but for one of them.
    let stageLines = [
      "\(epoch) 14 m 1 10 running 5 \(t + 5000) - \(t) - - - 0 2 - - - 0 0",
      "\(epoch) 15 m 1 10 running 5 \(t + 5000) - \(t) - - - 0 1 30 30 - 0 0",
      "\(epoch) 16 m 1 10 running 5 \(t + 5000) - \(t) - - - 0 0 - - 5 0 0",
      "\(epoch) 17 m 1 10 finished 5 - - \(t) - - stopped 0 \(stage)",
      "\(epoch) 18 m 1 10 idle 0 - - \(t) - - - 0 0 - - - 0 50 short",
      "\(epoch) 19 m 1 10 idle 0 - - \(t) - - - 0 0 - - - 0 3 a\u{0}b",
      "\(epoch) 20 m 1 10 idle 0 - - \(t) - - - 0 0 - - - 0 141 "
        + String(repeating: "x", count: 141),
      "\(epoch) 21 m 1 10 idle 0 - - \(t) - - - 0 0 - - - yes 0",
      "\(epoch) 22 m 1 10 overtime 5 \(t - 1000) - \(t) - - - 0 \(stage)",
      "\(epoch) 23 m 1 10 overtime 5 \(t - 86_400_000) - \(t) - - - 0 1 - - - 0 0",
      "\(epoch) 24 m 1 10 running 5 \(t + 5000) - \(t) - - - 0 1 1e400 - - 0 0",
      "\(epoch) 25 m 1 10 idle 0 - - \(t) - - - 0 0 - - - 0 -1 x",
      "\(epoch) 26 m 1 10 idle 0 - - \(t) - - - 1 0 - - - 0 1 xy",
      "\(epoch) 27 m 1 10 idle 0 - - \(t) - - - 0 0 - - - 0 1 é",
      "\(epoch) 28 m 1 10 idle 0 - - \(t) - - - 0 0 - - - 0 2 ab\u{0}",
    ]
    let lines =
      [
        "\(epoch) 1 m 1 10 running 5 9000000000000000 - \(now()) - - - 0",
        "\(epoch) 2 m 1 10 paused 5 - -7 \(now()) - - - 0",
        "\(epoch) 3 m 1 10 running -5 \(now() + 5000) - \(now()) - - - 0",
        "\(epoch) 4 m 1 10 finished 5 - - \(now()) - - elapsed 0 bad\u{0}label",
        "\(epoch) 5 m 1 10 running 5 99999999999999999999 - \(now()) - - - 0",
        "\(epoch) 6 m 1 10 waiting 0 - - \(now()) -9223372036854775809 - - 0",
        "\(epoch) 7 m 1 10 waiting 0 - - \(now()) \(now()) \(now() + 10) - 0",
        "\(epoch) 8 m 1 10 finished 0 - - \(now()) - - won 0",
        "\(epoch) 9 m 1 10 finished 0 - - \(now()) - - - 0",
        "\(epoch) 10 m 1 10 waiting 0 - - \(now()) \(now()) - - 99 short",
        "\(epoch) 11 m 1 10 waiting 0 - - \(now()) \(now()) - - 3 abcdef",
        "\(epoch) 12 m 1 10 waiting 0 - - \(now()) \(now()) - - 1 é",
        "\(epoch) 13 m 1 10 running 5 \(now() + 5000) - \(now())",
        "garbage",
      ].map { Self.withStageTokens($0) } + stageLines
    let before = a.sequencer.stats.damagedRecords
    for line in lines { try client.command(["PUBLISH", channel, line]) }
    waitFor(loop, "every damaged message counted") {
      a.sequencer.stats.damagedRecords >= before + lines.count
    }
    other.send(a.hub, #"{"op":"start","seconds":60,"id":2}"#)
    waitFor(loop, "the other session's start") {
      other.read(a.hub)
      return other.reply(2) != nil
    }
    #expect(other.reply(2)?["type"] as? String == "ack")
    viewer.read(a.hub)
    #expect(viewer.state["phase"] as? String == "idle")
  }
}
