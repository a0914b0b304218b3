import CountdownCore
import Foundation
import Testing

@testable import SQLiteStore

/// Counts the writer's post-commit calls, and lets a test wait for them.
final class Wakes: Sendable {
  private let count = Guarded(0)

  var handler: @Sendable () -> Void { { self.count.update { $0 += 1 } } }

  var value: Int { count.withLock { $0 } }

  /// Waits until `n` wakes have come (or 30 s, which a test then fails on).
  func wait(for n: Int) -> Int {
    count.wait(until: { $0 >= n }, timeout: .seconds(30)) { $0 }
  }
}

@Suite struct OutboxStoreTests {
  let t0: Int64 = 1_796_024_000_000
  let config = SessionConfig.Shared(SessionConfig())

  func started(seq: UInt64 = 3, revision: UInt64 = 1) -> SessionRecord {
    SessionRecord(
      .running(endsAt: t0 + 5000), duration: 5, seq: seq, revision: revision, updatedAt: t0)
  }

  func event(_ type: WebhookEventType, _ session: String, _ record: SessionRecord) -> WebhookEvent {
    WebhookEvent(type, session: session, record: record, at: record.updatedAt, config: config)
  }

  /// A ticketed save of `started()` with its one event, as `LocalSequencer` writes it.
  @discardableResult
  func saveWithEvent(
    _ type: WebhookEventType, _ session: String, ticket: Int, to store: SQLiteStore
  ) -> WebhookEvent {
    let record = started()
    let recorded = event(type, session, record)
    store.write(
      .save(
        session: session, record: record, keyHash: nil, ticket: Ticket(UInt64(ticket)),
        events: [recorded]))
    return recorded
  }

  func rowCount(_ path: String, _ table: String = "outbox") throws -> Int64 {
    var count: Int64 = -1
    try Connection.open(path: path, readOnly: true).prepare("SELECT count(*) FROM \(table)")
      .query { row in count = row.integer(0) }
    return count
  }

  /// A save's events are in the outbox once its record is, exactly as built; a row handed out is not handed out again, and a settled one is deleted by the writer's next commit, which it costs nothing more.
  @Test func savedEventsAreTakenOnceAndDeletedWhenDelivered() throws {
    let fixture = try Fixture()
    defer { fixture.finish() }
    let wakes = Wakes()
    fixture.store.onEventsRecorded = wakes.handler
    let record = started()
    let events = [event(.started, "a", record), event(.started, "b", record)]
    fixture.store.write(
      .save(session: "a", record: record, keyHash: nil, ticket: Ticket(1), events: [events[0]]))
    fixture.store.write(
      .save(session: "b", record: record, keyHash: nil, ticket: Ticket(2), events: [events[1]]))
    _ = fixture.completions.wait(for: 2)
    #expect(wakes.wait(for: 1) >= 1)
    let taken = try fixture.store.take(limit: 10, now: t0)
    #expect(taken.map(\.event) == events)
    #expect(taken.map(\.attempts) == [0, 0])
    #expect(try fixture.store.take(limit: 10, now: t0 + 1).isEmpty)
    try fixture.store.delivered(taken[0])
    try fixture.store.dead(taken[1])
    #expect(try fixture.store.take(limit: 10, now: t0 + 2).isEmpty)
    #expect(try rowCount(fixture.path) == 2)
    let commits = fixture.store.stats.commits
    fixture.store.write(save("c", record, ticket: 3))
    _ = fixture.completions.wait(for: 3)
    #expect(fixture.store.stats.commits == commits + 1)
    #expect(try rowCount(fixture.path) == 0)
    #expect(try fixture.store.take(limit: 10, now: t0 + 3).isEmpty)
  }

