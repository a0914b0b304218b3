import CountdownCore
import Foundation
import Libev
import Testing

@testable import RedisCluster

/// The cluster's webhook outbox on a real redis-server: the command function
/// records each change in the events stream in the same call, finishes no
/// command causes are moved there once, and `StreamOutbox` hands each entry
/// to one consumer, a dead one's to another.
@Suite struct WebhookStreamTests {
  static let config = SessionConfig.Shared(SessionConfig())

  static func loaded() throws -> (RedisProcess, BlockingRedis) {
    let redis = try RedisProcess()
    let client = try redis.blocking()
    try client.command(["FUNCTION", "LOAD", "REPLACE", FunctionLibrary.source])
    return (redis, client)
  }

  /// One countdown_v3_command call as an instance makes it.
  @discardableResult
  static func command(
    _ client: BlockingRedis, _ session: String, _ command: SessionCommand,
    base: SessionRecord.Fields = SessionRecord.Fields(), events: Bool = true
  ) throws -> [String] {
    let keys =
      [
        RedisSequencer.sessionKey(session), RedisSequencer.epochKey, RedisSequencer.positionKey,
        RedisSequencer.sessionsKey,
      ] + (events ? RedisSequencer.eventsKeys : [])
    let reply = try client.command(
      ["FCALL", RedisSequencer.function("command"), String(keys.count)] + keys
        + CommandCall.arguments(
          command, base: base, session: session, epoch: "E", channel: "countdown:test",
          events: events))
    return reply.elements?.compactMap(\.text) ?? []
  }

  /// The stream's entries, oldest first, as field maps.
  static func stream(_ client: BlockingRedis) throws -> [[String: String]] {
    try (client.command(["XRANGE", RedisSequencer.eventsKey, "-", "+"]).elements ?? []).map {
      entry in
      let values = entry.elements?.last?.elements?.compactMap(\.text) ?? []
      var fields: [String: String] = [:]
      for index in stride(from: 0, to: values.count - 1, by: 2) {
        fields[values[index]] = values[index + 1]
      }
      return fields
    }
  }

  static func due(_ client: BlockingRedis, limit: Int = 100) throws -> Int64 {
    let reply = try client.command(
      ["FCALL", RedisSequencer.function("due"), "3"] + RedisSequencer.eventsKeys + [String(limit)])
    guard case .integer(let moved) = reply else { throw RedisError(.protocolViolation, "\(reply)") }
    return moved
  }

  static func record(_ reply: [String]) throws -> SessionRecord {
    let line = try #require(reply.dropFirst().first)
    return try #require(RecordMessage.parse(line)).record.get()
  }

  /// Redis's clock, which deadlines are on.
  static func redisNow(_ client: BlockingRedis) throws -> Int64 {
    let parts = try client.command(["TIME"]).elements?.compactMap(\.text) ?? []
    guard parts.count == 2, let seconds = Int64(parts[0]), let micros = Int64(parts[1]) else {
      throw RedisError(.protocolViolation, "TIME gave \(parts)")
    }
    return seconds * 1000 + micros / 1000
  }

  /// Polls Redis's own clock (the event is time passing) until it is past `at`.
  static func awaitRedisTime(_ client: BlockingRedis, past at: Int64) throws {
    let giveUp = now() + 10_000
    while try redisNow(client) <= at {
      guard now() < giveUp else { throw RedisError(.timeout, "Redis's clock never passed \(at)") }
      usleep(20_000)
    }
  }

