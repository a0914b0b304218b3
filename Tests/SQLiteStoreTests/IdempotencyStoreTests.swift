import Foundation
import Testing

@testable import CountdownCore
@testable import SQLiteStore

@Suite struct IdempotencyStoreTests {
  let t0: Int64 = 1_796_000_000_000

  func entry(
    _ session: String, _ key: String, _ answer: IdempotentAnswer, at: Int64,
    fingerprint: String = "start seconds 60 "
  ) -> IdempotencyEntry {
    IdempotencyEntry(session: session, key: key, fingerprint: fingerprint, answer: answer, at: at)
  }

  func rows(_ path: String) throws -> Int64 {
    var count: Int64 = 0
    try Connection.open(path: path, readOnly: true).prepare("SELECT count(*) FROM idempotency")
      .query { count = $0.integer(0) }
    return count
  }

  /// A remembered answer and its command's record are committed together and both come back after a reopen; a refusal comes back with its code.
  @Test func survivesReopen() throws {
    let fixture = try Fixture()
    defer { fixture.finish() }
    let record = SessionRecord(
      .running(endsAt: t0 + 60_000), duration: 60, finishedLabel: "Fini ✓", seq: 9, revision: 4,
      updatedAt: t0)
    let applied = entry("talk", "retry-me~!", .applied(record), at: t0)
    let refused = entry("talk", "c", .rejected(.notRunning), at: t0 + 1, fingerprint: "cancel")
    let key = KeyHash(of: "controller")
    fixture.store.write(.remember(applied, keyHash: key, ticket: Ticket(1)))
    fixture.store.write(.remember(refused, keyHash: nil, ticket: Ticket(2)))
    let outcomes = fixture.completions.wait(for: 2).map(\.outcome)
    #expect(outcomes == [.applied(record), .rejected(.notRunning)])
    fixture.store.close()

    let reopened = try SQLiteStore.open(path: fixture.path)
    defer { reopened.close() }
    #expect(
      try reopened.load().sessions == [StoredSession(id: "talk", record: record, keyHash: key)])
    let (answers, damaged) = try reopened.loadAnswers(now: t0 + 2)
    #expect(damaged.isEmpty)
    #expect(answers.count == 2)
    #expect(answers.lookup(session: "talk", key: "retry-me~!", now: t0 + 2) == applied)
    #expect(answers.lookup(session: "talk", key: "c", now: t0 + 2) == refused)
  }

  /// A hub on a reopened file replays the answer a hub before the restart gave, byte for byte, and applies nothing.
  @Test func hubReplaysAcrossReopen() throws {
    let fixture = try Fixture()
    defer { fixture.finish() }
    let first = Hub(config: HubConfig(), sequencer: LocalSequencer(store: fixture.store))
    guard case .joined(let viewer) = first.connect(session: "s", peer: "192.0.2.1", now: t0) else {
      Issue.record("join refused")
      return
    }
    while first.nextFrame(for: viewer, now: t0) != nil {}
    let start = SessionCommand.start(.seconds(90), finishedLabel: nil)
    first.submit(start, idempotencyKey: "once", from: viewer, now: t0)
    for completion in fixture.completions.wait(for: 1) {
      first.complete(completion.ticket, completion.outcome, now: t0 + 5)
    }
    var frames: [[UInt8]] = []
    while let frame = first.nextFrame(for: viewer, now: t0 + 5) { frames.append(frame) }
    let ack = try #require(frames.first { $0.starts(with: Array(#"{"type":"ack""#.utf8)) })
    fixture.store.close()

    let reopened = try SQLiteStore.open(path: fixture.path)
    defer { reopened.close() }
    let loaded = try reopened.load()
    let (answers, _) = try reopened.loadAnswers(now: t0 + 60_000)
    let second = Hub(
      config: HubConfig(), sequencer: LocalSequencer(store: reopened, answers: answers))
    second.restore(loaded.sessions, now: t0 + 60_000)
    guard
      case .joined(let again) = second.connect(session: "s", peer: "192.0.2.1", now: t0 + 60_000)
    else {
      Issue.record("join refused")
      return
    }
    while second.nextFrame(for: again, now: t0 + 60_000) != nil {}
    second.submit(start, idempotencyKey: "once", from: again, now: t0 + 60_000)
    var replay: [[UInt8]] = []
    while let frame = second.nextFrame(for: again, now: t0 + 60_000) { replay.append(frame) }
    #expect(replay.contains(ack))
    #expect(second.record(of: "s")?.revision == 1)
    #expect(second.record(of: "s")?.endsAt == t0 + 90_000)
  }

  /// One address sending new keys on one session past the session's limit
  /// leaves the table at the limit (each refused key writes nothing); every
  /// row keeps its address, so after a reopen the limits count the same and
  /// another session's key, from another address, still replays.
  @Test func rowsStayWithinTheLimits() throws {
    let fixture = try Fixture()
    defer { fixture.finish() }
    let limits = IdempotencyLimits(perSession: 20, perAddress: 30, total: 1000)
    func hub(_ store: SQLiteStore, _ answers: IdempotencyCache) -> Hub {
      Hub(config: HubConfig(), sequencer: LocalSequencer(store: store, answers: answers))
    }
    var completed = 0
    var request: RequestID = 0
    func send(
      _ hub: Hub, _ store: Fixture?, _ body: String, _ session: String, key: String, peer: String,
      at: Int64
    ) -> RequestAnswer? {
      request += 1
      hub.command(
        Array(body.utf8), session: session, authority: .none, peer: peer, request: request,
        idempotencyKey: key, now: at)
      var answer: RequestAnswer?
      hub.drainAnswers { answer = $1 }
      guard answer == nil, let store else { return answer }
      completed += 1
      for completion in store.completions.wait(for: completed).suffix(1) {
        hub.complete(completion.ticket, completion.outcome, now: at)
      }
      hub.drainAnswers { answer = $1 }
      return answer
    }
    let first = hub(fixture.store, IdempotencyCache(limits: limits))
    let theirs = try #require(
      send(
        first, fixture, #"{"op":"start","seconds":600}"#, "other", key: "theirs",
        peer: "192.0.2.9", at: t0))
    var refused = 0
    for n in 0..<300 {
      let answer = send(
        first, fixture, #"{"op":"cancel"}"#, "flood", key: "k\(n)", peer: "2001:db8::/64",
        at: t0 + 1 + Int64(n) * 50)
      if answer?.code == .rateLimited { refused += 1 }
    }
    #expect(refused == 280)
    #expect(try rows(fixture.path) == 21)
    fixture.store.close()

    let reopened = try SQLiteStore.open(path: fixture.path)
    defer { reopened.close() }
    let loaded = try reopened.loadAnswers(
      now: t0 + 20_000, into: IdempotencyCache(limits: limits))
    #expect(loaded.answers.count(ofSession: "flood") == 20)
    #expect(loaded.answers.count(ofAddress: "2001:db8::/64") == 20)
    #expect(loaded.answers.count(ofAddress: "192.0.2.9") == 1)
    let second = hub(reopened, loaded.answers)
    second.restore(try reopened.load().sessions, now: t0 + 20_000)
    let more = send(
      second, nil, #"{"op":"cancel"}"#, "flood", key: "after", peer: "2001:db8::/64",
      at: t0 + 20_000)
    #expect(more?.code == .rateLimited)
    let replay = send(
      second, nil, #"{"op":"start","seconds":600}"#, "other", key: "theirs", peer: "192.0.2.9",
      at: t0 + 20_100)
    #expect(replay == theirs)
    #expect(second.record(of: "other")?.revision == 1)
    #expect(try rows(fixture.path) == 21)
  }

  /// Rows older than a day go: in the transaction that adds a row, and at load.
  @Test func prunesADayOn() throws {
    let fixture = try Fixture()
    defer { fixture.finish() }
    let store = fixture.store
    store.write(
      .remember(entry("a", "old", .rejected(.busy), at: t0), keyHash: nil, ticket: Ticket(1)))
    store.write(
      .remember(entry("a", "mid", .rejected(.busy), at: t0 + 1000), keyHash: nil, ticket: Ticket(2))
    )
    _ = fixture.completions.wait(for: 2)
    #expect(try rows(fixture.path) == 2)
    let later = t0 + IdempotencyKey.keepMs + 1
    store.write(
      .remember(entry("b", "new", .rejected(.busy), at: later), keyHash: nil, ticket: Ticket(3)))
    _ = fixture.completions.wait(for: 3)
    #expect(try rows(fixture.path) == 2)
    let (answers, _) = try store.loadAnswers(now: t0 + 1000 + IdempotencyKey.keepMs)
    #expect(answers.count == 1)
    #expect(answers.lookup(session: "b", key: "new", now: later) != nil)
    #expect(try rows(fixture.path) == 1)
  }

  /// A stored answer is input: rows out of range or of the wrong type are refused, deleted and named; sound rows load.
  @Test func damagedRowsAreRefused() throws {
    let fixture = try Fixture()
    defer { fixture.finish() }
    let store = fixture.store
    store.write(
      .remember(entry("ok", "k", .rejected(.busy), at: t0), keyHash: nil, ticket: Ticket(1)))
    _ = fixture.completions.wait(for: 1)
    let columns =
      "session, key, fingerprint, code, phase, duration, ends_at, remaining_ms, finished_label, seq, revision, updated_at, at"
    let bad = [
      "'bad/id', 'k', 'cancel', 'busy', NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, \(t0)",
      "'s1', '\(String(repeating: "k", count: 256))', 'cancel', 'busy', NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, \(t0)",
      "'s2', 'k', 'cancel', 'unavailable', NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, \(t0)",
      "'s3', 'k', 'cancel', 'busy', NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, 'soon'",
      "'s4', 'k', 'launch', 'busy', NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, \(t0)",
      "'s5', 'k', 'start seconds 5 ', NULL, 'running', 5, 9223372036854775807, NULL, NULL, 1, 1, \(t0), \(t0)",
      "'s6', 'k', 'start seconds 5 ', NULL, 'idle', -1, NULL, NULL, NULL, 1, 1, \(t0), \(t0)",
      "'s7', 'k', 'start seconds 5 ', NULL, 'idle', 0, NULL, NULL, NULL, -1, 1, \(t0), \(t0)",
      "'s8', 'k', 'start seconds 5 ', NULL, 'idle', 0, NULL, NULL, 'a' || char(0) || 'b', 1, 1, \(t0), \(t0)",
      "'s9', 'k', 'start seconds 5 ', NULL, 'idle', 1e308, NULL, NULL, NULL, 1, 1, \(t0), \(t0)",
      "'s10', x'6b00', 'cancel', 'busy', NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, \(t0)",
    ]
    for values in bad {
      try rawSQL(fixture.path, "INSERT INTO idempotency (\(columns)) VALUES (\(values))")
    }
    let (answers, damaged) = try store.loadAnswers(now: t0 + 1)
    #expect(answers.count == 1)
    #expect(answers.lookup(session: "ok", key: "k", now: t0 + 1) != nil)
    #expect(damaged.count == bad.count)
    #expect(damaged.allSatisfy { !$0.reason.isEmpty })
    #expect(try rows(fixture.path) == 1)
  }
}

