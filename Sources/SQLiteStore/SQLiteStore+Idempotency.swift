import CountdownCore

/// The `idempotency` table: one row per (session, key), the first answer of
/// a command sent with an `Idempotency-Key`. A row is written in the same
/// transaction as its command's session row (`StoreWrite.remember`), so a
/// command that is durable has its answer durable too, and a `kill -9`
/// cannot leave one without the other. Rows older than a day are deleted by
/// the writer thread, in the transaction that adds a row (through the index
/// on `at`, so the cost is the rows deleted), and at start-up.
struct IdempotencyStatements {
  /// Schema step 4 → 5 (step 6 → 7 adds `stageColumns`). An applied
  /// command's row holds its record in the session columns; a remembered
  /// refusal holds its code and no record.
  static let createTable = """
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
    """

  /// Schema step 6 → 7: the stage's columns. An answer remembered before
  /// them was of a record without overtime or blackout, so those default
  /// to off; a refusal's row leaves them null, unread.
  static let stageColumns = """
    ALTER TABLE idempotency ADD COLUMN overtime INTEGER DEFAULT 0;
    ALTER TABLE idempotency ADD COLUMN warn_at_seconds INTEGER;
    ALTER TABLE idempotency ADD COLUMN danger_at_seconds INTEGER;
    ALTER TABLE idempotency ADD COLUMN over_ms INTEGER;
    ALTER TABLE idempotency ADD COLUMN message TEXT;
    ALTER TABLE idempotency ADD COLUMN blackout INTEGER DEFAULT 0;
    """

  /// Schema step 7 → 8: the address budget a key counts against.
  static let addressColumn = """
    ALTER TABLE idempotency ADD COLUMN address TEXT NOT NULL DEFAULT '';
    """

  /// Where `Database.row` puts the key hash, and how many record columns it has besides the id.
  static let keyHashColumn = 9
  static let recordColumns = 18

  let upsert: Statement
  let prune: Statement
  let select: Statement
  let delete: Statement

  init(_ connection: Connection) throws(StoreError) {
    upsert = try connection.prepare(
      """
      INSERT OR REPLACE INTO idempotency (session, key, fingerprint, code, phase, duration,
        ends_at, remaining_ms, finished_label, seq, revision, updated_at, started_at, timeout_at,
        wait_label, outcome, overtime, warn_at_seconds, danger_at_seconds, over_ms, message,
        blackout, at, address)
      VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
      """)
    prune = try connection.prepare("DELETE FROM idempotency WHERE at <= ?")
    // Columns 0-19 as `selectSessions`'s, so a record is read by the same
    // checks as a session row's; every live row, oldest first, since the
    // limits count all of them and none may be forgotten early.
    select = try connection.prepare(
      """
      SELECT session, phase, duration, ends_at, remaining_ms, finished_label, seq, revision,
             updated_at, NULL, started_at, timeout_at, wait_label, outcome, overtime,
             warn_at_seconds, danger_at_seconds, over_ms, message, blackout,
             key, fingerprint, code, at, address
      FROM idempotency WHERE at > ? ORDER BY at
      """)
    delete = try connection.prepare(
      "DELETE FROM idempotency WHERE CAST(session AS BLOB) = ? AND CAST(key AS BLOB) = ?")
  }

  /// Inside the writer's transaction: the row, then whatever is past its day.
  func remember(_ entry: IdempotencyEntry) throws(StoreError) {
    var values: [SQLValue] = [.text(entry.session), .text(entry.key), .text(entry.fingerprint)]
    switch entry.answer {
    case .applied(let record):
      // The session row's columns from `row`, without its id and key hash.
      let row = Database.row(entry.session, record, nil)
      values.append(.null)
      values += row[1..<Self.keyHashColumn] + row[(Self.keyHashColumn + 1)...]
    case .rejected(let code):
      values.append(.text(code.rawValue))
      values += Array(repeating: SQLValue.null, count: Self.recordColumns)
    }
    values += [.integer(entry.at), .text(entry.address)]
    try upsert.run(values)
    try prune.run([.integer(entry.at - IdempotencyKey.keepMs)])
  }
}

/// A stored answer that start-up could not take: deleted, with why.
public struct DamagedAnswer: Equatable, Sendable {
  public let session: String
  public let reason: String
}

extension SQLiteStore {
  /// The answers remembered within the last day, every one, in a cache for
  /// the `LocalSequencer` (the limits bounded how many were written). For
  /// start-up: it blocks on the file. Rows past their day go; a row out of range or of the
  /// wrong type is input that failed its checks: it is deleted and named in
  /// `damaged`, and its key is then unknown (a retry applies anew).
  public func loadAnswers(now: Int64, into cache: IdempotencyCache = IdempotencyCache())
    throws(StoreError) -> (answers: IdempotencyCache, damaged: [DamagedAnswer])
  {
    try withDatabase { database throws(StoreError) in
      let statements = database.idempotency
      try statements.prune.run([.integer(now - IdempotencyKey.keepMs)])
      var entries: [IdempotencyEntry] = []
      var damaged: [(session: [UInt8], key: [UInt8], reason: String)] = []
      try statements.select.query([.integer(now - IdempotencyKey.keepMs)]) { row in
        do throws(Database.RowDamage) {
          entries.append(try Self.decodeAnswer(row))
        } catch {
          damaged.append((row.bytes(0), row.bytes(Self.answerColumn), error.reason))
        }
      }
      for (session, key, _) in damaged { try statements.delete.run([.blob(session), .blob(key)]) }
      var cache = cache
      for entry in entries { cache.insert(entry, now: now) }
      return (
        cache,
        damaged.map { DamagedAnswer(session: SetAside.printable($0.session), reason: $0.reason) }
      )
    }
  }

  /// The first of `select`'s columns after the record's: key, fingerprint, code, at, address.
  static let answerColumn: Int32 = 20

  static func decodeAnswer(_ row: Row) throws(Database.RowDamage) -> IdempotencyEntry {
    let column = answerColumn
    guard let key = row.exactText(column), let fingerprint = row.exactText(column + 1),
      let at = row.exactInteger(column + 3), let address = row.exactText(column + 4)
    else { throw Database.RowDamage("key, fingerprint, at or address is of the wrong type") }
    let answer: IdempotentAnswer
    let session: String
    if row.isNull(column + 2) {
      let stored = try Database.decode(row)
      (session, answer) = (stored.id, .applied(stored.record))
    } else {
      guard let text = row.exactText(column + 2), let code = ErrorCode(rawValue: text),
        let id = row.exactText(0)
      else { throw Database.RowDamage("code is not an error code") }
      (session, answer) = (id, .rejected(code))
    }
    let entry = IdempotencyEntry(
      session: session, key: key, fingerprint: fingerprint, answer: answer, at: at,
      address: address)
    if let damage = entry.damage { throw Database.RowDamage(damage) }
    return entry
  }
}
