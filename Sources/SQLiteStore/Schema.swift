#if canImport(Glibc)
  import Glibc
#endif

/// The file's layout, its version (`PRAGMA user_version`) and the steps that
/// bring an older file up to date.
///
/// - Version 1: `sessions` (one row per session: its `SessionRecord`) and
///   `meta` (the epoch). Open control only.
/// - Version 2: `sessions.key_hash`, the SHA-256 of the controller key in
///   `--control key` mode (never the key itself).
/// - Version 3: `damaged_sessions`, where start-up moves a row it cannot take
///   as a session, as it was (untyped columns keep every value), with why.
/// - Version 4: the waiting phase. `sessions` is rebuilt, since its phase
///   CHECK must take `waiting`, with `started_at`, `timeout_at`, `wait_label`
///   and `outcome` (every finished row of an older file elapsed: a countdown
///   ran out), and `damaged_sessions` gets the same columns. A row whose
///   phase the old CHECK would not have let in (one written with the check
///   off) cannot be copied, so it is set aside there, as start-up would.
/// - Version 5: `idempotency`, the first answer of each command sent with an
///   `Idempotency-Key`, kept a day (`SQLiteStore+Idempotency.swift`).
/// - Version 6: `outbox`, the webhook events recorded with their changes and
///   not yet delivered (`SQLiteStore+Outbox.swift`).
/// - Version 7: the stage (overtime, levels, message, blackout). `sessions` is
///   rebuilt again, since its phase CHECK must take `overtime`, with
///   `overtime`, `warn_at_seconds`, `danger_at_seconds`, `over_ms`, `message`
///   and `blackout`; every older row had none of them, so it copies with
///   `overtime` and `blackout` off and the rest null. `damaged_sessions` and
///   `idempotency` get the same columns, and a row the new CHECK would refuse
///   is set aside, as version 4 did.
/// - Version 8: `idempotency.address`, the client address budget each key
///   counts against (`IdempotencyLimits`); older rows have '' and count
///   against no address.
enum Schema {
  /// The newest version this build reads and writes.
  static let version: Int64 = 8

  /// `steps[n]` takes a file from version n to n + 1. A new file runs them
  /// all, so the upgrade path is exercised on every fresh database.
  static let steps: [String] = [
    """
    CREATE TABLE sessions (
      id TEXT PRIMARY KEY NOT NULL,
      phase TEXT NOT NULL CHECK (phase IN ('idle', 'running', 'paused', 'finished')),
      duration INTEGER NOT NULL,
      ends_at INTEGER,
      remaining_ms INTEGER,
      finished_label TEXT,
      seq INTEGER NOT NULL,
      revision INTEGER NOT NULL,
      updated_at INTEGER NOT NULL
    ) WITHOUT ROWID;
    CREATE TABLE meta (name TEXT PRIMARY KEY NOT NULL, value TEXT NOT NULL) WITHOUT ROWID;
    """,
    """
    ALTER TABLE sessions ADD COLUMN key_hash BLOB
      CHECK (key_hash IS NULL OR length(key_hash) = 32);
    """,
    """
    CREATE TABLE damaged_sessions (
      id, phase, duration, ends_at, remaining_ms, finished_label, seq, revision, updated_at,
      key_hash, reason TEXT NOT NULL, set_aside_at INTEGER NOT NULL
    );
    """,
    """
    CREATE TABLE sessions_v4 (
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
    ALTER TABLE damaged_sessions ADD COLUMN started_at;
    ALTER TABLE damaged_sessions ADD COLUMN timeout_at;
    ALTER TABLE damaged_sessions ADD COLUMN wait_label;
    ALTER TABLE damaged_sessions ADD COLUMN outcome;
    INSERT INTO sessions_v4 (id, phase, duration, ends_at, remaining_ms, finished_label, seq,
                             revision, updated_at, key_hash, outcome)
      SELECT id, phase, duration, ends_at, remaining_ms, finished_label, seq, revision,
             updated_at, key_hash, CASE WHEN phase = 'finished' THEN 'elapsed' END
      FROM sessions WHERE phase IN ('idle', 'running', 'paused', 'finished');
    INSERT INTO damaged_sessions (id, phase, duration, ends_at, remaining_ms, finished_label,
                                  seq, revision, updated_at, key_hash, reason, set_aside_at)
      SELECT id, phase, duration, ends_at, remaining_ms, finished_label, seq, revision,
             updated_at, key_hash, 'unknown phase', CAST(strftime('%s', 'now') AS INTEGER) * 1000
      FROM sessions WHERE phase IS NULL OR phase NOT IN ('idle', 'running', 'paused', 'finished');
    DROP TABLE sessions;
    ALTER TABLE sessions_v4 RENAME TO sessions;
    """,
    IdempotencyStatements.createTable,
    OutboxStatements.createTable,
    """
    CREATE TABLE sessions_v7 (
      id TEXT PRIMARY KEY NOT NULL,
      phase TEXT NOT NULL
        CHECK (phase IN ('idle', 'running', 'paused', 'finished', 'waiting', 'overtime')),
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
      outcome TEXT,
      overtime INTEGER NOT NULL DEFAULT 0,
      warn_at_seconds INTEGER,
      danger_at_seconds INTEGER,
      over_ms INTEGER,
      message TEXT,
      blackout INTEGER NOT NULL DEFAULT 0
    ) WITHOUT ROWID;
    ALTER TABLE damaged_sessions ADD COLUMN overtime;
    ALTER TABLE damaged_sessions ADD COLUMN warn_at_seconds;
    ALTER TABLE damaged_sessions ADD COLUMN danger_at_seconds;
    ALTER TABLE damaged_sessions ADD COLUMN over_ms;
    ALTER TABLE damaged_sessions ADD COLUMN message;
    ALTER TABLE damaged_sessions ADD COLUMN blackout;
    INSERT INTO sessions_v7 (id, phase, duration, ends_at, remaining_ms, finished_label, seq,
                             revision, updated_at, key_hash, started_at, timeout_at, wait_label,
                             outcome)
      SELECT id, phase, duration, ends_at, remaining_ms, finished_label, seq, revision,
             updated_at, key_hash, started_at, timeout_at, wait_label, outcome
      FROM sessions
      WHERE phase IN ('idle', 'running', 'paused', 'finished', 'waiting', 'overtime');
    INSERT INTO damaged_sessions (id, phase, duration, ends_at, remaining_ms, finished_label,
                                  seq, revision, updated_at, key_hash, reason, set_aside_at,
                                  started_at, timeout_at, wait_label, outcome)
      SELECT id, phase, duration, ends_at, remaining_ms, finished_label, seq, revision,
             updated_at, key_hash, 'unknown phase', CAST(strftime('%s', 'now') AS INTEGER) * 1000,
             started_at, timeout_at, wait_label, outcome
      FROM sessions
      WHERE phase IS NULL
        OR phase NOT IN ('idle', 'running', 'paused', 'finished', 'waiting', 'overtime');
    DROP TABLE sessions;
    ALTER TABLE sessions_v7 RENAME TO sessions;
    """ + IdempotencyStatements.stageColumns,
    IdempotencyStatements.addressColumn,
  ]

