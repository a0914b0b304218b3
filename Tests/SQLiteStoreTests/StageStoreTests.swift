import CountdownCore
import Foundation
import Testing

@testable import SQLiteStore

@Suite struct StageStoreTests {
  /// A version-6 file (before the stage's columns), as that version wrote it,
  /// frozen here: a row per phase, a keyed one, a remembered answer of each
  /// kind and an event in the outbox.
  static let versionSix = """
    CREATE TABLE sessions (
      id TEXT PRIMARY KEY NOT NULL,
      phase TEXT NOT NULL
        CHECK (phase IN ('idle', 'running', 'paused', 'finished', 'waiting')),
      duration INTEGER NOT NULL,
      ends_at INTEGER,
      remaining_ms INTEGER,
      finished_label TEXT,
      seq INTEGER NOT NULL,
      revision INTEGER NOT NULL,
      updated_at INTEGER NOT NULL,
      key_hash BLOB CHECK (key_hash IS NULL OR length(key_hash) = 32),
      started_at INTEGER,
      timeout_at INTEGER,
      wait_label TEXT,
      outcome TEXT
    ) WITHOUT ROWID;
    CREATE TABLE meta (name TEXT PRIMARY KEY NOT NULL, value TEXT NOT NULL) WITHOUT ROWID;
    CREATE TABLE damaged_sessions (
      id, phase, duration, ends_at, remaining_ms, finished_label, seq, revision, updated_at,
      key_hash, reason TEXT NOT NULL, set_aside_at INTEGER NOT NULL,
      started_at, timeout_at, wait_label, outcome
    );
    CREATE TABLE idempotency (
      session TEXT NOT NULL,
      key TEXT NOT NULL,
      fingerprint TEXT NOT NULL,
      code TEXT,
      phase TEXT, duration INTEGER, ends_at INTEGER, remaining_ms INTEGER, finished_label TEXT,
      seq INTEGER, revision INTEGER, updated_at INTEGER,
      started_at INTEGER, timeout_at INTEGER, wait_label TEXT, outcome TEXT,
      at INTEGER NOT NULL,
      PRIMARY KEY (session, key)
    ) WITHOUT ROWID;
    CREATE INDEX idempotency_at ON idempotency (at);
    CREATE TABLE outbox (
      id INTEGER PRIMARY KEY AUTOINCREMENT,
      event_id TEXT NOT NULL,
      type TEXT NOT NULL,
      session TEXT NOT NULL,
      seq INTEGER NOT NULL,
      at INTEGER NOT NULL,
      body BLOB NOT NULL,
      attempts INTEGER NOT NULL DEFAULT 0,
      next_at INTEGER NOT NULL DEFAULT 0
    );
    CREATE INDEX outbox_due ON outbox (next_at, id);
    INSERT INTO meta VALUES ('epoch', '00c0ffee00c0ffee');
    INSERT INTO sessions VALUES ('talk', 'running', 2400, 1796024364226, NULL, 'Time!', 12, 3, 1796021964226, NULL, NULL, NULL, NULL, NULL);
    INSERT INTO sessions VALUES ('break', 'paused', 600, NULL, 123456, NULL, 4, 2, 1796021000000, NULL, NULL, NULL, NULL, NULL);
    INSERT INTO sessions VALUES ('over', 'finished', 60, NULL, NULL, 'Bye', 9, 5, 1796021000000, NULL, NULL, NULL, NULL, 'elapsed');
    INSERT INTO sessions VALUES ('deploy', 'waiting', 0, NULL, NULL, 'Deploy timed out', 7, 4, 1796021000000, NULL, 1796021000000, 1796021900000, 'Deploying', NULL);
    INSERT INTO sessions VALUES ('keyed', 'idle', 0, NULL, NULL, NULL, 1, 1, 1796021000000, x'\(String(repeating: "ab", count: 32))', NULL, NULL, NULL, NULL);
    INSERT INTO idempotency VALUES ('talk', 'k1', 'start seconds 2400 Time!', NULL, 'running', 2400, 1796024364226, NULL, 'Time!', 12, 3, 1796021964226, NULL, NULL, NULL, NULL, 1796021964226);
    INSERT INTO idempotency VALUES ('talk', 'k2', 'cancel', 'not_running', NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, 1796021964300);
    INSERT INTO outbox (event_id, type, session, seq, at, body) VALUES ('evt_1', 'session.started', 'talk', 12, 1796021964226, x'7b7d');
    PRAGMA user_version = 6;
    """