  /// An applied command's entry is the event Swift builds from the same
  /// record; a refusal and a key rotation add nothing; with webhooks off,
  /// no events key is written at all.
  @Test func commandRecordsItsEventInTheSameCall() throws {
    let (redis, client) = try Self.loaded()
    defer { withExtendedLifetime(redis) {} }
    try Self.command(client, "quiet", .start(.seconds(5), finishedLabel: nil), events: false)
    for key in RedisSequencer.eventsKeys {
      #expect(try client.command(["EXISTS", key]) == .integer(0), "\(key)")
    }
    let started = try Self.command(client, "a", .start(.seconds(60), finishedLabel: "fin"))
    #expect(started.first == "ok")
    #expect(
      try Self.command(client, "a", .start(.seconds(5), finishedLabel: nil)) == [
        "rejected", "busy",
      ])
    try Self.command(client, "a", .rotateKey(KeyHash(of: "k")))
    let paused = try Self.command(client, "a", .pause)
    let entries = try Self.stream(client)
    #expect(entries.map { $0["op"] } == ["start", "pause"])
    #expect(entries.map { $0["line"] } == [started[1], paused[1]])
    let record = try Self.record(started)
    let event = try StreamEvent.event(entries[0], config: Self.config).get()
    #expect(
      event
        == WebhookEvent(
          .started, session: "a", record: record, at: record.updatedAt, config: Self.config))
    #expect(try StreamEvent.event(entries[1], config: Self.config).get().type == .paused)
    // A pause leaves no deadline; the run's went with it.
    #expect(try client.command(["ZCARD", RedisSequencer.deadlinesKey]) == .integer(0))
  }

  /// A wait's timeout passes with no command: `due` records its finish once
  /// (with the waiting record, at its timeoutAt: outcome timeout), and again
  /// never, however often it is called.
  @Test func dueRecordsAFinishOnce() throws {
    let (redis, client) = try Self.loaded()
    defer { withExtendedLifetime(redis) {} }
    let waiting = try Self.record(
      try Self.command(client, "w", .wait(label: "CI", timeoutSeconds: 1, timeoutLabel: nil)))
    guard case .waiting(_, let timeoutAt?) = waiting.status else {
      Issue.record("not waiting: \(waiting)")
      return
    }
    #expect(try Self.due(client) == 0)
    try Self.awaitRedisTime(client, past: timeoutAt)
    #expect(try Self.due(client) == 1)
    #expect(try Self.due(client) == 0)
    let entries = try Self.stream(client)
    #expect(entries.map { $0["op"] } == ["wait", "finish"])
    let event = try StreamEvent.event(entries[1], config: Self.config).get()
    #expect(
      event
        == WebhookEvent(
          .finished, session: "w", record: waiting, at: timeoutAt, config: Self.config)
    )
    #expect(String(decoding: event.body, as: UTF8.self).contains("\"outcome\":\"timeout\""))
  }

  /// A command on a session whose run has elapsed records that finish
  /// first, then its own change; `due` finds nothing left to record.
  @Test func commandAfterADeadlineRecordsTheFinishFirst() throws {
    let (redis, client) = try Self.loaded()
    defer { withExtendedLifetime(redis) {} }
    let run = try Self.record(
      try Self.command(client, "r", .start(.seconds(1), finishedLabel: nil)))
    guard case .running(let endsAt) = run.status else {
      Issue.record("not running: \(run)")
      return
    }
    try Self.awaitRedisTime(client, past: endsAt)
    #expect(try Self.command(client, "r", .start(.seconds(30), finishedLabel: nil)).first == "ok")
    #expect(try Self.due(client) == 0)
    let entries = try Self.stream(client)
    #expect(entries.map { $0["op"] } == ["start", "finish", "start"])
    #expect(entries[1]["at"] == String(endsAt))
    let finish = try StreamEvent.event(entries[1], config: Self.config).get()
    #expect(
      finish == WebhookEvent(.finished, session: "r", record: run, at: endsAt, config: Self.config))
    // The new run's deadline is the one kept now.
    let score = try client.command(["ZSCORE", RedisSequencer.deadlinesKey, "r"]).text
    #expect(score.flatMap { Double($0) }.map { Int64($0) } != endsAt)
  }

  /// A run with overtime reaches zero silently: its deadline in the set is a
  /// day past endsAt (`selfFinishAt`), and the overtime's cap, a day on,
  /// is recorded once as a stopped finish stamped at that moment.
  @Test func overtimeKeepsItsCapAsTheDeadline() throws {
    let (redis, client) = try Self.loaded()
    defer { withExtendedLifetime(redis) {} }
    let run = try Self.record(
      try Self.command(
        client, "o",
        .start(.seconds(1), finishedLabel: nil, options: RunOptions(overtime: true))))
    let endsAt = try #require(run.endsAt)
    func score(_ session: String) throws -> Int64? {
      try client.command(["ZSCORE", RedisSequencer.deadlinesKey, session]).text
        .flatMap { Double($0) }.map { Int64($0) }
    }
    #expect(try score("o") == endsAt + SessionRecord.maxOvertimeMs)
    #expect(try score("o") == run.selfFinishAt)
    try Self.awaitRedisTime(client, past: endsAt)
    #expect(try Self.due(client) == 0)
    // In overtime now; a message keeps the cap where it was.
    let messaged = try Self.record(try Self.command(client, "o", .message("Wrap up")))
    #expect(messaged.overSince == endsAt && messaged.message == "Wrap up")
    #expect(try score("o") == endsAt + SessionRecord.maxOvertimeMs)
    // A caller's overtime 1.5 s short of a day (Redis lost the hash): its cap
    // comes within the test.
    let t = try Self.redisNow(client)
    let since = t - SessionRecord.maxOvertimeMs + 1500
    let base = SessionRecord(
      .overtime(since: since), duration: 60, revision: 4, updatedAt: t,
      run: RunOptions(overtime: true))
    let blackout = try Self.record(
      try Self.command(client, "cap", .blackout(true), base: base.fields))
    #expect(blackout.overSince == since && blackout.blackout)
    let cap = since + SessionRecord.maxOvertimeMs
    #expect(try score("cap") == cap)
    try Self.awaitRedisTime(client, past: cap)
    #expect(try Self.due(client) == 1)
    #expect(try Self.due(client) == 0)
    let entries = try Self.stream(client)
    #expect(entries.map { $0["op"] } == ["start", "message", "blackout", "finish"])
    let finish = try StreamEvent.event(entries[3], config: Self.config).get()
    #expect(
      finish
        == WebhookEvent(.finished, session: "cap", record: blackout, at: cap, config: Self.config))
    let body = String(decoding: finish.body, as: UTF8.self)
    #expect(body.contains("\"outcome\":\"stopped\""), "\(body)")
    #expect(body.contains("\"overMs\":86400000"), "\(body)")
    #expect(try StreamEvent.event(entries[1], config: Self.config).get().type == .message)
    #expect(try StreamEvent.event(entries[2], config: Self.config).get().type == .blackout)
    // On the finished session a message is a message, not a second finish.
    try Self.command(client, "cap", .message(nil))
    let cleared = try #require(try Self.stream(client).last)
    #expect(cleared["op"] == "message")
    #expect(try StreamEvent.event(cleared, config: Self.config).get().type == .message)
    // A finish entry at another moment than the record's cap is damage.
    var moved = entries[3]
    moved["at"] = String(cap - 1)
    #expect(throws: StreamEvent.Damage.self) {
      try StreamEvent.event(moved, config: Self.config).get()
    }
  }

  /// A stop ends the run where it is: no deadline is left, and its event is
  /// the stopped finish with the time over.
  @Test func stopLeavesNoDeadline() throws {
    let (redis, client) = try Self.loaded()
    defer { withExtendedLifetime(redis) {} }
    try Self.command(
      client, "s", .start(.seconds(60), finishedLabel: nil, options: RunOptions(overtime: true)))
    let stopped = try Self.record(try Self.command(client, "s", .stop))
    #expect(stopped.outcome == .stopped && stopped.overMs == 0)
    #expect(try client.command(["ZCARD", RedisSequencer.deadlinesKey]) == .integer(0))
    let entries = try Self.stream(client)
    #expect(entries.map { $0["op"] } == ["start", "stop"])
    let event = try StreamEvent.event(entries[1], config: Self.config).get()
    #expect(event.type == .finished)
    #expect(String(decoding: event.body, as: UTF8.self).contains("\"outcome\":\"stopped\""))
  }

  /// Two instances racing through `due` over many elapsed runs record each
  /// finish exactly once between them.
  @Test func racingDueRecordsEachFinishOnce() throws {
    let (redis, client) = try Self.loaded()
    let other = try redis.blocking()
    var last: Int64 = 0
    for index in 0..<40 {
      let run = try Self.record(
        try Self.command(client, "s\(index)", .start(.seconds(1), finishedLabel: nil)))
      if case .running(let endsAt) = run.status { last = max(last, endsAt) }
    }
    try Self.awaitRedisTime(client, past: last)
    var moved: Int64 = 0
    while true {
      let step = try Self.due(client, limit: 3) + Self.due(other, limit: 3)
      if step == 0 { break }
      moved += step
    }
    #expect(moved == 40)
    let finishes = try Self.stream(client).filter { $0["op"] == "finish" }
    let sessions = Set(
      finishes.compactMap { try? StreamEvent.event($0, config: Self.config).get().session })
    #expect(finishes.count == 40)
    #expect(sessions.count == 40)
  }

  static func outbox(_ redis: RedisProcess, _ consumer: String, claimAfterMs: Int64 = 30_000)
    -> StreamOutbox
  {
    var settings = StreamOutbox.Settings(address: redis.address, consumer: consumer)
    settings.claimAfterMs = claimAfterMs
    return StreamOutbox(settings: settings, config: config)
  }

  /// Two consumers share the stream: each entry goes to one of them, and a
  /// settled entry leaves the stream and the group.
  @Test func eachEntryGoesToOneConsumer() throws {
    let (redis, client) = try Self.loaded()
    let a = Self.outbox(redis, "a")
    let b = Self.outbox(redis, "b")
    #expect(try a.take(limit: 10, now: now()) == [])
    for index in 0..<10 {
      try Self.command(client, "s\(index)", .start(.seconds(60), finishedLabel: nil))
    }
    let first = try a.take(limit: 4, now: now())
    let second = try b.take(limit: 100, now: now())
    #expect(first.count == 4)
    #expect(second.count == 6)
    #expect(Set((first + second).map(\.event.session)).count == 10)
    #expect(try b.take(limit: 100, now: now()) == [])
    for entry in first { try a.delivered(entry) }
    try b.dead(second[0])
    #expect(try client.command(["XLEN", RedisSequencer.eventsKey]) == .integer(5))
    let pending = try client.command(["XPENDING", RedisSequencer.eventsKey, StreamOutbox.group])
    #expect(pending.elements?.first == .integer(5))
  }

  /// An instance that stops touching what it holds (it died) loses it to
  /// another after the claim timeout, with its tries counted; one that is
  /// alive keeps an entry it waits to retry.
  @Test func aDeadHoldersEntriesAreClaimed() throws {
    let (redis, client) = try Self.loaded()
    let holder = Self.outbox(redis, "holder", claimAfterMs: 300)
    let other = Self.outbox(redis, "other", claimAfterMs: 300)
    try Self.command(client, "x", .start(.seconds(60), finishedLabel: nil))
    let held = try #require(try holder.take(limit: 10, now: now()).first)
    try holder.retry(held, attempts: 2, at: now() + 60_000)
    // Alive for three claim timeouts: it keeps touching its entry.
    let alive = now() + 900
    while now() < alive {
      #expect(try holder.take(limit: 10, now: now()) == [])
      #expect(try other.take(limit: 10, now: now()) == [])
      usleep(50_000)
    }
    // Dead now: the other takes the entry over, same event, tries carried on.
    let giveUp = now() + 5000
    var claimed: [OutboxEntry] = []
    while claimed.isEmpty && now() < giveUp {
      claimed = try other.take(limit: 10, now: now())
      usleep(50_000)
    }
    #expect(claimed.map(\.event) == [held.event])
    #expect(claimed.first?.attempts == 2)
    #expect(claimed.first?.handle == held.handle)
  }

  /// A Redis that goes away fails the call (the deliverer tries again at
  /// its next poll); once it is back the outbox connects anew, makes its
  /// group again, and hands out what was recorded since.
  @Test func outboxReconnectsAfterRedisRestarts() throws {
    let (redis, client) = try Self.loaded()
    let outbox = Self.outbox(redis, "a")
    #expect(try outbox.take(limit: 10, now: now()) == [])
    redis.stop()
    #expect(throws: RedisError.self) { try outbox.take(limit: 10, now: now()) }
    try redis.start()
    let fresh = try redis.blocking()
    try fresh.command(["FUNCTION", "LOAD", "REPLACE", FunctionLibrary.source])
    try Self.command(fresh, "back", .start(.seconds(60), finishedLabel: nil))
    #expect(try outbox.take(limit: 10, now: now()).map(\.event.session) == ["back"])
    // The stream deleted under a live connection: the group is made again.
    try fresh.command(["DEL", RedisSequencer.eventsKey])
    try Self.command(fresh, "again", .start(.seconds(60), finishedLabel: nil))
    #expect(try outbox.take(limit: 10, now: now()).map(\.event.session) == ["again"])
    withExtendedLifetime(client) {}
  }

  /// An entry delivered while Redis was unreachable is settled once it is
  /// back, by the next call, and handed out to no one in between.
  @Test func aSettleThatFailedIsMadeLater() throws {
    let redis = try RedisProcess(appendOnly: true)
    let client = try redis.blocking()
    try client.command(["FUNCTION", "LOAD", "REPLACE", FunctionLibrary.source])
    let outbox = Self.outbox(redis, "a", claimAfterMs: 100)
    _ = try outbox.take(limit: 1, now: now())
    try Self.command(client, "s", .start(.seconds(60), finishedLabel: nil))
    let entry = try #require(try outbox.take(limit: 1, now: now()).first)
    redis.stop()
    #expect(throws: RedisError.self) { try outbox.delivered(entry) }
    try redis.start()
    let back = try redis.blocking()
    #expect(try back.command(["XLEN", RedisSequencer.eventsKey]) == .integer(1))
    // Idle past the claim timeout, yet not handed out again: it is settled.
    usleep(200_000)
    #expect(try outbox.take(limit: 10, now: now()) == [])
    #expect(try back.command(["XLEN", RedisSequencer.eventsKey]) == .integer(0))
    let pending = try back.command(["XPENDING", RedisSequencer.eventsKey, StreamOutbox.group])
    #expect(pending.elements?.first == .integer(0))
  }

  /// An entry a dead holder left that was trimmed from the stream since
  /// (the bound, or a hand) leaves the group when it is claimed, counted.
  @Test func aTrimmedEntryLeavesTheGroup() throws {
    let (redis, client) = try Self.loaded()
    let outbox = Self.outbox(redis, "a", claimAfterMs: 100)
    _ = try outbox.take(limit: 1, now: now())
    try Self.command(client, "s", .start(.seconds(60), finishedLabel: nil))
    let read = try client.command([
      "XREADGROUP", "GROUP", StreamOutbox.group, "dead", "COUNT", "1", "STREAMS",
      RedisSequencer.eventsKey, ">",
    ])
    let id = try #require(
      read.elements?.first?.elements?.last?.elements?.first?.elements?.first?.text)
    try client.command(["XDEL", RedisSequencer.eventsKey, id])
    let giveUp = now() + 5000
    while outbox.damaged == 0 && now() < giveUp {
      #expect(try outbox.take(limit: 10, now: now()) == [])
      usleep(50_000)
    }
    #expect(outbox.damaged == 1)
    let pending = try client.command(["XPENDING", RedisSequencer.eventsKey, StreamOutbox.group])
    #expect(pending.elements?.first == .integer(0))
  }

  /// Touching claims back only what is still this consumer's: an entry
  /// another instance took over stays with it, and the delivery count of
  /// one touched does not grow. Over a thousand at once, too.
  @Test func touchKeepsOnlyWhatIsStillOurs() throws {
    let (redis, client) = try Self.loaded()
    let outbox = Self.outbox(redis, "a")
    _ = try outbox.take(limit: 1, now: now())
    try Self.command(client, "s", .start(.seconds(60), finishedLabel: nil))
    let entry = try #require(try outbox.take(limit: 1, now: now()).first)
    try client.command([
      "XCLAIM", RedisSequencer.eventsKey, StreamOutbox.group, "b", "0", entry.handle, "JUSTID",
    ])
    try outbox.retry(entry, attempts: 1, at: now() + 1000)
    let owner = try client.command([
      "XPENDING", RedisSequencer.eventsKey, StreamOutbox.group, "-", "+", "10",
    ])
    #expect(owner.elements?.first?.elements?[1].text == "b")
    // 1,200 entries held by "c": all touched, none counted as delivered again.
    for index in 0..<1200 {
      try client.command(["XADD", RedisSequencer.eventsKey, "*", "n", String(index)])
    }
    let read = try client.command([
      "XREADGROUP", "GROUP", StreamOutbox.group, "c", "COUNT", "1200", "STREAMS",
      RedisSequencer.eventsKey, ">",
    ])
    let ids = (read.elements?.first?.elements?.last?.elements ?? []).compactMap {
      $0.elements?.first?.text
    }
    #expect(ids.count == 1200)
    func touch(_ consumer: String) throws -> Int {
      let reply = try client.command(
        ["FCALL", RedisSequencer.function("touch"), "1", RedisSequencer.eventsKey]
          + [StreamOutbox.group, consumer] + ids)
      return reply.elements?.count ?? -1
    }
    #expect(try touch("d") == 0)
    #expect(try touch("c") == 1200)
    let counts = try client.command([
      "XPENDING", RedisSequencer.eventsKey, StreamOutbox.group, "-", "+", "2000", "c",
    ])
    let deliveries = (counts.elements ?? []).compactMap { $0.elements?.last }
    #expect(deliveries.count == 1200)
    #expect(deliveries.allSatisfy { $0 == .integer(1) })
  }

  /// What a stopping instance hands back, another takes over at its next
  /// take, a full claim timeout early, tries carried on; an entry a third
  /// instance took over meanwhile stays that one's, not made idle.
  @Test func handedBackEntriesAreTakenAtOnce() throws {
    let (redis, client) = try Self.loaded()
    let stopping = Self.outbox(redis, "stopping")
    let other = Self.outbox(redis, "other")
    _ = try stopping.take(limit: 0, now: now())
    try Self.command(client, "kept", .start(.seconds(60), finishedLabel: nil))
    try Self.command(client, "taken", .start(.seconds(60), finishedLabel: nil))
    let held = try stopping.take(limit: 10, now: now())
    #expect(held.count == 2)
    try stopping.retry(held[0], attempts: 3, at: now() + 60_000)
    try client.command([
      "XCLAIM", RedisSequencer.eventsKey, StreamOutbox.group, "third", "0", held[1].handle,
      "JUSTID",
    ])
    // Without a hand back, nothing is the other's for thirty seconds.
    #expect(try other.take(limit: 10, now: now()) == [])
    try stopping.handBack(held)
    let claimed = try other.take(limit: 10, now: now())
    #expect(claimed.map(\.handle) == [held[0].handle])
    #expect(claimed.first?.attempts == 3)
    let pending = try client.command([
      "XPENDING", RedisSequencer.eventsKey, StreamOutbox.group, "IDLE", "1000", "-", "+", "10",
    ])
    #expect(pending.elements == [], "the third's entry is not made idle")
  }

  /// A consumer that is gone (an instance's name before its restart) and
  /// holds nothing leaves the group once quiet for ten claim timeouts; the
  /// outbox's own stays.
  @Test func goneConsumersLeaveTheGroup() throws {
    let (redis, client) = try Self.loaded()
    let outbox = Self.outbox(redis, "pruner", claimAfterMs: 100)
    #expect(try outbox.take(limit: 10, now: now()) == [])
    for session in ["a", "b"] {
      try Self.command(client, session, .start(.seconds(60), finishedLabel: nil))
    }
    // "ghost" delivered its entry and acknowledged it; "holder" keeps its own.
    func read(_ consumer: String) throws -> String {
      let reply = try client.command([
        "XREADGROUP", "GROUP", StreamOutbox.group, consumer, "COUNT", "1", "STREAMS",
        RedisSequencer.eventsKey, ">",
      ])
      return reply.elements?.first?.elements?.last?.elements?.first?.elements?.first?.text ?? ""
    }
    try client.command(["XACK", RedisSequencer.eventsKey, StreamOutbox.group, try read("ghost")])
    _ = try read("holder")
    func names() throws -> Set<String> {
      let reply = try client.command([
        "XINFO", "CONSUMERS", RedisSequencer.eventsKey, StreamOutbox.group,
      ])
      return Set((reply.elements ?? []).compactMap { $0.elements?.dropFirst().first?.text })
    }
    #expect(try names() == ["ghost", "holder"])
    let giveUp = now() + 10_000
    var taken: [OutboxEntry] = []
    while try names().contains("ghost") && now() < giveUp {
      taken += try outbox.take(limit: 10, now: now())
      usleep(50_000)
    }
    // The holder's entry was taken over (it was idle past the claim
    // timeout), so the holder went the ghost's way too.
    #expect(try names() == ["pruner"])
    #expect(taken.map(\.event.session) == ["b"])
  }

  /// Entries that are no event (written by hand, damaged, out of range)
  /// are settled and counted, and the good one beside them is handed out.
  @Test func damagedEntriesAreDropped() throws {
    let (redis, client) = try Self.loaded()
    let outbox = Self.outbox(redis, "a")
    _ = try outbox.take(limit: 1, now: now())
    try client.command(["XADD", RedisSequencer.eventsKey, "*", "op", "start", "line", "junk"])
    try client.command(["XADD", RedisSequencer.eventsKey, "*", "nothing", "here"])
    try Self.command(client, "ok", .start(.seconds(60), finishedLabel: nil))
    let entries = try outbox.take(limit: 10, now: now())
    #expect(entries.map(\.event.session) == ["ok"])
    #expect(outbox.damaged == 2)
    #expect(try client.command(["XLEN", RedisSequencer.eventsKey]) == .integer(1))
  }

  /// Stream fields are input: every bad value is refused with a reason,
  /// none traps. Edges: ±2^63, 2^64, 1e308, 1e400, -0, NUL, 4 KB.
  @Test func badStreamFieldsAreRefused() throws {
    let (redis, client) = try Self.loaded()
    defer { withExtendedLifetime(redis) {} }
    let wait = try Self.command(
      client, "e", .wait(label: nil, timeoutSeconds: 60, timeoutLabel: nil))
    let line = wait[1]
    let record = try Self.record(wait)
    guard case .waiting(_, let timeoutAt?) = record.status else {
      Issue.record("not waiting")
      return
    }
    let good = ["op": "finish", "line": line, "at": String(timeoutAt)]
    #expect((try? StreamEvent.event(good, config: Self.config).get())?.type == .finished)
    let badAt = [
      "9223372036854775808", "-9223372036854775808", "18446744073709551616", "1e308", "1e400",
      "-0", "\(timeoutAt)\u{0}", String(repeating: "9", count: 4096), String(timeoutAt - 1), "",
    ]
    for at in badAt {
      var fields = good
      fields["at"] = at
      #expect(throws: StreamEvent.Damage.self, "at \(at)") {
        try StreamEvent.event(fields, config: Self.config).get()
      }
    }
    let badOps = ["rotate_key", "finished", "", "start\u{0}", String(repeating: "x", count: 4096)]
    for op in badOps {
      var fields = good
      fields["op"] = op
      #expect(throws: StreamEvent.Damage.self, "op \(op.prefix(20))") {
        try StreamEvent.event(fields, config: Self.config).get()
      }
    }
    var parts = line.split(separator: " ", omittingEmptySubsequences: false).map(String.init)
    let badLines =
      [
        "", String(repeating: "a ", count: 2048),
        line.replacingOccurrences(of: "waiting", with: "bogus"),
      ]
      + [
        "9223372036854775808", "-1", "1e400", "18446744073709551616",
      ].map { value in
        parts[3] = value
        return parts.joined(separator: " ")
      }
    for bad in badLines {
      var fields = good
      fields["line"] = bad
      #expect(throws: StreamEvent.Damage.self, "line \(bad.prefix(40))") {
        try StreamEvent.event(fields, config: Self.config).get()
      }
    }
  }
}