  /// A failed try's attempts and next time are stored by the writer's next commit, before any take.
  @Test func retriesRideOnTheWritersCommit() throws {
    let fixture = try Fixture()
    defer { fixture.finish() }
    saveWithEvent(.started, "a", ticket: 1, to: fixture.store)
    _ = fixture.completions.wait(for: 1)
    let taken = try fixture.store.take(limit: 10, now: t0)
    try fixture.store.retry(try #require(taken.first), attempts: 3, at: t0 + 7000)
    fixture.store.write(save("b", started(), ticket: 2))
    _ = fixture.completions.wait(for: 2)
    var stored: [Int64] = []
    try Connection.open(path: fixture.path, readOnly: true).prepare(
      "SELECT attempts, next_at FROM outbox"
    ).query { row in stored = [row.integer(0), row.integer(1)] }
    #expect(stored == [3, t0 + 7000])
  }

  /// With no commit of the writer's to ride on, settled rows are deleted by the delivery side's own transaction once the quiet interval has passed.
  @Test func settledRowsAreDeletedWhenTheWriterIsQuiet() throws {
    let fixture = try Fixture()
    defer { fixture.finish() }
    saveWithEvent(.started, "a", ticket: 1, to: fixture.store)
    _ = fixture.completions.wait(for: 1)
    let taken = try fixture.store.take(limit: 10, now: t0)
    try fixture.store.delivered(try #require(taken.first))
    _ = try fixture.store.take(limit: 10, now: t0)
    #expect(try rowCount(fixture.path) == 1)
    fixture.store.outbox.withLock { $0.book.quietFlush = .zero }
    let commits = fixture.store.stats.commits
    #expect(try fixture.store.take(limit: 10, now: t0).isEmpty)
    #expect(try rowCount(fixture.path) == 0)
    #expect(fixture.store.stats.commits == commits)
  }

  /// What was handed out but not settled when the store closed is handed out again after a reopen, with its attempts and not before its retry time; what was settled is not.
  @Test func unsettledEntriesComeBackAfterReopen() throws {
    let fixture = try Fixture()
    defer { fixture.finish() }
    let types: [WebhookEventType] = [.started, .paused, .resumed]
    for (index, type) in types.enumerated() {
      saveWithEvent(type, "s", ticket: index, to: fixture.store)
    }
    _ = fixture.completions.wait(for: 3)
    let taken = try fixture.store.take(limit: 3, now: t0)
    try #require(taken.count == 3)
    try fixture.store.delivered(taken[0])
    try fixture.store.retry(taken[1], attempts: 4, at: t0 + 60_000)
    // taken[2] was in flight when the server stopped.
    fixture.store.close()

    let reopened = try SQLiteStore.open(path: fixture.path)
    defer { reopened.close() }
    let early = try reopened.take(limit: 10, now: t0 + 1000)
    #expect(early.map(\.event.type) == [.resumed])
    #expect(early.map(\.attempts) == [0])
    let later = try reopened.take(limit: 10, now: t0 + 60_000)
    #expect(later.map(\.event.type) == [.paused])
    #expect(later.map(\.attempts) == [4])
  }

  /// A retry's attempts and time at their edges (Int.max and -1 tries, a time of ±2^63) are stored within range and read back after a reopen: never due before Int64.max, due at once at Int64.min.
  @Test func retryEdgesSurviveReopen() throws {
    let fixture = try Fixture()
    defer { fixture.finish() }
    for index in 0..<2 {
      saveWithEvent(.started, "s\(index)", ticket: index, to: fixture.store)
    }
    _ = fixture.completions.wait(for: 2)
    let taken = try fixture.store.take(limit: 2, now: t0)
    try #require(taken.count == 2)
    try fixture.store.retry(taken[0], attempts: Int.max, at: Int64.max)
    try fixture.store.retry(taken[1], attempts: -1, at: Int64.min)
    fixture.store.close()
    let reopened = try SQLiteStore.open(path: fixture.path)
    defer { reopened.close() }
    let now = try reopened.take(limit: 5, now: Int64.min)
    #expect(now.map(\.event.session) == ["s1"])
    #expect(now.map(\.attempts) == [0])
    #expect(try reopened.take(limit: 5, now: Int64.max - 1).isEmpty)
    let last = try reopened.take(limit: 5, now: Int64.max)
    #expect(last.map(\.event.session) == ["s0"])
    #expect(last.map(\.attempts) == [Int(OutboxStatements.maxAttempts)])
  }

  /// `take` hands out at most `limit`, oldest first, and nothing for a limit of 0, -1 or Int.min; Int.max is bounded, not a trap.
  @Test func takeLimitEdges() throws {
    let fixture = try Fixture()
    defer { fixture.finish() }
    for index in 0..<5 {
      saveWithEvent(.started, "s\(index)", ticket: index, to: fixture.store)
    }
    _ = fixture.completions.wait(for: 5)
    for limit in [0, -1, Int.min] {
      #expect(try fixture.store.take(limit: limit, now: t0).isEmpty)
    }
    #expect(try fixture.store.take(limit: 2, now: t0).map(\.event.session) == ["s0", "s1"])
    #expect(
      try fixture.store.take(limit: Int.max, now: t0).map(\.event.session) == ["s2", "s3", "s4"])
    #expect(try fixture.store.take(limit: Int.max, now: Int64.max).isEmpty)
  }

  /// A commit that fails stores neither the record nor its event: the outbox's insert failing rolls back the session row, and the session's failing rolls back the event.
  @Test func failedWriteRecordsNeither() throws {
    let fixture = try Fixture()
    defer { fixture.finish() }
    let wakes = Wakes()
    fixture.store.onEventsRecorded = wakes.handler
    try rawSQL(
      fixture.path,
      """
      CREATE TRIGGER refuse_event BEFORE INSERT ON outbox
        BEGIN SELECT RAISE(ABORT, 'refused by the test'); END;
      """)
    saveWithEvent(.started, "a", ticket: 1, to: fixture.store)
    let first = fixture.completions.wait(for: 1)
    guard case .unavailable = first[0].outcome else {
      Issue.record("stored: \(first[0].outcome)")
      return
    }
    try rawSQL(
      fixture.path,
      """
      DROP TRIGGER refuse_event;
      CREATE TRIGGER refuse_session BEFORE INSERT ON sessions
        BEGIN SELECT RAISE(ABORT, 'refused by the test'); END;
      """)
    saveWithEvent(.started, "b", ticket: 2, to: fixture.store)
    let second = fixture.completions.wait(for: 2)
    guard case .unavailable = second[1].outcome else {
      Issue.record("stored: \(second[1].outcome)")
      return
    }
    #expect(try rowCount(fixture.path, "sessions") == 0)
    #expect(try rowCount(fixture.path) == 0)
    #expect(wakes.value == 0)
    #expect(try fixture.store.take(limit: 10, now: t0).isEmpty)
  }

  /// A finish settles the row and records its event in one transaction; the same finish again, or one whose row a later command moved on, records nothing.
  @Test func finishIsRecordedOnceAndOnlyForTheRecordItFinished() throws {
    let fixture = try Fixture()
    defer { fixture.finish() }
    let wakes = Wakes()
    fixture.store.onEventsRecorded = wakes.handler
    let running = started()
    let paused = SessionRecord(
      .paused(remainingMs: 2000), duration: 5, seq: 5, revision: 2, updatedAt: t0 + 3000)
    fixture.store.write(save("a", running, ticket: 1))
    fixture.store.write(save("b", running, ticket: 2))
    _ = fixture.completions.wait(for: 2)
    let finishA = WebhookEvent(
      .finished, session: "a", record: running, at: t0 + 5000, config: config)
    let finishB = WebhookEvent(
      .finished, session: "b", record: running, at: t0 + 5000, config: config)
    fixture.store.write(.finish(session: "a", record: running, event: finishA))
    #expect(wakes.wait(for: 1) == 1)
    // b was paused first, and its finish comes late; a's comes twice.
    fixture.store.write(save("b", paused, ticket: 3))
    _ = fixture.completions.wait(for: 3)
    fixture.store.write(.finish(session: "b", record: running, event: finishB))
    fixture.store.write(.finish(session: "a", record: running, event: finishA))
    fixture.store.write(.finish(session: "gone", record: running, event: finishA))
    #expect(wakes.wait(for: 2) >= 2)
    fixture.store.write(save("c", running, ticket: 4))
    _ = fixture.completions.wait(for: 4)
    let taken = try fixture.store.take(limit: 10, now: t0 + 6000)
    #expect(taken.map(\.event) == [finishA])
    let loaded = try fixture.store.load().sessions
    #expect(loaded.first { $0.id == "a" }?.record == running.settled(at: t0 + 5000))
    #expect(loaded.first { $0.id == "a" }?.record.outcome == .elapsed)
    #expect(loaded.first { $0.id == "b" }?.record == paused)
  }

  /// A finish keeps the session's key hash, and a wait's timeout settles as timeout.
  @Test func finishKeepsTheKeyHashAndSettlesAWait() throws {
    let fixture = try Fixture()
    defer { fixture.finish() }
    let waiting = SessionRecord(
      .waiting(startedAt: t0, timeoutAt: t0 + 9000), finishedLabel: "Too slow",
      waitLabel: "Deploying", seq: 2, revision: 1, updatedAt: t0)
    let key = KeyHash(of: "controller")
    fixture.store.write(save("w", waiting, key: key, ticket: 1))
    _ = fixture.completions.wait(for: 1)
    let event = WebhookEvent(
      .finished, session: "w", record: waiting, at: t0 + 9000, config: config)
    fixture.store.write(.finish(session: "w", record: waiting, event: event))
    fixture.store.write(save("x", waiting, ticket: 2))
    _ = fixture.completions.wait(for: 2)
    let stored = try #require(try fixture.store.load().sessions.first { $0.id == "w" })
    #expect(stored.keyHash == key)
    #expect(stored.record.outcome == .timeout)
    #expect(stored.record.waitLabel == nil)
    #expect(stored.record.finishedLabel == "Too slow")
    #expect(try fixture.store.take(limit: 10, now: t0 + 9000).map(\.event) == [event])
  }

  /// A damaged outbox row (wrong types, out of range, an unknown type, a 4 KB id with a NUL) is skipped, not handed out and not a crash, and the good rows around it are.
  @Test func damagedRowsAreSkipped() throws {
    let fixture = try Fixture()
    defer { fixture.finish() }
    let record = started()
    let good = event(.started, "good", record)
    // 4 KB and a NUL, in SQL, since the statement's text is a C string.
    let long = "'" + String(repeating: "x", count: 4096) + "' || char(0)"
    let hex = String(repeating: "ab", count: 16)
    let body = "X'7b7d'"
    try rawSQL(
      fixture.path,
      """
      INSERT INTO outbox (event_id, type, session, seq, at, body) VALUES
        ('msg_\(hex)', 'session.exploded', 's', 1, \(t0), \(body)),
        ('msg_\(hex)', 'session.started', \(long), 1, \(t0), \(body)),
        ('msg_\(hex)', 'session.started', 's', -1, \(t0), \(body)),
        ('msg_\(hex)', 'session.started', 's', 9223372036854775807, \(t0), \(body)),
        ('msg_\(hex)', 'session.started', 's', 1, 1e308, \(body)),
        ('msg_\(hex)', 'session.started', 's', 1, -9223372036854775808, \(body)),
        ('msg_\(hex)', 'session.started', 's', 1, \(t0), 'text, not a blob'),
        ('msg_\(hex)', 'session.started', 's', 1, \(t0), X''),
        ('msg_\(hex)', 'session.started', 's', 1.5, \(t0), \(body)),
        ('msg_nothex', 'session.started', 's', 1, \(t0), \(body)),
        (X'00', 'session.started', 's', 1, \(t0), \(body));
      UPDATE outbox SET attempts = 'many' WHERE rowid = 1;
      """)
    try rawSQL(
      fixture.path,
      """
      INSERT INTO outbox (event_id, type, session, seq, at, body, attempts) VALUES
        ('msg_\(hex)', 'session.started', 's', 1, \(t0), \(body), 18446744073709551616);
      """)
    fixture.store.write(
      .save(session: "good", record: record, keyHash: nil, ticket: Ticket(1), events: [good]))
    _ = fixture.completions.wait(for: 1)
    #expect(try fixture.store.take(limit: 1, now: t0).map(\.event) == [good])
    #expect(try fixture.store.take(limit: 100, now: t0).isEmpty)
    #expect(try rowCount(fixture.path) == 13)
  }

  /// While the writer commits 2,000 events in many transactions, another thread takes and settles them through its own connection: each is handed out exactly once, and the table ends empty.
  @Test func deliveryBesideTheWriterHandsEachOutOnce() async throws {
    let fixture = try Fixture(sync: .normal)
    defer { fixture.finish() }
    let total = 2000
    let store = fixture.store
    let delivery = Task.detached { () throws -> [String] in
      var seen: [String] = []
      while seen.count < total {
        let taken = try store.take(limit: 64, now: Int64.max)
        for entry in taken { try store.delivered(entry) }
        seen += taken.map(\.event.id)
        if taken.isEmpty { await Task.yield() }
      }
      return seen
    }
    var written: [String] = []
    for index in 0..<total {
      let record = SessionRecord(
        .running(endsAt: t0 + 5000), duration: 5, seq: UInt64(index), revision: 1, updatedAt: t0)
      let recorded = event(.started, "s\(index % 50)", record)
      written.append(recorded.id)
      fixture.store.write(
        .save(
          session: recorded.session, record: record, keyHash: nil, ticket: Ticket(UInt64(index)),
          events: [recorded]))
      if index % 100 == 99 { _ = fixture.completions.wait(for: index + 1) }
    }
    let seen = try await delivery.value
    #expect(seen.count == total)
    #expect(Set(seen) == Set(written))
    #expect(try fixture.store.take(limit: 10, now: Int64.max).isEmpty)
    // The last settled rows ride on the next commit.
    fixture.store.write(save("last", SessionRecord(), ticket: UInt64(total)))
    _ = fixture.completions.wait(for: total + 1)
    #expect(try rowCount(fixture.path) == 0)
  }

  /// A hub on a real file: a 1 s run's start and its elapsing are in the outbox once; after a reopen well past the deadline, a new hub's restore records nothing more, and a run that was still going at the first stop but ended while down is recorded then, once.
  @Test func hubOnAFileRecordsEachFinishOnce() throws {
    let fixture = try Fixture()
    defer { fixture.finish() }
    let config = HubConfig(recordsEvents: true)
    let first = Hub(config: config, sequencer: LocalSequencer(store: fixture.store))
    for (session, seconds) in [("short", 1), ("long", 30)] {
      guard case .joined(let viewer) = first.connect(session: session, peer: "192.0.2.1", now: t0)
      else {
        Issue.record("join refused")
        return
      }
      first.receive(Array(#"{"op":"start","seconds":\#(seconds)}"#.utf8), from: viewer, now: t0)
    }
    for completion in fixture.completions.wait(for: 2) {
      first.complete(completion.ticket, completion.outcome, now: t0 + 5)
    }
    for step in 1...4 { first.advance(now: t0 + Int64(step) * 500) }
    fixture.store.close()

    let reopened = try SQLiteStore.open(path: fixture.path)
    defer { reopened.close() }
    let before = try reopened.take(limit: 10, now: t0 + 2000)
    #expect(before.map(\.event.type) == [.started, .started, .finished])
    #expect(before.last?.event.session == "short")
    #expect(before.last?.event.timestamp == t0 + 1000)
    let second = Hub(config: config, sequencer: LocalSequencer(store: reopened))
    second.restore(try reopened.load().sessions, now: t0 + 60_000)
    for entry in before { try reopened.delivered(entry) }
    // A commit, so the restore's writes and the settled rows are all stored.
    reopened.onCompleted = fixture.completions.handler
    reopened.write(save("marker", SessionRecord(), ticket: 9))
    _ = fixture.completions.wait(for: 3)
    let after = try reopened.take(limit: 10, now: t0 + 60_000)
    #expect(after.map(\.event.session) == ["long"])
    #expect(after.map(\.event.timestamp) == [t0 + 30_000])
    #expect(try rowCount(fixture.path) == 1)
  }

  /// A version-5 file (before the outbox) with a session and a remembered answer is migrated in place to version 6: both load, and events can be recorded and taken.
  @Test func migratesVersionFive() throws {
    let directory = try TemporaryDirectory()
    defer { directory.remove() }
    let path = directory.file("v5.db")
    try rawSQL(
      path,
      Schema.steps[0..<5].joined(separator: "\n")
        + """
        INSERT INTO sessions (id, phase, duration, ends_at, seq, revision, updated_at)
          VALUES ('talk', 'running', 5, \(t0 + 5000), 3, 1, \(t0));
        INSERT INTO idempotency (session, key, fingerprint, code, at)
          VALUES ('talk', 'k', 'cancel', 'not_running', \(t0));
        PRAGMA user_version = 5;
        """)
    #expect(try rawUserVersion(path) == 5)
    let store = try SQLiteStore.open(path: path)
    #expect(try rawUserVersion(path) == Schema.version)
    #expect(try store.load().sessions.map(\.record) == [started()])
    #expect(try store.loadAnswers(now: t0).answers.count == 1)
    let completions = Completions()
    store.onCompleted = completions.handler
    let record = started()
    let finish = WebhookEvent(
      .finished, session: "talk", record: record, at: t0 + 5000, config: config)
    store.write(.finish(session: "talk", record: record, event: finish))
    store.write(save("other", SessionRecord(), ticket: 1))
    _ = completions.wait(for: 1)
    #expect(try store.take(limit: 5, now: t0 + 5000).map(\.event) == [finish])
    store.close()
    #expect(try rawUserVersion(path) == Schema.version)
  }

  /// In memory, the outbox shares the store's one connection: events are recorded, taken and settled there too.
  @Test func inMemoryStoreHasAnOutbox() throws {
    let store = try SQLiteStore.open(path: SQLiteStore.inMemory)
    defer { store.close() }
    let completions = Completions()
    store.onCompleted = completions.handler
    let record = started()
    let recorded = event(.started, "m", record)
    store.write(
      .save(session: "m", record: record, keyHash: nil, ticket: Ticket(1), events: [recorded]))
    _ = completions.wait(for: 1)
    let taken = try store.take(limit: 5, now: t0)
    #expect(taken.map(\.event) == [recorded])
    try store.delivered(taken[0])
    #expect(try store.take(limit: 5, now: t0).isEmpty)
    store.write(
      .save(session: "n", record: record, keyHash: nil, ticket: Ticket(2)))
    _ = completions.wait(for: 2)
    let left = try store.withDatabase { database throws(StoreError) in
      var count: Int64 = -1
      try database.connection.prepare("SELECT count(*) FROM outbox").query { count = $0.integer(0) }
      return count
    }
    #expect(left == 0)
  }

  /// Settled rows are deleted at close even when no take followed, so a clean stop sends nothing twice.
  @Test func closeStoresWhatWasSettled() throws {
    let fixture = try Fixture()
    defer { fixture.finish() }
    saveWithEvent(.started, "s", ticket: 1, to: fixture.store)
    _ = fixture.completions.wait(for: 1)
    let taken = try fixture.store.take(limit: 5, now: t0)
    try fixture.store.delivered(try #require(taken.first))
    fixture.store.close()
    #expect(try rowCount(fixture.path) == 0)
    #expect(throws: StoreError.self) { try fixture.store.take(limit: 5, now: t0) }
  }
}
