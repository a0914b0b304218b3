import CountdownCore

/// How hard a commit waits for the disk (`PRAGMA synchronous` under WAL).
public enum SyncMode: String, Sendable, CaseIterable {
  /// Every commit is fsynced before it is reported: what was acked survives
  /// power loss and OS crashes.
  case full
  /// The WAL is fsynced only at checkpoints: what was acked survives a crash
  /// of the process (even `kill -9`), but the last commits may be lost to
  /// power loss or an OS crash.
  case normal
}

/// What became of one write that carried a ticket.
public struct StoreCompletion: Equatable, Sendable {
  public let ticket: Ticket
  public let session: String
  /// `.applied(record)` once the record is committed, `.unavailable(message)`
  /// when the commit failed and nothing of it was stored. Never `.rejected`.
  public let outcome: SequenceOutcome

  public init(ticket: Ticket, session: String, outcome: SequenceOutcome) {
    self.ticket = ticket
    self.session = session
    self.outcome = outcome
  }
}

/// Sessions' durable facts in one SQLite file: the `SessionStore` that
/// `LocalSequencer` writes to, plus the synchronous start-up calls.
///
/// `write(_:)` only queues; a writer thread commits everything queued into one
/// transaction (group commit) and then calls `onCompleted` with each ticket's
/// outcome. A failed commit stores nothing of its batch; writes without a
/// ticket (creations, deletions) are kept and tried again with the next batch,
/// so the file converges once writes succeed again.
///
/// The writer thread holds the store until `close()`: call it before exit.
public final class SQLiteStore: SessionStore, Sendable {
  /// The path that keeps everything in memory, for tests and `--data :memory:`.
  public static let inMemory = ":memory:"

  public let path: String
  public let sync: SyncMode
  let database: Guarded<Database?>
  private let queue: Guarded<WriteQueue>
  private let writer: Guarded<JoinableThread?>

  /// After the first failed commit, the writer waits this long before trying
  /// kept writes again (doubling up to `longestRetryWait`); a new write wakes
  /// it at once.
  static let firstRetryWait = Duration.milliseconds(50)
  static let longestRetryWait = Duration.seconds(2)

  private init(path: String, sync: SyncMode, database: Database) {
    self.path = path
    self.sync = sync
    self.database = Guarded(database)
    queue = Guarded(WriteQueue())
    writer = Guarded(nil)
  }

  /// Opens (creating if need be) and migrates the file, then starts the writer.
  ///
  /// A file that is not a SQLite database, has a newer schema version, or
  /// cannot be written is refused before anything is written to it.
  public static func open(path: String, sync: SyncMode = .full) throws(StoreError) -> SQLiteStore {
    let persistent = path != inMemory
    if persistent {
      try Schema.checkWritable(path: path)
      try Schema.validate(path: path)
    }
    let connection = try Connection.open(path: path, readOnly: false)
    if connection.isReadOnly {
      throw StoreError(
        .readOnly, path: path, message: "the file or its filesystem is read-only")
    }
    // Wait out another process's brief lock (a backup, the sqlite3 shell)
    // instead of failing a commit at once. The wait can only fall on the
    // writer thread or on start-up's load, never on write().
    try connection.execute("PRAGMA busy_timeout = 5000")
    if persistent {
      var mode = ""
      try connection.prepare("PRAGMA journal_mode = WAL").query { row in mode = row.text(0) ?? "" }
      guard mode == "wal" else {
        throw StoreError(
          .other, path: path, message: "cannot use WAL mode (journal mode is \(mode))")
      }
    }
    try connection.execute("PRAGMA synchronous = \(sync == .full ? "FULL" : "NORMAL")")
    try Schema.migrate(connection)
    let store = SQLiteStore(path: path, sync: sync, database: try Database(connection))
    store.writer.withLock { $0 = JoinableThread { store.runWriter() } }
    return store
  }

  /// Every stored session and the stored epoch (nil in a new file). For
  /// start-up: it blocks on the file.
  public func load() throws(StoreError) -> (epoch: String?, sessions: [StoredSession]) {
    try withDatabase { database throws(StoreError) in try database.load() }
  }

  /// Stores the epoch, committed before it returns. For start-up.
  public func saveEpoch(_ epoch: String) throws(StoreError) {
    try withDatabase { database throws(StoreError) in
      try database.upsertMeta.run([.text("epoch"), .text(epoch)])
    }
  }

  /// Called by the writer thread with each batch's ticketed outcomes, in the
  /// order the writes were queued. Set it before the first ticketed write.
  public var onCompleted: (@Sendable ([StoreCompletion]) -> Void)? {
    get { queue.withLock { $0.onCompleted } }
    set { queue.withLock { $0.onCompleted = newValue } }
  }

