import CountdownCore
import Foundation
import Testing

@testable import SQLiteStore

@Suite struct StoreTests {
  /// Records that between them set every field to edge values: each phase,
  /// each optional nil and not, the widest integers, odd text.
  static let records: [(String, SessionRecord, KeyHash?)] = [
    ("idle", SessionRecord(), nil),
    (
      "running",
      SessionRecord(
        .running(endsAt: 1_796_024_364_226), duration: 86_400, finishedLabel: "Fini ✓ 菊花!",
        seq: SessionRecord.maxCounter, revision: SessionRecord.maxCounter,
        updatedAt: 1_796_024_361_226),
      KeyHash(of: "controller key")
    ),
    (
      "paused",
      SessionRecord(
        .paused(remainingMs: SessionRecord.aheadMsRange.upperBound),
        duration: SessionRecord.durationRange.upperBound,
        finishedLabel: String(repeating: "é", count: 64), seq: 7, revision: 3, updatedAt: 0),
      nil
    ),
    (
      "finished",
      SessionRecord(
        .finished(.elapsed), duration: 5, seq: 1, revision: 1,
        updatedAt: SessionRecord.epochMsRange.upperBound),
      KeyHash(bytes: SIMD32(repeating: 0xff))
    ),
  ]

  /// Every record field at the edges of its range, and the key hash, come back from the file exactly as saved, after a reopen.
  @Test func roundTripsEveryField() throws {
    let fixture = try Fixture()
    defer { fixture.finish() }
    let (path, store, completions) = (fixture.path, fixture.store, fixture.completions)
    for (index, (id, record, key)) in Self.records.enumerated() {
      store.write(save(id, record, key: key, ticket: UInt64(index)))
    }
    let outcomes = completions.wait(for: Self.records.count).map(\.outcome)
    #expect(outcomes == Self.records.map { .applied($0.1) })
    store.close()

    let reopened = try SQLiteStore.open(path: path)
    defer { reopened.close() }
    let loaded = try reopened.load()
    let expected = Self.records.map { StoredSession(id: $0.0, record: $0.1, keyHash: $0.2) }
    #expect(loaded.sessions == expected.sorted { $0.id < $1.id })
    #expect(loaded.setAside.isEmpty)
    #expect(loaded.epoch == nil)
  }

  /// The file holds the key's 32-byte SHA-256 as a BLOB and never the key's text.
  @Test func storesOnlyTheKeyHash() throws {
    let fixture = try Fixture()
    defer { fixture.finish() }
    let key = "correct-horse-battery-staple"
    fixture.store.write(save("team-a", SessionRecord(), key: KeyHash(of: key), ticket: 1))
    _ = fixture.completions.wait(for: 1)
    fixture.store.close()
    var shape = ""
    try Connection.open(path: fixture.path, readOnly: true).prepare(
      "SELECT typeof(key_hash) || ':' || length(key_hash) FROM sessions"
    ).query { row in shape = row.text(0) ?? "" }
    #expect(shape == "blob:32")
    let bytes = try #require(FileManager.default.contents(atPath: fixture.path))
    #expect(bytes.range(of: Data(key.utf8)) == nil)
    #expect(bytes.range(of: Data(KeyHash(of: key).array)) != nil)
  }

  /// The epoch is stored synchronously and replaced, not duplicated.
  @Test func storesTheEpoch() throws {
    let directory = try TemporaryDirectory()
    defer { directory.remove() }
    let path = directory.file("countdown.db")
    let store = try SQLiteStore.open(path: path)
    try store.saveEpoch("1d017e78d0a5d052")
    try store.saveEpoch("00000000deadbeef")
    store.close()
    let reopened = try SQLiteStore.open(path: path, sync: .normal)
    defer { reopened.close() }
    #expect(try reopened.load().epoch == "00000000deadbeef")
  }

  /// Writes queued while the writer is busy share transactions, and every
  /// ticket is answered once, in the order the writes were queued.
  @Test func groupCommitsInOrder() throws {
    let fixture = try Fixture()
    defer { fixture.finish() }
    let (store, completions) = (fixture.store, fixture.completions)
    let count = 3000
    for index in 0..<count {
      let record = SessionRecord(
        .running(endsAt: Int64(index)), duration: 5, seq: UInt64(index))
      store.write(save("s\(index % 300)", record, ticket: UInt64(index)))
    }
    let received = completions.wait(for: count)
    #expect(received.map(\.ticket.value) == (0..<UInt64(count)).map { $0 })
    #expect(received.allSatisfy { if case .applied = $0.outcome { true } else { false } })
    let stats = store.stats
    #expect(stats.commits < UInt64(count))
    #expect(stats.largestBatch > 1)
    #expect(stats.writesCommitted == UInt64(count))
    #expect(stats.commitMs.count == stats.commits)
    // The last save of each session wins.
    let sessions = try store.load().sessions
    #expect(sessions.count == 300)
    #expect(sessions.allSatisfy { $0.record.seq >= UInt64(count - 300) })
  }