  static let keyHash = KeyHash(bytes: SIMD32(repeating: 0xab))

  /// The version-6 file's sessions as they must load: no run options, no message, no blackout.
  static let versionSixSessions = [
    StoredSession(
      id: "break",
      record: SessionRecord(
        .paused(remainingMs: 123_456), duration: 600, seq: 4, revision: 2,
        updatedAt: 1_796_021_000_000), keyHash: nil),
    StoredSession(
      id: "deploy",
      record: SessionRecord(
        .waiting(startedAt: 1_796_021_000_000, timeoutAt: 1_796_021_900_000),
        finishedLabel: "Deploy timed out", waitLabel: "Deploying", seq: 7, revision: 4,
        updatedAt: 1_796_021_000_000), keyHash: nil),
    StoredSession(
      id: "keyed", record: SessionRecord(.idle, seq: 1, revision: 1, updatedAt: 1_796_021_000_000),
      keyHash: keyHash),
    StoredSession(
      id: "over",
      record: SessionRecord(
        .finished(.elapsed), duration: 60, finishedLabel: "Bye", seq: 9, revision: 5,
        updatedAt: 1_796_021_000_000), keyHash: nil),
    StoredSession(
      id: "talk",
      record: SessionRecord(
        .running(endsAt: 1_796_024_364_226), duration: 2400, finishedLabel: "Time!", seq: 12,
        revision: 3, updatedAt: 1_796_021_964_226), keyHash: nil),
  ]

  /// A version-6 file is migrated in place to the newest version: every session, the
  /// epoch, both remembered answers and the outbox's event are kept, and the
  /// migrated file stores and loads an overtime run with its levels, a
  /// message and a blackout, and a stopped finish with its overMs.
  @Test func migratesVersionSix() throws {
    let directory = try TemporaryDirectory()
    defer { directory.remove() }
    let path = directory.file("v6.db")
    try rawSQL(path, Self.versionSix)
    #expect(try rawUserVersion(path) == 6)

    let store = try SQLiteStore.open(path: path)
    let loaded = try store.load(now: 1_796_021_964_400)
    #expect(try rawUserVersion(path) == Schema.version)
    #expect(loaded.epoch == "00c0ffee00c0ffee")
    #expect(loaded.setAside.isEmpty)
    #expect(loaded.sessions == Self.versionSixSessions)
    let answers = try store.loadAnswers(now: 1_796_021_964_400)
    #expect(answers.damaged.isEmpty)
    #expect(answers.answers.count == 2)
    var events: Int64 = -1
    try Connection.open(path: path, readOnly: true).prepare("SELECT count(*) FROM outbox")
      .query { row in events = row.integer(0) }
    #expect(events == 1)

    let talk = loaded.sessions[4].record
    let overtime = SessionRecord(
      .overtime(since: 1_796_024_364_226), duration: 2400, finishedLabel: "Time!", seq: 13,
      revision: 4, updatedAt: 1_796_024_400_000,
      run: RunOptions(overtime: true, warnAtSeconds: 120, dangerAtSeconds: 30),
      message: "Wrap up", blackout: true)
    let stopped = SessionRecord(
      .finished(.stopped), duration: 60, finishedLabel: "Bye", seq: 10, revision: 6,
      updatedAt: 1_796_021_000_500, overMs: 86_400_000, message: "質問 ✋", blackout: false)
    #expect(talk.duration == overtime.duration)
    let completions = Completions()
    store.onCompleted = completions.handler
    store.write(save("talk", overtime, ticket: 1))
    store.write(save("over", stopped, ticket: 2))
    _ = completions.wait(for: 2)
    store.close()

    let reopened = try SQLiteStore.open(path: path)
    defer { reopened.close() }
    let again = try reopened.load()
    #expect(again.setAside.isEmpty)
    #expect(again.sessions.first { $0.id == "talk" }?.record == overtime)
    #expect(again.sessions.first { $0.id == "over" }?.record == stopped)
  }