  /// Queues a write for the writer thread. Never blocks on the file: it takes
  /// a lock that is only ever held for list operations. After `close()` a
  /// ticketed write is answered `.unavailable` at once.
  public func write(_ write: StoreWrite) {
    let (accepted, handler) = queue.update { queue in
      if !queue.stopping { queue.pending.append(write) }
      return (!queue.stopping, queue.onCompleted)
    }
    guard !accepted, let completion = write.completion(failure: "the store is closed") else {
      return
    }
    handler?([completion])
  }

  /// A pragma's current value on the store's connection, as text.
  func pragma(_ name: String) throws(StoreError) -> String? {
    try withDatabase { database throws(StoreError) in
      var value: String?
      try database.connection.prepare("PRAGMA \(name)").query { row in value = row.text(0) }
      return value
    }
  }

  /// Counters for metrics, as they stand now.
  public var stats: StoreStats {
    queue.withLock { queue in
      var stats = queue.stats
      stats.queueDepth = queue.pending.count
      return stats
    }
  }

  /// Commits everything queued so far, then stops the writer and closes the
  /// file. Blocks until done (for SIGTERM). Later writes are refused.
  ///
  /// The last batch's `onCompleted` runs before this returns, so whatever the
  /// handler touches (an lws context to wake) must still exist. Never call it
  /// from `onCompleted`: the writer would wait for itself.
  public func close() {
    queue.update { $0.stopping = true }
    let thread = writer.withLock { thread in
      defer { thread = nil }
      return thread
    }
    thread?.join()
    // Closing the last connection checkpoints the WAL into the main file.
    database.withLock { $0 = nil }
  }

  private func withDatabase<Result>(
    _ body: (Database) throws(StoreError) -> Result
  ) throws(StoreError) -> Result {
    // `rethrows` would erase the error type; carry it out as a Result.
    let result: Swift.Result<Result, StoreError> = database.withLock { database in
      guard let database else {
        return .failure(StoreError(.closed, path: path, message: "the store is closed"))
      }
      do throws(StoreError) { return .success(try body(database)) } catch { return .failure(error) }
    }
    return try result.get()
  }

  // MARK: The writer thread

  private func runWriter() {
    var kept: [StoreWrite] = []
    var retryWait = Self.firstRetryWait
    // Swapped with the queue's array, so taking a batch under the lock that
    // write() needs neither copies nor allocates.
    var batch: [StoreWrite] = []
    while true {
      batch.removeAll(keepingCapacity: true)
      let stopping = queue.wait(
        until: { !$0.pending.isEmpty || $0.stopping }, timeout: kept.isEmpty ? nil : retryWait
      ) { queue in
        swap(&queue.pending, &batch)
        queue.stats.batchInProgress = kept.count + batch.count
        return queue.stopping
      }
      let writes = kept.isEmpty ? batch : kept + batch
      if !writes.isEmpty {
        let started = ContinuousClock.now
        let failure = commit(writes)
        let elapsed = ContinuousClock.now - started
        kept = failure == nil ? [] : writes.filter(\.isKeptOnFailure)
        retryWait = failure == nil ? Self.firstRetryWait : min(retryWait * 2, Self.longestRetryWait)
        let completions = writes.compactMap {
          $0.completion(failure: failure.map(Self.outcomeMessage))
        }
        let handler = queue.withLock { queue in
          queue.stats.record(
            batch: writes.count, ticketed: completions.count, kept: kept.count, elapsed: elapsed,
            failure: failure)
          return queue.onCompleted
        }
        if !completions.isEmpty { handler?(completions) }
      }
      // Writes are refused once `stopping` is set, so this batch was the last.
      if stopping { return }
    }
  }

  /// What a client is told when its command could not be stored: the cause,
  /// without the server's file path.
  static func outcomeMessage(_ error: StoreError) -> String {
    switch error.kind {
    case .full: "the server's disk is full; nothing changed"
    case .readOnly: "the server's storage is read-only; nothing changed"
    default: "the server could not store the change (\(error.message)); nothing changed"
    }
  }

  /// One transaction for the whole batch; on any failure it is rolled back.
  private func commit(_ writes: [StoreWrite]) -> StoreError? {
    do throws(StoreError) {
      try withDatabase { database throws(StoreError) in try database.commit(writes) }
      return nil
    } catch {
      return error
    }
  }
}

/// What the service thread and the writer share.
struct WriteQueue {
  var pending: [StoreWrite] = []
  var stopping = false
  var onCompleted: (@Sendable ([StoreCompletion]) -> Void)?
  var stats = StoreStats()
}

extension StoreWrite {
  /// A write the hub is not waiting for is kept after a failed commit and
  /// tried again; a ticketed one was reported failed, so the hub never
  /// adopted it and it must not be stored later.
  fileprivate var isKeptOnFailure: Bool {
    if case .save(_, _, _, .some) = self { return false }
    return true
  }