  /// 10,000 sessions created (key mode, no ticket) and forgotten leave no row behind.
  @Test func forgottenSessionsLeaveNoRows() throws {
    // Every write is queued at once, past the default bound on a busy
    // machine: this test is about deletes, not the bound.
    let fixture = try Fixture(sync: .normal, queueLimit: 100_000)
    defer { fixture.finish() }
    let (store, completions) = (fixture.store, fixture.completions)
    for index in 0..<10_000 {
      store.write(save("s\(index)", SessionRecord(), key: KeyHash(of: "k\(index)"), ticket: nil))
      if index % 7 == 0 {
        store.write(
          save(
            "s\(index)", SessionRecord(.finished(.elapsed), duration: 5, revision: 1), ticket: nil))
      }
      store.write(.delete(session: "s\(index)"))
    }
    // A ticketed write queued last completes after everything before it.
    store.write(save("sentinel", SessionRecord(), ticket: 1))
    _ = completions.wait(for: 1)
    #expect(try store.load().sessions.map(\.id) == ["sentinel"])
  }

  /// close() commits what is queued before it returns; later writes are refused at once.
  @Test func closeDrainsTheQueue() throws {
    let fixture = try Fixture()
    defer { fixture.finish() }
    let (path, store, completions) = (fixture.path, fixture.store, fixture.completions)
    for index in 0..<500 {
      store.write(save("s\(index)", SessionRecord(seq: UInt64(index)), ticket: UInt64(index)))
    }
    store.close()
    #expect(completions.wait(for: 500).count == 500)
    store.write(save("late", SessionRecord(), ticket: 500))
    let late = completions.wait(for: 501).last
    #expect(late?.ticket == Ticket(500))
    #expect(late?.outcome == .unavailable("the store is closed"))
    #expect(throws: StoreError.self) { try store.load() }

    let reopened = try SQLiteStore.open(path: path)
    defer { reopened.close() }
    #expect(try reopened.load().sessions.count == 500)
  }

  /// The files as a kill -9 leaves them (database plus WAL, no clean close)
  /// open with every committed write.
  @Test func opensWhatACrashLeaves() throws {
    let fixture = try Fixture()
    defer { fixture.finish() }
    let (path, store, completions) = (fixture.path, fixture.store, fixture.completions)
    try store.saveEpoch("feedfacecafebeef")
    let record = SessionRecord(
      .running(endsAt: 1_796_024_364_226), duration: 60, seq: 4, updatedAt: 1_796_024_304_226
    )
    store.write(save("talk", record, ticket: 1))
    _ = completions.wait(for: 1)
    // Committed frames are in the WAL, not yet in the main file.
    #expect(FileManager.default.fileExists(atPath: path + "-wal"))

    let crashed = try TemporaryDirectory()
    defer { crashed.remove() }
    for suffix in ["", "-wal"] {
      try FileManager.default.copyItem(
        atPath: path + suffix, toPath: crashed.file("countdown.db" + suffix))
    }
    let recovered = try SQLiteStore.open(path: crashed.file("countdown.db"))
    defer { recovered.close() }
    let loaded = try recovered.load()
    #expect(loaded.epoch == "feedfacecafebeef")
    #expect(loaded.sessions == [StoredSession(id: "talk", record: record, keyHash: nil)])
  }

  /// ":memory:" works the same, for tests and --data :memory:.
  @Test func inMemory() throws {
    let store = try SQLiteStore.open(path: SQLiteStore.inMemory)
    defer { store.close() }
    let completions = Completions()
    store.onCompleted = completions.handler
    store.write(save("a", SessionRecord(.paused(remainingMs: 5)), ticket: 9))
    #expect(completions.wait(for: 1).map(\.ticket) == [Ticket(9)])
    #expect(try store.load().sessions.map(\.id) == ["a"])
  }
}

@Suite struct WriterTests {
  /// WAL mode and the chosen synchronous level are set on the connection.
  @Test(arguments: [(SyncMode.full, "2"), (.normal, "1")])
  func setsJournalAndSync(sync: SyncMode, level: String) throws {
    let fixture = try Fixture(sync: sync)
    defer { fixture.finish() }
    #expect(try fixture.store.pragma("journal_mode") == "wal")
    #expect(try fixture.store.pragma("synchronous") == level)
    #expect(try fixture.store.pragma("user_version") == "\(Schema.version)")
  }

  /// write() returns while the file is held (as during a long fsync): it only
  /// queues. Were it to wait on the file, this test would hang past its limit.
  @Test(.timeLimit(.minutes(1))) func writeNeverWaitsOnTheFile() throws {
    let fixture = try Fixture()
    defer { fixture.finish() }
    let (store, completions) = (fixture.store, fixture.completions)
    fixture.store.database.withLock { _ in
      for index in 0..<1000 {
        store.write(save("s\(index)", SessionRecord(seq: UInt64(index)), ticket: UInt64(index)))
      }
      let stats = store.stats
      #expect(stats.queueDepth + stats.batchInProgress == 1000)
      #expect(stats.commits == 0)
    }
    #expect(completions.wait(for: 1000).count == 1000)
    #expect(store.stats.queueDepth == 0)
  }
}