  /// A version-6 row with a phase its CHECK refused (written with the check
  /// off) is set aside by the migration; `overtime`, which the new CHECK
  /// takes, is copied and then judged by the load like any row.
  @Test func migrationSetsAsideAPhaseItCannotCopy() throws {
    let directory = try TemporaryDirectory()
    defer { directory.remove() }
    let path = directory.file("v6-bogus.db")
    try rawSQL(
      path,
      Self.versionSix + """
        PRAGMA ignore_check_constraints = ON;
        INSERT INTO sessions VALUES ('weird', 'exploded', 0, NULL, NULL, NULL, 1, 1, 5, NULL, NULL, NULL, NULL, NULL);
        INSERT INTO sessions VALUES ('early', 'overtime', 60, 1000, NULL, NULL, 1, 1, 5000, NULL, NULL, NULL, NULL, NULL);
        """)
    let store = try SQLiteStore.open(path: path)
    defer { store.close() }
    let loaded = try store.load()
    #expect(loaded.sessions == Self.versionSixSessions)
    // Copied, then refused by the load: a version-6 row cannot have overtime on.
    #expect(loaded.setAside.map(\.session) == ["early"])
    #expect(loaded.setAside.first?.reason.contains("overtime on") == true, "\(loaded.setAside)")
    var damaged: [String] = []
    try Connection.open(path: path, readOnly: true).prepare(
      "SELECT id || ' ' || reason FROM damaged_sessions ORDER BY id"
    ).query { row in damaged.append(row.text(0) ?? "") }
    #expect(damaged.count == 2 && damaged.last == "weird unknown phase", "\(damaged)")
  }

  /// Rows with one of the stage's columns damaged, the other columns those of
  /// a good row in that phase: the id, the phase's columns, the stage's
  /// (overtime, warn, danger, overMs, message, blackout), and words its reason holds.
  static let damaged: [(name: String, values: String, reason: String)] = [
    ("warn-le-danger", "'running', 60, 61000, NULL, NULL, 0, 30, 30, NULL, NULL, 0", "below"),
    ("warn-below", "'running', 60, 61000, NULL, NULL, 0, 10, 30, NULL, NULL, 0", "below"),
    ("warn-zero", "'running', 60, 61000, NULL, NULL, 0, 0, NULL, NULL, NULL, 0", "from 1 to"),
    ("warn-86401", "'running', 60, 61000, NULL, NULL, 0, 86401, NULL, NULL, NULL, 0", "from 1 to"),
    (
      "warn-2-63", "'running', 60, 61000, NULL, NULL, 0, 9223372036854775807, NULL, NULL, NULL, 0",
      "from 1 to"
    ),
    (
      "danger-min",
      "'running', 60, 61000, NULL, NULL, 0, NULL, -9223372036854775808, NULL, NULL, 0", "from 1 to"
    ),
    ("warn-real", "'running', 60, 61000, NULL, NULL, 0, 1e400, NULL, NULL, NULL, 0", "holds real"),
    ("warn-text", "'running', 60, 61000, NULL, NULL, 0, 'soon', NULL, NULL, NULL, 0", "holds text"),
    ("levels-idle", "'idle', 0, NULL, NULL, NULL, 0, 120, NULL, NULL, NULL, 0", "only a running"),
    (
      "overtime-idle", "'idle', 0, NULL, NULL, NULL, 1, NULL, NULL, NULL, NULL, 0", "only a running"
    ),
    ("overtime-2", "'running', 60, 61000, NULL, NULL, 2, NULL, NULL, NULL, NULL, 0", "not 0 or 1"),
    // INTEGER affinity turns 1.0 and '120' into integers; 1.5 and 'soon' stay as they are.
    ("overtime-real", "'running', 60, 61000, NULL, NULL, 1.5, NULL, NULL, NULL, NULL, 0", "real"),
    (
      "overtime-off", "'overtime', 60, 1000, NULL, NULL, 0, NULL, NULL, NULL, NULL, 0",
      "overtime on"
    ),
    (
      "overtime-no-since", "'overtime', 60, NULL, NULL, NULL, 1, NULL, NULL, NULL, NULL, 0",
      "needs endsAt"
    ),
    (
      "overtime-a-day", "'overtime', 60, -86399000, NULL, NULL, 1, NULL, NULL, NULL, NULL, 0",
      "needs endsAt"
    ),
    (
      "overtime-paused", "'overtime', 60, 1000, 5000, NULL, 1, NULL, NULL, NULL, NULL, 0",
      "no remainingMs"
    ),
    (
      "over-ms-running", "'running', 60, 61000, NULL, NULL, 0, NULL, NULL, 5000, NULL, 0",
      "only a stopped record holds overMs"
    ),
    (
      "over-ms-elapsed", "'finished', 60, NULL, NULL, 'elapsed', 0, NULL, NULL, 0, NULL, 0",
      "only a stopped record holds overMs"
    ),
    (
      "stopped-no-over", "'finished', 60, NULL, NULL, 'stopped', 0, NULL, NULL, NULL, NULL, 0",
      "needs overMs"
    ),
    (
      "stopped-negative", "'finished', 60, NULL, NULL, 'stopped', 0, NULL, NULL, -1, NULL, 0",
      "needs overMs"
    ),
    (
      "stopped-2-days", "'finished', 60, NULL, NULL, 'stopped', 0, NULL, NULL, 172800000, NULL, 0",
      "needs overMs"
    ),
    (
      "message-141", "'idle', 0, NULL, NULL, NULL, 0, NULL, NULL, NULL, printf('%141s', 'x'), 0",
      "message is not"
    ),
    (
      "message-4k", "'idle', 0, NULL, NULL, NULL, 0, NULL, NULL, NULL, printf('%4096s', 'x'), 0",
      "message is not"
    ),
    (
      "message-nul", "'idle', 0, NULL, NULL, NULL, 0, NULL, NULL, NULL, 'a' || char(0) || 'b', 0",
      "message is not"
    ),
    ("message-empty", "'idle', 0, NULL, NULL, NULL, 0, NULL, NULL, NULL, '', 0", "message is not"),
    (
      "message-esc", "'idle', 0, NULL, NULL, NULL, 0, NULL, NULL, NULL, char(27) || '[2J', 0",
      "message is not"
    ),
    (
      "message-blob", "'idle', 0, NULL, NULL, NULL, 0, NULL, NULL, NULL, x'41', 0",
      "message holds blob"
    ),
    (
      "message-utf8", "'idle', 0, NULL, NULL, NULL, 0, NULL, NULL, NULL, CAST(x'ff' AS TEXT), 0",
      "not UTF-8"
    ),
    ("blackout-2", "'idle', 0, NULL, NULL, NULL, 0, NULL, NULL, NULL, NULL, 2", "not 0 or 1"),
    ("blackout-neg", "'idle', 0, NULL, NULL, NULL, 0, NULL, NULL, NULL, NULL, -1", "not 0 or 1"),
    (
      "blackout-text", "'idle', 0, NULL, NULL, NULL, 0, NULL, NULL, NULL, NULL, 'yes'", "holds text"
    ),
  ]