  /// The columns `sessions` has from each version on: a file that lacks one
  /// is refused, unchanged, rather than failing later on a statement.
  static let sessionColumns: [(name: String, since: Int64)] =
    [
      "id", "phase", "duration", "ends_at", "remaining_ms", "finished_label", "seq", "revision",
      "updated_at",
    ].map { ($0, 1) } + [("key_hash", 2)]
    + ["started_at", "timeout_at", "wait_label", "outcome"].map { ($0, 4) }
    + ["overtime", "warn_at_seconds", "danger_at_seconds", "over_ms", "message", "blackout"].map {
      ($0, 7)
    }

  static func userVersion(_ connection: Connection) throws(StoreError) -> Int64 {
    var version: Int64 = 0
    try connection.prepare("PRAGMA user_version").query { row in version = row.integer(0) }
    return version
  }

  /// Refuses a file or directory that cannot be written, before SQLite
  /// tries: on a read-only filesystem SQLite fails only later, on the WAL's
  /// side files, with a less telling error. `access` reports a read-only
  /// filesystem even to root.
  static func checkWritable(path: String) throws(StoreError) {
    let directory =
      path.lastIndex(of: "/").map { String(path[..<$0]) }.map { $0.isEmpty ? "/" : $0 } ?? "."
    for (target, what) in [(path, "the file"), (directory, "its directory \(directory)")] {
      guard access(target, W_OK) != 0, errno != ENOENT else { continue }
      let reason = String(cString: strerror(errno))
      throw StoreError(.readOnly, path: path, message: "\(what) is not writable (\(reason))")
    }
  }

  /// Refuses a file this build must not touch, through a read-only connection
  /// so that a refused file is never changed. A missing file passes: the
  /// read-write open creates it, or says why it cannot.
  static func validate(path: String) throws(StoreError) {
    let connection: Connection
    do {
      connection = try Connection.open(path: path, readOnly: true)
    } catch  where error.kind == .cannotOpen {
      return
    }
    let version = try userVersion(connection)
    guard version <= Schema.version else {
      throw StoreError(
        .newerSchema, path: path,
        message:
          "schema version \(version) is newer than version \(Schema.version), the newest this "
          + "server supports; refusing to open it (use a newer server)")
    }
    guard version >= 0 else {
      throw StoreError(.corrupt, path: path, message: "unknown schema version \(version)")
    }
    // Version 0 with tables is another program's database, not a new file.
    var tables: Int64 = 0
    try connection.prepare("SELECT count(*) FROM sqlite_schema").query { row in
      tables = row.integer(0)
    }
    guard version > 0 || tables == 0 else {
      throw StoreError(
        .foreign, path: path,
        message: "it is another program's SQLite database (it has tables but no schema version)"
      )
    }
    guard version > 0 else { return }
    var columns: Set<String> = []
    try connection.prepare("SELECT name FROM pragma_table_info('sessions')").query { row in
      if let name = row.exactText(0) { columns.insert(name) }
    }
    let missing = sessionColumns.filter { $0.since <= version && !columns.contains($0.name) }
    guard missing.isEmpty else {
      throw StoreError(
        .corrupt, path: path,
        message: "the sessions table lacks "
          + missing.map(\.name).joined(separator: ", ") + "; refusing to open it")
    }
  }

  /// Brings an open read-write connection to `version`, in one transaction.
  static func migrate(_ connection: Connection) throws(StoreError) {
    try connection.execute("BEGIN IMMEDIATE")
    do throws(StoreError) {
      // Read again under the write lock: the file may have changed since validation.
      let found = try userVersion(connection)
      guard found >= 0, found <= Schema.version else {
        throw StoreError(
          .newerSchema, path: connection.path,
          message: "schema version \(found) is not one of 0 to \(Schema.version)")
      }
      for step in steps[Int(found)...] { try connection.execute(step) }
      if found < Schema.version {
        try connection.execute("PRAGMA user_version = \(Schema.version)")
      }
      try connection.execute("COMMIT")
    } catch {
      if connection.inTransaction { try? connection.execute("ROLLBACK") }
      throw error
    }
  }
}