/// The whole recording path: a viewer's command through a hub and its
/// RedisSequencer lands in the stream as the event for the record the hub
/// was acked with, and the sequencer says so (to wake the deliverer).
@Suite(.serialized) struct WebhookSequencerTests {
  /// With webhooks on, an acked start is the stream's one entry, and the
  /// instance was told; with them off, an instance records nothing.
  @Test func acknowledgedCommandIsInTheStream() throws {
    let redis = try RedisProcess()
    let loop = LibevLoop()
    let epoch = try RedisSequencer.prepare(redis.address, proposedEpoch: Hub.randomEpoch())
    let on = Instance(redis, loop: loop, epoch: epoch, recordsEvents: true)
    let off = Instance(redis, loop: loop, epoch: epoch)
    var told = 0
    on.sequencer.onEventsRecorded = { told += 1 }
    waitFor(loop, "both connected") { on.sequencer.isConnected && off.sequencer.isConnected }
    var quiet = Viewer(off.hub, "quiet")
    var viewer = Viewer(on.hub, "loud")
    waitFor(loop, "both snapshots") {
      quiet.read(off.hub)
      viewer.read(on.hub)
      return quiet.hasSnapshot && viewer.hasSnapshot
    }
    quiet.send(off.hub, #"{"op":"start","seconds":60,"id":1}"#)
    viewer.send(on.hub, #"{"op":"start","seconds":60,"id":2}"#)
    waitFor(loop, "both acks") {
      quiet.read(off.hub)
      viewer.read(on.hub)
      return quiet.reply(1) != nil && viewer.reply(2) != nil
    }
    #expect(told == 1)
    let settings = StreamOutbox.Settings(address: redis.address, consumer: "c")
    let outbox = StreamOutbox(settings: settings, config: WebhookStreamTests.config)
    let entries = try outbox.take(limit: 10, now: now())
    #expect(entries.map(\.event.type) == [.started])
    #expect(entries.map(\.event.session) == ["loud"])
    let body = try JSONSerialization.jsonObject(with: Data(entries[0].event.body)) as? [String: Any]
    let state = (body?["data"] as? [String: Any])?["state"] as? [String: Any]
    #expect(state?["endsAt"] as? Int64 == viewer.state["endsAt"] as? Int64)
    #expect(state?["phase"] as? String == "running")
  }

  /// A run that elapses with no command wakes the deliverer at its deadline
  /// (so its finish goes out then, not at the next poll), and the finish is
  /// recorded once however many calls of `due` follow.
  @Test func anElapsedRunWakesTheDeliverer() throws {
    let redis = try RedisProcess()
    let loop = LibevLoop()
    let epoch = try RedisSequencer.prepare(redis.address, proposedEpoch: Hub.randomEpoch())
    let instance = Instance(redis, loop: loop, epoch: epoch, recordsEvents: true)
    var told = 0
    instance.sequencer.onEventsRecorded = { told += 1 }
    waitFor(loop, "connected") { instance.sequencer.isConnected }
    var viewer = Viewer(instance.hub, "short")
    waitFor(loop, "the snapshot") {
      viewer.read(instance.hub)
      return viewer.hasSnapshot
    }
    viewer.send(instance.hub, #"{"op":"start","seconds":1,"id":1}"#)
    waitFor(loop, "the ack") {
      viewer.read(instance.hub)
      return viewer.reply(1) != nil
    }
    #expect(told == 1)
    waitFor(loop, "the wake at the deadline") {
      instance.hub.advance(now: now())
      viewer.read(instance.hub)
      return told == 2
    }
    #expect(viewer.state["phase"] as? String == "finished")
    let client = try redis.blocking()
    #expect(try WebhookStreamTests.due(client) == 1)
    #expect(try WebhookStreamTests.due(client) == 0)
    let types = try WebhookStreamTests.stream(client).map {
      try StreamEvent.event($0, config: WebhookStreamTests.config).get().type
    }
    #expect(types == [.started, .finished])
  }
}