  static let good = SessionRecord(
    .running(endsAt: 61_000), duration: 60, updatedAt: 1000,
    run: RunOptions(overtime: true, warnAtSeconds: 30, dangerAtSeconds: 10), message: "Wrap up",
    blackout: true)

  /// Each row with a damaged stage column is set aside with its reason, its
  /// stage columns moved as they were; the good row beside it loads, and the
  /// next start finds nothing to set aside.
  @Test(arguments: damaged)
  func setsADamagedStageRowAside(name: String, values: String, reason: String) throws {
    let fixture = try Fixture()
    defer { fixture.finish() }
    fixture.store.write(save("good", Self.good, ticket: 1))
    _ = fixture.completions.wait(for: 1)
    fixture.store.close()
    // The phase's columns: phase, duration, ends_at, remaining_ms, outcome; then the stage's.
    try rawSQL(
      fixture.path,
      """
      PRAGMA ignore_check_constraints = ON;
      INSERT INTO sessions (id, phase, duration, ends_at, remaining_ms, outcome, overtime,
                            warn_at_seconds, danger_at_seconds, over_ms, message, blackout,
                            seq, revision, updated_at)
        VALUES ('\(name)', \(values), 1, 1, 1000);
      """)

    let store = try SQLiteStore.open(path: fixture.path)
    let loaded = try store.load(now: 4_321)
    #expect(loaded.sessions == [StoredSession(id: "good", record: Self.good, keyHash: nil)])
    #expect(loaded.setAside.map(\.session) == [name])
    #expect(loaded.setAside.first?.reason.contains(reason) == true, "\(loaded.setAside)")
    store.close()

    let quoted = [
      "overtime", "warn_at_seconds", "danger_at_seconds", "over_ms", "message", "blackout",
    ].map { "quote(\($0))" }.joined(separator: " || ' ' || ")
    var moved: [String] = []
    let database = try Connection.open(path: fixture.path, readOnly: true)
    try database.prepare("SELECT \(quoted), set_aside_at FROM damaged_sessions").query { row in
      moved.append((row.text(0) ?? "") + " @" + String(row.integer(1)))
    }
    var written: [String] = []
    try database.prepare(
      """
      SELECT \(quoted.replacingOccurrences(of: "overtime", with: "column6")
        .replacingOccurrences(of: "warn_at_seconds", with: "column7")
        .replacingOccurrences(of: "danger_at_seconds", with: "column8")
        .replacingOccurrences(of: "over_ms", with: "column9")
        .replacingOccurrences(of: "message", with: "column10")
        .replacingOccurrences(of: "blackout", with: "column11"))
      FROM (VALUES (\(values)))
      """
    ).query { row in written.append((row.text(0) ?? "") + " @4321") }
    #expect(moved == written)
    let again = try SQLiteStore.open(path: fixture.path)
    defer { again.close() }
    let reloaded = try again.load()
    #expect(reloaded.setAside.isEmpty)
    #expect(reloaded.sessions.map(\.id) == ["good"])
  }

