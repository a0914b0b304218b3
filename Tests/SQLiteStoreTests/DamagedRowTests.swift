import CountdownCore
import Foundation
import Testing

@testable import SQLiteStore

@Suite struct DamagedRowTests {
  /// Rows the store would never write, each as SQL that sets one field of an
  /// otherwise good running row: the name it is set aside under, the values,
  /// and words its reason must hold.
  static let damaged: [(name: String, values: String, reason: String)] = [
    (
      "ends-at-2-63", "'ends-at-2-63', 'running', 60, 9223372036854775808, NULL, NULL, 1, 1, 1000",
      "ends_at holds real"
    ),
    (
      "ends-at-min", "'ends-at-min', 'running', 60, -9223372036854775808, NULL, NULL, 1, 1, 1000",
      "needs endsAt in range"
    ),
    (
      "ends-at-9999", "'ends-at-9999', 'running', 60, 253402300799999, NULL, NULL, 1, 1, 1000",
      "more than 30 days after its updatedAt"
    ),
    (
      "duration-2-40", "'duration-2-40', 'running', 1099511627776, 61000, NULL, NULL, 1, 1, 1000",
      "duration 1099511627776 out of range"
    ),
    (
      "duration-text", "'duration-text', 'running', 'sixty', 61000, NULL, NULL, 1, 1, 1000",
      "duration holds text"
    ),
    (
      "updated-1e308", "'updated-1e308', 'running', 60, 61000, NULL, NULL, 1, 1, 1e308",
      "updated_at holds real"
    ),
    (
      "updated-negative", "'updated-negative', 'running', 60, 61000, NULL, NULL, 1, 1, -1",
      "updatedAt -1 out of range"
    ),
    (
      "seq-negative", "'seq-negative', 'running', 60, 61000, NULL, NULL, -1, 1, 1000",
      "seq -1 is negative"
    ),
    (
      "revision-2-63",
      "'revision-2-63', 'running', 60, 61000, NULL, NULL, 1, 9223372036854775807, 1000",
      "seq or revision out of range"
    ),
    (
      "label-nul", "'label-nul', 'running', 60, 61000, NULL, 'a' || char(0) || 'b', 1, 1, 1000",
      "finishedLabel is not"
    ),
    (
      "label-not-utf8",
      "'label-not-utf8', 'running', 60, 61000, NULL, CAST(x'ff' AS TEXT), 1, 1, 1000",
      "finished_label holds text, not UTF-8"
    ),
    (
      "label-4k", "'label-4k', 'running', 60, 61000, NULL, printf('%4096s', 'x'), 1, 1, 1000",
      "finishedLabel is not"
    ),
    (
      "label-empty", "'label-empty', 'running', 60, 61000, NULL, '', 1, 1, 1000",
      "finishedLabel is not"
    ),
    (
      "label-blob", "'label-blob', 'running', 60, 61000, NULL, x'41', 1, 1, 1000",
      "finished_label holds blob"
    ),
    ("phase-bogus", "'phase-bogus', 'bogus', 60, 61000, NULL, NULL, 1, 1, 1000", "unknown phase"),
    ("both-set", "'both-set', 'running', 60, 61000, 5000, NULL, 1, 1, 1000", "no remainingMs"),
    (
      "running-no-end", "'running-no-end', 'running', 60, NULL, NULL, NULL, 1, 1, 1000",
      "needs endsAt"
    ),
    (
      "paused-zero", "'paused-zero', 'paused', 60, NULL, 0, NULL, 1, 1, 1000",
      "remainingMs in range"
    ),
    (
      "\"\\0x\"", "CAST(x'0078' AS TEXT), 'running', 60, 61000, NULL, NULL, 1, 1, 1000",
      "not a session id"
    ),
    ("\"\u{FFFD}\"", "x'ff', 'running', 60, 61000, NULL, NULL, 1, 1, 1000", "not a session id"),
    (
      "\"\(String(repeating: "0", count: 64))\"…",
      "printf('%065d', 0), 'running', 60, 61000, NULL, NULL, 1, 1, 1000", "not a session id"
    ),
  ]