extension IdempotencyStoreTests {
  /// A version-3 file (before the idempotency table) with a session is migrated in place: the
  /// session loads, answers can be remembered, and they come back after a reopen.
  @Test func migratesVersionThree() throws {
    let directory = try TemporaryDirectory()
    defer { directory.remove() }
    let path = directory.file("v3.db")
    try rawSQL(
      path,
      Schema.steps[0..<3].joined(separator: "\n")
        + """
        INSERT INTO sessions VALUES ('talk', 'idle', 0, NULL, NULL, NULL, 3, 2, \(t0), NULL);
        PRAGMA user_version = 3;
        """)
    #expect(try rawUserVersion(path) == 3)
    let store = try SQLiteStore.open(path: path)
    #expect(try store.load().sessions.map(\.id) == ["talk"])
    #expect(try store.loadAnswers(now: t0).answers.count == 0)
    let completions = Completions()
    store.onCompleted = completions.handler
    let remembered = entry("talk", "k", .rejected(.notRunning), at: t0, fingerprint: "cancel")
    store.write(.remember(remembered, keyHash: nil, ticket: Ticket(1)))
    _ = completions.wait(for: 1)
    store.close()
    #expect(try rawUserVersion(path) == Schema.version)
    let reopened = try SQLiteStore.open(path: path)
    defer { reopened.close() }
    #expect(
      try reopened.loadAnswers(now: t0 + 1).answers.lookup(session: "talk", key: "k", now: t0 + 1)
        == remembered)
  }
}
