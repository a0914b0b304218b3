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
  /// when the commit failed and nothing of it was stored; `.rejected` only
  /// for a remembered refusal (`StoreWrite.remember`).
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
  let queue: Guarded<WriteQueue>
  /// The webhook outbox's delivery side (`SQLiteStore+Outbox.swift`).
  let outbox = Guarded(OutboxState())
  private let writer: Guarded<JoinableThread?>
  /// Held from open to close: no second server uses the file meanwhile.
  private let claim: Guarded<LockFile?>

  /// After the first failed commit, the writer waits this long before trying
  /// kept writes again (doubling up to `longestRetryWait`); a new write wakes
  /// it at once.
  static let firstRetryWait = Duration.milliseconds(50)
  static let longestRetryWait = Duration.seconds(2)

  /// Writes that may wait uncommitted (queued, in the transaction being
  /// committed, or kept after a failed commit) before a command's write is
  /// answered `unavailable`: what a stalled disk may cost in memory.
  public static let defaultQueueLimit = 10_000

  private init(
    path: String, sync: SyncMode, queueLimit: Int, database: sending Database,
    claim: sending LockFile?
  ) {
    self.path = path
    self.sync = sync
    self.database = Guarded(database)
    queue = Guarded(WriteQueue(limit: max(1, queueLimit)))
    writer = Guarded(nil)
    self.claim = Guarded(claim)
  }

  /// Opens (creating if need be) and migrates the file, then starts the writer.
  ///
  /// A file that is not a SQLite database, has a newer schema version, or
  /// cannot be written is refused before anything is written to it.
  public static func open(
    path: String, sync: SyncMode = .full, queueLimit: Int = defaultQueueLimit
  ) throws(StoreError) -> SQLiteStore {
    let persistent = path != inMemory
    var claim: LockFile?
    if persistent {
      try Schema.checkWritable(path: path)
      // Validation only reads, so a refused file gets no lock file beside it;
      // migration reads the version again under the claim.
      try Schema.validate(path: path)
      claim = try LockFile.claim(path)
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
    let store = SQLiteStore(
      path: path, sync: sync, queueLimit: queueLimit, database: try Database(connection),
      claim: claim)
    store.writer.withLock { $0 = JoinableThread { store.runWriter() } }
    return store
  }

  /// Every stored session and the stored epoch (nil in a new file). For
  /// start-up: it blocks on the file.
  ///
  /// A row that is out of range or of the wrong type is not a session: it
  /// is moved to `damaged_sessions` with its reason, in one transaction, and
  /// named in `setAside`, so one bad row neither stops the server nor comes
  /// back at the next start. `now` stamps the move.
  public func load(now: Int64 = 0) throws(StoreError) -> (
    epoch: String?, sessions: [StoredSession], setAside: [SetAside]
  ) {
    try withDatabase { database throws(StoreError) in
      let (epoch, sessions, damaged) = try database.load()
      if !damaged.isEmpty { try database.setAside(damaged, now: now) }
      return (epoch, sessions, damaged.map(\.setAside))
    }
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
  /// a lock that is only ever held for list operations.
  ///
  /// A ticketed write is answered `.unavailable` at once, through
  /// `onCompleted` like any other outcome, after `close()` and while
  /// `queueLimit` writes are uncommitted: a disk that stalls then costs
  /// refused commands, not memory without end. A write without a ticket (a
  /// creation, a deletion) has as much room again, since nobody can be told
  /// it failed; past that it is dropped and counted (`writesDropped`).
  public func write(_ write: StoreWrite) {
    let (refusal, handler) = queue.update { queue -> (String?, _) in
      guard !queue.stopping else { return ("the store is closed", queue.onCompleted) }
      let ticketed = !write.isKeptOnFailure
      guard queue.uncommitted < (ticketed ? queue.limit : 2 * queue.limit) else {
        if ticketed { queue.stats.writesRefused += 1 } else { queue.stats.writesDropped += 1 }
        return (
          "the server's storage is \(queue.uncommitted) writes behind; nothing changed",
          queue.onCompleted
        )
      }
      queue.pending.append(write)
      return (nil, nil)
    }
    guard let refusal, let completion = write.completion(failure: refusal) else { return }
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
      stats.queueLimit = queue.limit
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
    closeOutbox()
    queue.update { $0.stopping = true }
    let thread = writer.withLock { thread in
      defer { thread = nil }
      return thread
    }
    thread?.join()
    // Closing the last connection checkpoints the WAL into the main file.
    database.withLock { $0 = nil }
    // Only once the file is closed may another server take it.
    claim.withLock { $0 = nil }
  }

  /// `body` is sent: the connection it works on must not escape the lock.
  func withDatabase<Result: Sendable>(
    _ body: sending (Database) throws(StoreError) -> Result
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
        queue.withLock { $0.beforeCommit }?()
        let started = ContinuousClock.now
        // What the deliverer settled or retried since rides along: no commit of its own.
        let (settled, retries) = outbox.withLock { ($0.book.settled, $0.book.retries) }
        let failure = commit(writes, outbox: (settled, retries))
        if failure == nil, !settled.isEmpty || !retries.isEmpty {
          outbox.withLock { $0.book.stored(settled, retries) }
        }
        let elapsed = ContinuousClock.now - started
        kept = failure == nil ? [] : writes.filter(\.isKeptOnFailure)
        retryWait = failure == nil ? Self.firstRetryWait : min(retryWait * 2, Self.longestRetryWait)
        let completions = writes.compactMap {
          $0.completion(failure: failure.map(Self.outcomeMessage))
        }
        let (handler, recorded) = queue.withLock { queue in
          queue.stats.record(
            batch: writes.count, ticketed: completions.count, kept: kept.count, elapsed: elapsed,
            failure: failure)
          return (queue.onCompleted, queue.onEventsRecorded)
        }
        if !completions.isEmpty { handler?(completions) }
        if failure == nil, writes.contains(where: \.recordsEvents) { recorded?() }
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
  private func commit(
    _ writes: [StoreWrite], outbox: (settled: [Int64], retries: [Int64: OutboxBook.RetryMark])
  ) -> StoreError? {
    do throws(StoreError) {
      try withDatabase { database throws(StoreError) in
        try database.commit(writes, settled: outbox.settled, retries: outbox.retries)
      }
      return nil
    } catch {
      return error
    }
  }
}

/// What the service thread and the writer share.
struct WriteQueue {
  let limit: Int
  var pending: [StoreWrite] = []
  var stopping = false
  var onCompleted: (@Sendable ([StoreCompletion]) -> Void)?
  var onEventsRecorded: (@Sendable () -> Void)?
  var stats = StoreStats()
  /// A test's hook: runs on the writer thread before each commit, so a test
  /// can hold the writer as a stalled disk would.
  var beforeCommit: (@Sendable () -> Void)?

  /// Writes accepted and not yet committed: queued, in the transaction being
  /// committed (which holds the kept ones too), or kept after a failure.
  var uncommitted: Int { pending.count + max(stats.batchInProgress, stats.writesKept) }
}

extension StoreWrite {
  /// A write the hub is not waiting for is kept after a failed commit and
  /// tried again; a ticketed one was reported failed, so the hub never
  /// adopted it and it must not be stored later.
  fileprivate var isKeptOnFailure: Bool {
    switch self {
    case .save(_, _, _, .some, _), .remember: false
    case .save, .delete, .finish: true
    }
  }

  /// The write puts webhook events in the outbox (or may: a finish does
  /// only while the row still holds the record it finished from).
  fileprivate var recordsEvents: Bool {
    switch self {
    case .save(_, _, _, _, let events), .remember(_, _, _, let events): !events.isEmpty
    case .finish: true
    case .delete: false
    }
  }

  fileprivate func completion(failure: String?) -> StoreCompletion? {
    if case .remember(let entry, _, let ticket, _) = self {
      return StoreCompletion(
        ticket: ticket, session: entry.session,
        outcome: failure.map { .unavailable($0) } ?? entry.answer.outcome)
    }
    guard case .save(let session, let record, _, let ticket?, _) = self else { return nil }
    return StoreCompletion(
      ticket: ticket, session: session,
      outcome: failure.map { .unavailable($0) } ?? .applied(record))
  }
}

/// A stored row that start-up could not take as a session, moved aside.
public struct SetAside: Equatable, Sendable {
  /// The row's id, escaped and cut short when it is not a session id, so a
  /// log line shows it safely.
  public let session: String
  public let reason: String

  public init(session: String, reason: String) {
    self.session = session
    self.reason = reason
  }

  static func printable(_ id: [UInt8]) -> String {
    if SessionID.isValid(id) { return String(decoding: id, as: UTF8.self) }
    let text = String(decoding: id.prefix(SessionID.maxLength), as: UTF8.self)
    return text.debugDescription + (id.count > SessionID.maxLength ? "…" : "")
  }
}

/// `BEGIN IMMEDIATE` … `COMMIT` on one connection, rolled back on any failure.
final class Transactions {
  private let connection: Connection
  private let begin: Statement
  private let commit: Statement
  private let rollback: Statement

  init(_ connection: Connection) throws(StoreError) {
    self.connection = connection
    begin = try connection.prepare("BEGIN IMMEDIATE")
    commit = try connection.prepare("COMMIT")
    rollback = try connection.prepare("ROLLBACK")
  }

  func run(_ body: () throws(StoreError) -> Void) throws(StoreError) {
    // A rollback that failed last time would make every BEGIN fail from now on.
    if connection.inTransaction { try rollback.run() }
    try begin.run()
    do throws(StoreError) {
      try body()
      try commit.run()
    } catch {
      // SQLite ends some failed transactions by itself (SQLITE_FULL may).
      if connection.inTransaction { try? rollback.run() }
      throw error
    }
  }
}

/// The open connection and its prepared statements.
final class Database {
  let connection: Connection
  let transactions: Transactions
  let upsertSession: Statement
  let deleteSession: Statement
  let selectSessions: Statement
  let selectMeta: Statement
  let upsertMeta: Statement
  let setAside: Statement
  let deleteSetAside: Statement
  let idempotency: IdempotencyStatements
  let settleSession: Statement
  /// On this same connection: the writer's inserts, and in memory the delivery side's reads.
  let outbox: OutboxDatabase

  init(_ connection: Connection) throws(StoreError) {
    self.connection = connection
    idempotency = try IdempotencyStatements(connection)
    transactions = try Transactions(connection)
    outbox = OutboxDatabase(
      statements: try OutboxStatements(connection), transactions: transactions)
    // Only the row as the run, wait or overtime left it: a command stored
    // since moved its revision on, and came first.
    settleSession = try connection.prepare(
      """
      UPDATE sessions SET phase = ?2, duration = ?3, ends_at = ?4, remaining_ms = ?5,
        finished_label = ?6, seq = ?7, revision = ?8, updated_at = ?9, started_at = ?11,
        timeout_at = ?12, wait_label = ?13, outcome = ?14, overtime = ?15,
        warn_at_seconds = ?16, danger_at_seconds = ?17, over_ms = ?18, message = ?19,
        blackout = ?20
      WHERE id = ?1 AND revision = ?8 AND phase IN ('running', 'waiting', 'overtime')
      """)
    upsertSession = try connection.prepare(
      """
      INSERT INTO sessions (id, phase, duration, ends_at, remaining_ms, finished_label, seq,
                            revision, updated_at, key_hash, started_at, timeout_at, wait_label,
                            outcome, overtime, warn_at_seconds, danger_at_seconds, over_ms,
                            message, blackout)
      VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
      ON CONFLICT (id) DO UPDATE SET
        phase = excluded.phase, duration = excluded.duration, ends_at = excluded.ends_at,
        remaining_ms = excluded.remaining_ms, finished_label = excluded.finished_label,
        seq = excluded.seq, revision = excluded.revision, updated_at = excluded.updated_at,
        key_hash = excluded.key_hash, started_at = excluded.started_at,
        timeout_at = excluded.timeout_at, wait_label = excluded.wait_label,
        outcome = excluded.outcome, overtime = excluded.overtime,
        warn_at_seconds = excluded.warn_at_seconds, danger_at_seconds = excluded.danger_at_seconds,
        over_ms = excluded.over_ms, message = excluded.message, blackout = excluded.blackout
      """)
    deleteSession = try connection.prepare("DELETE FROM sessions WHERE id = ?")
    selectSessions = try connection.prepare(
      """
      SELECT id, phase, duration, ends_at, remaining_ms, finished_label, seq, revision,
             updated_at, key_hash, started_at, timeout_at, wait_label, outcome, overtime,
             warn_at_seconds, danger_at_seconds, over_ms, message, blackout
      FROM sessions ORDER BY id
      """)
    selectMeta = try connection.prepare("SELECT value FROM meta WHERE name = ?")
    // By the id's bytes: a damaged id may be a blob, or text that is not UTF-8.
    setAside = try connection.prepare(
      """
      INSERT INTO damaged_sessions (id, phase, duration, ends_at, remaining_ms, finished_label,
                                    seq, revision, updated_at, key_hash, reason, set_aside_at,
                                    started_at, timeout_at, wait_label, outcome, overtime,
                                    warn_at_seconds, danger_at_seconds, over_ms, message,
                                    blackout)
      SELECT id, phase, duration, ends_at, remaining_ms, finished_label, seq, revision,
             updated_at, key_hash, ?, ?, started_at, timeout_at, wait_label, outcome, overtime,
             warn_at_seconds, danger_at_seconds, over_ms, message, blackout
      FROM sessions WHERE CAST(id AS BLOB) = ?
      """)
    deleteSetAside = try connection.prepare("DELETE FROM sessions WHERE CAST(id AS BLOB) = ?")
    upsertMeta = try connection.prepare(
      "INSERT INTO meta (name, value) VALUES (?, ?) ON CONFLICT (name) DO UPDATE SET value = excluded.value"
    )
  }

  /// `writes`, and what the delivery side settled and retried, in one transaction.
  func commit(
    _ writes: [StoreWrite], settled: [Int64] = [], retries: [Int64: OutboxBook.RetryMark] = [:]
  ) throws(StoreError) {
    try transactions.run { () throws(StoreError) in
      try outbox.statements.store(settled: settled, retries: retries)
      for write in writes {
        switch write {
        case .save(let session, let record, let keyHash, _, let events):
          try upsertSession.run(Self.row(session, record, keyHash))
          for event in events { try outbox.statements.record(event) }
        case .delete(let session):
          try deleteSession.run([.text(session)])
        case .remember(let entry, let keyHash, _, let events):
          if case .applied(let record) = entry.answer {
            try upsertSession.run(Self.row(entry.session, record, keyHash))
          }
          try idempotency.remember(entry)
          for event in events { try outbox.statements.record(event) }
        case .finish(let session, let record, let event):
          try settleSession.run(Self.row(session, record.settled(at: event.timestamp), nil))
          if connection.changes > 0 { try outbox.statements.record(event) }
        }
      }
    }
  }

  func setAside(_ damaged: [(id: [UInt8], setAside: SetAside)], now: Int64) throws(StoreError) {
    try transactions.run { () throws(StoreError) in
      for (id, entry) in damaged {
        try setAside.run([.text(entry.reason), .integer(now), .blob(id)])
        try deleteSetAside.run([.blob(id)])
      }
    }
  }

  static func row(_ session: String, _ record: SessionRecord, _ keyHash: KeyHash?) -> [SQLValue] {
    let record = record.fields
    return [
      .text(session), .text(record.phase.rawValue), .integer(Int64(record.duration)),
      record.endsAt.map { .integer($0) } ?? .null,
      record.remainingMs.map { .integer($0) } ?? .null,
      record.finishedLabel.map { .text($0) } ?? .null,
      // seq and revision are UInt64; SQLite's integers are signed 64-bit.
      .integer(Int64(bitPattern: record.seq)), .integer(Int64(bitPattern: record.revision)),
      .integer(record.updatedAt), keyHash.map { .blob($0.array) } ?? .null,
      record.startedAt.map { .integer($0) } ?? .null,
      record.timeoutAt.map { .integer($0) } ?? .null,
      record.waitLabel.map { .text($0) } ?? .null,
      record.outcome.map { .text($0.rawValue) } ?? .null,
      .integer(record.overtime ? 1 : 0),
      record.warnAtSeconds.map { .integer(Int64($0)) } ?? .null,
      record.dangerAtSeconds.map { .integer(Int64($0)) } ?? .null,
      record.overMs.map { .integer($0) } ?? .null,
      record.message.map { .text($0) } ?? .null,
      .integer(record.blackout ? 1 : 0),
    ]
  }

  /// Every row, read as input: each column's storage class and range is
  /// checked before any of it is used, and a row that fails is handed back
  /// as damaged (with its id's raw bytes, to move it) instead of trapping or
  /// refusing the whole file.
  func load() throws(StoreError) -> (
    epoch: String?, sessions: [StoredSession], damaged: [(id: [UInt8], setAside: SetAside)]
  ) {
    var epoch: String?
    try selectMeta.query([.text("epoch")]) { row in
      // Every page shows the epoch back; one that is not the server's own
      // shape counts as absent, and start-up makes a new one.
      epoch = row.exactText(0).flatMap { Self.isEpoch($0) ? $0 : nil }
    }
    var sessions: [StoredSession] = []
    var damaged: [(id: [UInt8], setAside: SetAside)] = []
    try selectSessions.query { row in
      do throws(RowDamage) {
        sessions.append(try Self.decode(row))
      } catch {
        let id = row.bytes(0)
        damaged.append((id, SetAside(session: SetAside.printable(id), reason: error.reason)))
      }
    }
    return (epoch, sessions, damaged)
  }

  static func isEpoch(_ text: String) -> Bool {
    (1...64).contains(text.utf8.count)
      && text.utf8.allSatisfy { (0x30...0x39).contains($0) || (0x61...0x66).contains($0) }
  }

  struct RowDamage: Error {
    let reason: String
    init(_ reason: String) { self.reason = reason }
  }

  /// One row of `selectSessions` as a session, or why it cannot be one.
  static func decode(_ row: Row) throws(RowDamage) -> StoredSession {
    func integer(_ column: Int32, _ name: String) throws(RowDamage) -> Int64 {
      guard let value = row.exactInteger(column) else {
        throw RowDamage("\(name) holds \(row.type(column).rawValue), not an integer")
      }
      return value
    }
    func optionalInteger(_ column: Int32, _ name: String) throws(RowDamage) -> Int64? {
      row.isNull(column) ? nil : try integer(column, name)
    }
    func counter(_ column: Int32, _ name: String) throws(RowDamage) -> UInt64 {
      let value = try integer(column, name)
      guard value >= 0 else { throw RowDamage("\(name) \(value) is negative") }
      return UInt64(value)
    }
    guard let id = row.exactText(0), SessionID.isValid(id) else {
      throw RowDamage("the id is not a session id")
    }
    guard let phaseText = row.exactText(1), let phase = Phase(rawValue: phaseText) else {
      throw RowDamage("unknown phase")
    }
    func optionalText(_ column: Int32, _ name: String) throws(RowDamage) -> String? {
      guard !row.isNull(column) else { return nil }
      guard let text = row.exactText(column) else {
        throw RowDamage("\(name) holds \(row.type(column).rawValue), not UTF-8 text")
      }
      return text
    }
    let label = try optionalText(5, "finished_label")
    let waitLabel = try optionalText(12, "wait_label")
    var outcome: Outcome?
    if let text = try optionalText(13, "outcome") {
      guard let named = Outcome(rawValue: text) else { throw RowDamage("unknown outcome") }
      outcome = named
    }
    var keyHash: KeyHash?
    if !row.isNull(9) {
      guard row.type(9) == .blob, let hash = KeyHash(row.bytes(9)) else {
        throw RowDamage("key_hash is not 32 bytes of blob")
      }
      keyHash = hash
    }
    // A flag is the integer 0 or 1, as row() writes it: 2, 1.0 or 'yes' is
    // not a value this server stored.
    func flag(_ column: Int32, _ name: String) throws(RowDamage) -> Bool {
      switch try integer(column, name) {
      case 0: return false
      case 1: return true
      case let value: throw RowDamage("\(name) \(value) is not 0 or 1")
      }
    }
    let fields = SessionRecord.Fields(
      phase: phase, duration: Int(try integer(2, "duration")),
      endsAt: try optionalInteger(3, "ends_at"),
      remainingMs: try optionalInteger(4, "remaining_ms"),
      finishedLabel: label, seq: try counter(6, "seq"), revision: try counter(7, "revision"),
      updatedAt: try integer(8, "updated_at"), startedAt: try optionalInteger(10, "started_at"),
      timeoutAt: try optionalInteger(11, "timeout_at"), waitLabel: waitLabel, outcome: outcome,
      overtime: try flag(14, "overtime"),
      warnAtSeconds: try optionalInteger(15, "warn_at_seconds").map { Int($0) },
      dangerAtSeconds: try optionalInteger(16, "danger_at_seconds").map { Int($0) },
      overMs: try optionalInteger(17, "over_ms"), message: try optionalText(18, "message"),
      blackout: try flag(19, "blackout"))
    do throws(SessionRecord.Damage) {
      return StoredSession(id: id, record: try SessionRecord(validating: fields), keyHash: keyHash)
    } catch {
      throw RowDamage(error.reason)
    }
  }

}