  /// Rows with the waiting phase's columns damaged (started_at, timeout_at,
  /// wait_label, outcome after updated_at), the same way.
  static let damagedWaits: [(name: String, values: String, reason: String)] = [
    (
      "wait-start-2-63",
      "'waiting', 0, NULL, NULL, NULL, 1, 1, 1000, 9223372036854775808, NULL, NULL, NULL",
      "started_at holds real"
    ),
    (
      "wait-no-start", "'waiting', 0, NULL, NULL, NULL, 1, 1, 1000, NULL, NULL, NULL, NULL",
      "needs startedAt"
    ),
    (
      "wait-start-later", "'waiting', 0, NULL, NULL, NULL, 1, 1, 1000, 2000, NULL, NULL, NULL",
      "no later than updatedAt"
    ),
    (
      "wait-start-min",
      "'waiting', 0, NULL, NULL, NULL, 1, 1, 1000, -9223372036854775808, NULL, NULL, NULL",
      "needs startedAt in range"
    ),
    (
      "wait-duration", "'waiting', 60, NULL, NULL, NULL, 1, 1, 1000, 1000, NULL, NULL, NULL",
      "no endsAt, remainingMs or duration"
    ),
    (
      "wait-ends-at", "'waiting', 0, 61000, NULL, NULL, 1, 1, 1000, 1000, NULL, NULL, NULL",
      "no endsAt, remainingMs or duration"
    ),
    (
      "timeout-short", "'waiting', 0, NULL, NULL, NULL, 1, 1, 1000, 1000, 1999, NULL, NULL",
      "timeoutAt is not 1 s to 1 day"
    ),
    (
      "timeout-long", "'waiting', 0, NULL, NULL, NULL, 1, 1, 1000, 1000, 86401001, NULL, NULL",
      "timeoutAt is not 1 s to 1 day"
    ),
    (
      "timeout-min",
      "'waiting', 0, NULL, NULL, NULL, 1, 1, 1000, 1000, -9223372036854775808, NULL, NULL",
      "timeoutAt is not"
    ),
    (
      "timeout-1e400", "'waiting', 0, NULL, NULL, NULL, 1, 1, 1000, 1000, 1e400, NULL, NULL",
      "timeout_at holds real"
    ),
    (
      "timeout-idle", "'idle', 0, NULL, NULL, NULL, 1, 1, 1000, NULL, 5000, NULL, NULL",
      "only a waiting record holds startedAt or timeoutAt"
    ),
    (
      "wait-label-nul",
      "'waiting', 0, NULL, NULL, NULL, 1, 1, 1000, 1000, NULL, 'a' || char(0) || 'b', NULL",
      "waitLabel is not"
    ),
    (
      "wait-label-4k",
      "'waiting', 0, NULL, NULL, NULL, 1, 1, 1000, 1000, NULL, printf('%4096s', 'x'), NULL",
      "waitLabel is not"
    ),
    (
      "wait-label-blob", "'waiting', 0, NULL, NULL, NULL, 1, 1, 1000, 1000, NULL, x'41', NULL",
      "wait_label holds blob"
    ),
    (
      "wait-label-idle", "'idle', 0, NULL, NULL, NULL, 1, 1, 1000, NULL, NULL, 'x', NULL",
      "only a waiting record holds waitLabel"
    ),
    (
      "outcome-bogus", "'finished', 0, NULL, NULL, NULL, 1, 1, 1000, NULL, NULL, NULL, 'won'",
      "unknown outcome"
    ),
    (
      "outcome-missing", "'finished', 0, NULL, NULL, NULL, 1, 1, 1000, NULL, NULL, NULL, NULL",
      "holds an outcome"
    ),
    (
      "outcome-waiting", "'waiting', 0, NULL, NULL, NULL, 1, 1, 1000, 1000, NULL, NULL, 'done'",
      "holds an outcome"
    ),
    (
      "outcome-integer", "'finished', 0, NULL, NULL, NULL, 1, 1, 1000, NULL, NULL, NULL, x'41'",
      "outcome holds blob"
    ),
  ].map { ($0.0, "'\($0.0)', " + $0.1, $0.2) }

  /// Every damaged row, as values for all of the table's columns but key_hash.
  static let allDamaged =
    damaged.map { ($0.name, $0.values + ", NULL, NULL, NULL, NULL", $0.reason) } + damagedWaits

  static let good = SessionRecord(.running(endsAt: 61_000), duration: 60, updatedAt: 1000)