  fileprivate func completion(failure: String?) -> StoreCompletion? {
    guard case .save(let session, let record, _, let ticket?) = self else { return nil }
    return StoreCompletion(
      ticket: ticket, session: session,
      outcome: failure.map { .unavailable($0) } ?? .applied(record))
  }
}

/// The open connection and its prepared statements.
final class Database {
  let connection: Connection
  let begin: Statement
  let commitTransaction: Statement
  let rollback: Statement
  let upsertSession: Statement
  let deleteSession: Statement
  let selectSessions: Statement
  let selectMeta: Statement
  let upsertMeta: Statement

  init(_ connection: Connection) throws(StoreError) {
    self.connection = connection
    begin = try connection.prepare("BEGIN IMMEDIATE")
    commitTransaction = try connection.prepare("COMMIT")
    rollback = try connection.prepare("ROLLBACK")
    upsertSession = try connection.prepare(
      """
      INSERT INTO sessions (id, phase, duration, ends_at, remaining_ms, finished_label, seq,
                            revision, updated_at, key_hash)
      VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
      ON CONFLICT (id) DO UPDATE SET
        phase = excluded.phase, duration = excluded.duration, ends_at = excluded.ends_at,
        remaining_ms = excluded.remaining_ms, finished_label = excluded.finished_label,
        seq = excluded.seq, revision = excluded.revision, updated_at = excluded.updated_at,
        key_hash = excluded.key_hash
      """)
    deleteSession = try connection.prepare("DELETE FROM sessions WHERE id = ?")
    selectSessions = try connection.prepare(
      """
      SELECT id, phase, duration, ends_at, remaining_ms, finished_label, seq, revision,
             updated_at, key_hash
      FROM sessions ORDER BY id
      """)
    selectMeta = try connection.prepare("SELECT value FROM meta WHERE name = ?")
    upsertMeta = try connection.prepare(
      "INSERT INTO meta (name, value) VALUES (?, ?) ON CONFLICT (name) DO UPDATE SET value = excluded.value"
    )
  }

  func commit(_ writes: [StoreWrite]) throws(StoreError) {
    // A rollback that failed last time would make every BEGIN fail from now on.
    if connection.inTransaction { try rollback.run() }
    try begin.run()
    do throws(StoreError) {
      for write in writes {
        switch write {
        case .save(let session, let record, let keyHash, _):
          try upsertSession.run(Self.row(session, record, keyHash))
        case .delete(let session):
          try deleteSession.run([.text(session)])
        }
      }
      try commitTransaction.run()
    } catch {
      // SQLite ends some failed transactions by itself (SQLITE_FULL may).
      if connection.inTransaction { try? rollback.run() }
      throw error
    }
  }

  static func row(_ session: String, _ record: SessionRecord, _ keyHash: KeyHash?) -> [SQLValue] {
    [
      .text(session), .text(record.phase.rawValue), .integer(Int64(record.duration)),
      record.endsAt.map { .integer($0) } ?? .null,
      record.remainingMs.map { .integer($0) } ?? .null,
      record.finishedLabel.map { .text($0) } ?? .null,
      // seq and revision are UInt64; SQLite's integers are signed 64-bit.
      .integer(Int64(bitPattern: record.seq)), .integer(Int64(bitPattern: record.revision)),
      .integer(record.updatedAt), keyHash.map { .blob($0.array) } ?? .null,
    ]
  }

  func load() throws(StoreError) -> (epoch: String?, sessions: [StoredSession]) {
    var epoch: String?
    try selectMeta.query([.text("epoch")]) { row in epoch = row.text(0) }
    var sessions: [StoredSession] = []
    let path = connection.path
    try selectSessions.query { row throws(StoreError) in
      let id = row.text(0) ?? ""
      guard let phase = row.text(1).flatMap(Phase.init(rawValue:)) else {
        throw StoreError(.corrupt, path: path, message: "session \(id) has an unknown phase")
      }
      var keyHash: KeyHash?
      if let bytes = row.blob(9) {
        guard let hash = KeyHash(bytes) else {
          throw StoreError(
            .corrupt, path: path, message: "session \(id) has a key hash of \(bytes.count) bytes")
        }
        keyHash = hash
      }
      let record = SessionRecord(
        phase: phase, duration: Int(row.integer(2)),
        endsAt: row.isNull(3) ? nil : row.integer(3),
        remainingMs: row.isNull(4) ? nil : row.integer(4),
        finishedLabel: row.text(5),
        seq: UInt64(bitPattern: row.integer(6)), revision: UInt64(bitPattern: row.integer(7)),
        updatedAt: row.integer(8))
      sessions.append(StoredSession(id: id, record: record, keyHash: keyHash))
    }
    return (epoch, sessions)
  }
}