  /// An overtime's end by itself, a day past its deadline, is settled on a
  /// row stored in overtime (an adjust or a message wrote it so) as on a
  /// running one: finished, stopped, overMs a day, the message and blackout
  /// kept, its event in the outbox; a row a later command moved on is left.
  @Test func theDaysEndSettlesAnOvertimeRow() throws {
    let fixture = try Fixture()
    defer { fixture.finish() }
    let since: Int64 = 1_796_000_000_000
    let overtime = SessionRecord(
      .overtime(since: since), duration: 60, finishedLabel: "Time!", seq: 5, revision: 3,
      updatedAt: since + 30_000, run: RunOptions(overtime: true, warnAtSeconds: 20),
      message: "Wrap up", blackout: true)
    let running = SessionRecord(
      .running(endsAt: since), duration: 60, seq: 4, revision: 2, updatedAt: since - 60_000,
      run: RunOptions(overtime: true))
    fixture.store.write(save("over", overtime, ticket: 1))
    fixture.store.write(save("run", running, ticket: 2))
    _ = fixture.completions.wait(for: 2)
    let config = SessionConfig.Shared(SessionConfig())
    let end = since + SessionRecord.maxOvertimeMs
    for (session, record) in [("over", overtime), ("run", running)] {
      let event = WebhookEvent(.finished, session: session, record: record, at: end, config: config)
      fixture.store.write(.finish(session: session, record: record, event: event))
    }
    // A finish from the revision before "over"'s: a command came first, so nothing changes.
    let stale = WebhookEvent(.finished, session: "over", record: running, at: end, config: config)
    fixture.store.write(.finish(session: "over", record: running, event: stale))
    fixture.store.write(save("marker", SessionRecord(), ticket: 3))
    _ = fixture.completions.wait(for: 3)
    let loaded = try fixture.store.load().sessions
    for (session, record) in [("over", overtime), ("run", running)] {
      let stored = try #require(loaded.first { $0.id == session }?.record)
      #expect(stored == record.settled(at: end))
      #expect(stored.outcome == .stopped && stored.overMs == SessionRecord.maxOvertimeMs)
      #expect(stored.message == record.message && stored.blackout == record.blackout)
    }
    #expect(try fixture.store.take(limit: 10, now: end).count == 2)
  }

  /// A remembered answer keeps the stage's fields: replayed after a restart,
  /// it is the record the command left, message, levels and blackout included.
  @Test func rememberedAnswerKeepsTheStage() throws {
    let fixture = try Fixture()
    defer { fixture.finish() }
    let entry = IdempotencyEntry(
      session: "talk", key: "retry-1",
      fingerprint: SessionCommand.message("Wrap up").fingerprint, answer: .applied(Self.good),
      at: 1000)
    fixture.store.write(.remember(entry, keyHash: nil, ticket: Ticket(1)))
    _ = fixture.completions.wait(for: 1)
    fixture.store.close()
    let store = try SQLiteStore.open(path: fixture.path)
    defer { store.close() }
    let loaded = try store.loadAnswers(now: 2000)
    #expect(loaded.damaged.isEmpty)
    let replayed = loaded.answers.lookup(session: "talk", key: "retry-1", now: 2000)
    #expect(replayed?.answer == .applied(Self.good))
  }
}