  /// Each damaged row is set aside (named, with a reason) and moved to damaged_sessions as it
  /// was; the good row beside it loads, and the next start finds nothing to set aside.
  @Test(arguments: allDamaged)
  func setsADamagedRowAside(name: String, values: String, reason: String) throws {
    let fixture = try Fixture()
    defer { fixture.finish() }
    fixture.store.write(save("good", Self.good, ticket: 1))
    _ = fixture.completions.wait(for: 1)
    fixture.store.close()
    try rawSQL(
      fixture.path,
      """
      PRAGMA ignore_check_constraints = ON;
      INSERT INTO sessions (id, phase, duration, ends_at, remaining_ms, finished_label, seq,
                            revision, updated_at, started_at, timeout_at, wait_label, outcome)
        VALUES (\(values));
      """)

    let store = try SQLiteStore.open(path: fixture.path)
    let loaded = try store.load(now: 1_234)
    #expect(loaded.sessions == [StoredSession(id: "good", record: Self.good, keyHash: nil)])
    #expect(loaded.setAside.map(\.session) == [name])
    #expect(loaded.setAside.first?.reason.contains(reason) == true, "\(loaded.setAside)")
    store.close()

    var moved: [String] = []
    var movedWait: [String] = []
    let database = try Connection.open(path: fixture.path, readOnly: true)
    try database.prepare(
      "SELECT quote(duration) || ' ' || reason || ' ' || set_aside_at FROM damaged_sessions"
    ).query { row in moved.append(row.text(0) ?? "") }
    #expect(moved.count == 1)
    #expect(moved.first?.hasSuffix(" 1234") == true)
    // The waiting columns move with the row, as they were.
    let quoted = "quote(started_at) || quote(timeout_at) || quote(wait_label) || quote(outcome)"
    try database.prepare("SELECT \(quoted) FROM damaged_sessions").query { row in
      movedWait.append(row.text(0) ?? "")
    }
    var written: [String] = []
    try database.prepare(
      """
      SELECT quote(column10) || quote(column11) || quote(column12) || quote(column13)
      FROM (VALUES (\(values)))
      """
    ).query { row in written.append(row.text(0) ?? "") }
    #expect(movedWait.count == 1)
    #expect(movedWait == written)
    let again = try SQLiteStore.open(path: fixture.path)
    defer { again.close() }
    let reloaded = try again.load()
    #expect(reloaded.setAside.isEmpty)
    #expect(reloaded.sessions.map(\.id) == ["good"])
  }

  /// A key hash that is not a 32-byte blob sets its row aside instead of refusing the file.
  @Test(arguments: ["x'00'", "'text'", "42"])
  func setsAsideABadKeyHash(value: String) throws {
    let fixture = try Fixture()
    defer { fixture.finish() }
    fixture.store.close()
    try rawSQL(
      fixture.path,
      """
      PRAGMA ignore_check_constraints = ON;
      INSERT INTO sessions (id, phase, duration, ends_at, remaining_ms, finished_label, seq,
                            revision, updated_at, key_hash)
        VALUES ('k', 'idle', 0, NULL, NULL, NULL, 0, 0, 0, \(value));
      """)
    let store = try SQLiteStore.open(path: fixture.path)
    defer { store.close() }
    let loaded = try store.load()
    #expect(loaded.sessions.isEmpty)
    #expect(loaded.setAside == [SetAside(session: "k", reason: "key_hash is not 32 bytes of blob")])
  }

  /// A stored epoch that is not the server's shape (text of hex digits) counts as absent.
  @Test(arguments: ["''", "'ABC'", "'12' || char(0)", "printf('%100s', 'a')"])
  func ignoresADamagedEpoch(value: String) throws {
    let fixture = try Fixture()
    defer { fixture.finish() }
    try fixture.store.saveEpoch("00000000deadbeef")
    #expect(try fixture.store.load().epoch == "00000000deadbeef")
    fixture.store.close()
    try rawSQL(fixture.path, "UPDATE meta SET value = \(value) WHERE name = 'epoch'")
    let store = try SQLiteStore.open(path: fixture.path)
    defer { store.close() }
    #expect(try store.load().epoch == nil)
  }

  /// A sessions table that lacks a column is refused with the column's name, and left unchanged.
  @Test(arguments: [
    "updated_at", "key_hash", "finished_label", "started_at", "outcome", "message", "blackout",
    "over_ms",
  ])
  func refusesAMissingColumn(column: String) throws {
    let fixture = try Fixture()
    defer { fixture.finish() }
    fixture.store.close()
    try rawSQL(fixture.path, "ALTER TABLE sessions DROP COLUMN \(column)")
    let before = try #require(FileManager.default.contents(atPath: fixture.path))
    let error = #expect(throws: StoreError.self) { try SQLiteStore.open(path: fixture.path) }
    #expect(error?.kind == .corrupt)
    #expect(error?.description.contains("lacks \(column)") == true)
    #expect(FileManager.default.contents(atPath: fixture.path) == before)
  }
}
