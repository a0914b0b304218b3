import CountdownCore
import Observability

/// The `outbox` table: one row per webhook event, inserted by the writer
/// thread in the same transaction as the change that caused it
/// (`StoreWrite.save`, `.remember` and `.finish` carry the events), so a
/// change that is durable has its event durable too, and a `kill -9` cannot
/// leave one without the other. The delivery thread reads the rows through
/// its own connection (WAL lets it read beside the writer); a settled row is
/// deleted in the writer's next transaction, so a delivery costs no commit
/// of its own while the server writes anything else.
struct OutboxStatements {
  /// Schema step 5 → 6. `next_at` is 0 until a try fails; then the epoch ms
  /// of the next try, so a restart keeps the backoff. AUTOINCREMENT, so a
  /// row id the delivery side still holds is never a new row's.
  static let createTable = """
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
    """

  let insert: Statement
  let selectDue: Statement
  let delete: Statement
  let reschedule: Statement

  init(_ connection: Connection) throws(StoreError) {
    insert = try connection.prepare(
      "INSERT INTO outbox (event_id, type, session, seq, at, body) VALUES (?, ?, ?, ?, ?, ?)")
    selectDue = try connection.prepare(
      """
      SELECT id, event_id, type, session, seq, at, body, attempts
      FROM outbox WHERE next_at <= ? ORDER BY next_at, id LIMIT ?
      """)
    delete = try connection.prepare("DELETE FROM outbox WHERE id = ?")
    reschedule = try connection.prepare(
      "UPDATE outbox SET attempts = ?, next_at = ? WHERE id = ?")
  }

  /// Inside a transaction: settled rows deleted, retried ones rescheduled.
  func store(settled: [Int64], retries: [Int64: OutboxBook.RetryMark]) throws(StoreError) {
    for row in settled { try delete.run([.integer(row)]) }
    for (row, mark) in retries {
      try reschedule.run([.integer(Int64(mark.attempts)), .integer(mark.at), .integer(row)])
    }
  }

  /// Inside the writer's transaction.
  func record(_ event: WebhookEvent) throws(StoreError) {
    try insert.run([
      .text(event.id), .text(event.type.rawValue), .text(event.session),
      .integer(Int64(bitPattern: event.seq)), .integer(event.timestamp), .blob(event.body),
    ])
  }

  /// One row of `selectDue` as an entry, or why it cannot be one: the row
  /// is input like any other, and a bad one must not reach a receiver.
  static func decode(_ row: Row) throws(Database.RowDamage) -> OutboxEntry {
    guard let id = row.exactText(1), isEventID(id) else {
      throw Database.RowDamage("event_id is not msg_ and 32 hex digits")
    }
    guard let typeText = row.exactText(2), let type = WebhookEventType(rawValue: typeText) else {
      throw Database.RowDamage("unknown event type")
    }
    guard let session = row.exactText(3), SessionID.isValid(session) else {
      throw Database.RowDamage("the session is not a session id")
    }
    guard let seq = row.exactInteger(4), seq >= 0, UInt64(seq) <= SessionRecord.maxCounter else {
      throw Database.RowDamage("seq is not an integer from 0 to 2^53 - 1")
    }
    guard let at = row.exactInteger(5), SessionRecord.epochMsRange.contains(at) else {
      throw Database.RowDamage("at is not an epoch ms a record may hold")
    }
    guard row.type(6) == .blob, let body = row.blob(6), !body.isEmpty,
      body.count <= maxBodyBytes
    else {
      throw Database.RowDamage("body is not a blob of 1 to \(maxBodyBytes) bytes")
    }
    guard let attempts = row.exactInteger(7), (0...maxAttempts).contains(attempts) else {
      throw Database.RowDamage("attempts is not an integer from 0 to \(maxAttempts)")
    }
    let event = WebhookEvent(
      id: id, type: type, session: session, seq: UInt64(seq), timestamp: at, body: body)
    return OutboxEntry(event: event, attempts: Int(attempts), handle: String(row.integer(0)))
  }

  /// Larger than any body the server builds (a state with two 64-character
  /// labels), far smaller than what a damaged row could make it hold.
  static let maxBodyBytes = 64 * 1024
  /// More tries than any retry window makes; a row past it is damaged.
  static let maxAttempts: Int64 = 1_000_000

  static func isEventID(_ text: String) -> Bool {
    let bytes = Array(text.utf8)
    return bytes.count == 36 && bytes.starts(with: Array("msg_".utf8))
      && bytes[4...].allSatisfy { (0x30...0x39).contains($0) || (0x61...0x66).contains($0) }
  }
}

/// The outbox statements on one connection, and its transactions.
final class OutboxDatabase {
  let statements: OutboxStatements
  let transactions: Transactions

  init(statements: OutboxStatements, transactions: Transactions) {
    self.statements = statements
    self.transactions = transactions
  }

  /// The delivery thread's own connection to a file the store has open.
  static func open(path: String, sync: SyncMode) throws(StoreError) -> OutboxDatabase {
    let connection = try Connection.open(path: path, readOnly: false)
    // The writer's commits hold the write lock briefly: wait them out.
    try connection.execute("PRAGMA busy_timeout = 5000")
    try connection.execute("PRAGMA synchronous = \(sync == .full ? "FULL" : "NORMAL")")
    return OutboxDatabase(
      statements: try OutboxStatements(connection), transactions: try Transactions(connection))
  }
}

/// What the delivery side keeps between its calls; all of it is about this
/// run only, so a restart hands every row out again (at least once).
struct OutboxBook: Sendable {
  /// Rows handed to the deliverer and not yet settled, so `take` does not
  /// hand them out twice.
  var handedOut: Set<Int64> = []
  /// Rows that failed their checks, logged once and skipped from then on.
  var damaged: Set<Int64> = []
  /// Settled rows, deleted in the writer's next transaction (and the
  /// retries with them), or by the
  /// delivery side's own once `quietFlush` passed with no commit (and at
  /// `close`): a delivery costs no commit of its own while the server
  /// writes anything else. A crash before then sends them again, which at
  /// least once allows.
  var settled: [Int64] = []
  /// When the oldest row of `settled` was settled.
  var settledSince: ContinuousClock.Instant?
  /// Failed tries to store: attempts and the next try's time, by row.
  var retries: [Int64: RetryMark] = [:]

  struct RetryMark: Equatable, Sendable {
    var attempts: Int
    var at: Int64
  }

  var hasWrites: Bool { !settled.isEmpty || !retries.isEmpty }

  /// How long settled rows wait for a commit of the writer's to ride on.
  var quietFlush = Duration.seconds(5)

  mutating func settle(_ row: Int64) {
    retries[row] = nil
    if settled.isEmpty { settledSince = .now }
    settled.append(row)
  }

  /// A commit stored these: the rows deleted, and the marks (unless a
  /// newer one came meanwhile).
  mutating func stored(_ rows: [Int64], _ marks: [Int64: RetryMark] = [:]) {
    let gone = Set(rows)
    settled.removeAll { gone.contains($0) }
    handedOut.subtract(gone)
    if settled.isEmpty { settledSince = nil }
    for (row, mark) in marks where retries[row] == mark { retries[row] = nil }
  }

  /// Stores the retries since the last flush and, when `all` or the writer
  /// has been quiet for `quietFlush`, the settled rows, in one transaction;
  /// on failure it is all kept to try again.
  mutating func flush(_ database: OutboxDatabase, all: Bool) throws(StoreError) {
    let settling =
      all || settledSince.map { ContinuousClock.now - $0 >= quietFlush } == true
      ? settled : []
    guard !settling.isEmpty || !retries.isEmpty else { return }
    let marks = retries
    try database.transactions.run { () throws(StoreError) in
      try database.statements.store(settled: settling, retries: marks)
    }
    stored(settling, marks)
  }

  /// Up to `limit` due rows not handed out yet, oldest first; damaged rows
  /// are named in the second list (handle and reason) and skipped.
  mutating func take(
    _ database: OutboxDatabase, limit: Int, now: Int64
  ) throws(StoreError) -> ([OutboxEntry], [(handle: Int64, reason: String)]) {
    try flush(database, all: false)
    guard limit > 0 else { return ([], []) }
    let wanted = min(limit, Self.maxTake)
    var entries: [OutboxEntry] = []
    var found: [(handle: Int64, reason: String)] = []
    // Rows handed out or damaged still match the query: read past them,
    // again while damaged rows took the places of good ones.
    while entries.count < wanted {
      let scan = wanted + handedOut.count + damaged.count
      var rows = 0
      try database.statements.selectDue.query([.integer(now), .integer(Int64(scan))]) { row in
        rows += 1
        let handle = row.integer(0)
        guard entries.count < wanted, !handedOut.contains(handle), !damaged.contains(handle)
        else { return }
        do throws(Database.RowDamage) {
          entries.append(try OutboxStatements.decode(row))
          handedOut.insert(handle)
        } catch {
          found.append((handle, error.reason))
          damaged.insert(handle)
        }
      }
      if rows < scan { break }
    }
    return (entries, found)
  }

  /// What one `take` hands out at most, whatever the deliverer asks.
  static let maxTake = 10_000
}

/// The outbox's delivery side and where it reads.
struct OutboxState {
  var book = OutboxBook()
  /// A file's delivery connection, opened on first use; nil in memory,
  /// where the one connection is shared under the store's lock.
  var database: OutboxDatabase?
  /// Set by `close`: the connection is gone and is not opened again.
  var closed = false
}

extension SQLiteStore: WebhookOutbox {
  /// Called by the writer thread after each commit that recorded webhook
  /// events (App: the deliverer's wake). It must not block.
  public var onEventsRecorded: (@Sendable () -> Void)? {
    get { queue.withLock { $0.onEventsRecorded } }
    set { queue.withLock { $0.onEventsRecorded = newValue } }
  }

  public func take(limit: Int, now: Int64) throws -> [OutboxEntry] {
    let (entries, damaged) = try withOutbox { book, database throws(StoreError) in
      try book.take(database, limit: limit, now: now)
    }
    for (handle, reason) in damaged {
      Logger.shared.warn(
        "webhook_event_damaged",
        ["path": LogValue(path), "row": LogValue(Int(handle)), "reason": LogValue(reason)])
    }
    return entries
  }

  public func delivered(_ entry: OutboxEntry) throws { settle(entry) }

  public func dead(_ entry: OutboxEntry) throws { settle(entry) }

  public func retry(_ entry: OutboxEntry, attempts: Int, at: Int64) throws {
    guard let row = Int64(entry.handle) else { return }
    outbox.withLock { state in
      // Within what a row may hold, so a restart reads it back.
      let kept = min(max(0, attempts), Int(OutboxStatements.maxAttempts))
      state.book.retries[row] = OutboxBook.RetryMark(attempts: kept, at: at)
    }
  }

  private func settle(_ entry: OutboxEntry) {
    guard let row = Int64(entry.handle) else { return }
    outbox.withLock { $0.book.settle(row) }
  }

  /// Stores what the delivery side settled since its last `take`, and
  /// closes its connection. `close` calls it, after the deliverer stopped.
  func closeOutbox() {
    let pending = outbox.withLock { !$0.closed && $0.book.hasWrites }
    if pending {
      flushOnClose()
    }
    outbox.withLock { state in
      state.closed = true
      state.database = nil
    }
  }

  private func flushOnClose() {
    do throws(StoreError) {
      try withOutbox { book, database throws(StoreError) in try book.flush(database, all: true) }
    } catch {
      // Not lost: the rows stay, and the next run delivers them again.
      Logger.shared.warn(
        "webhook_outbox_not_flushed", ["path": LogValue(path), "error": LogValue(error.message)])
    }
  }

  /// Runs `body` on the delivery side's book and connection, under the
  /// outbox's lock (and, in memory, the store's).
  private func withOutbox<Result: Sendable>(
    _ body: @Sendable (inout OutboxBook, OutboxDatabase) throws(StoreError) -> Result
  ) throws(StoreError) -> Result {
    let outcome: Swift.Result<Result, StoreError> = outbox.withLock { state in
      do throws(StoreError) {
        guard !state.closed else { return .failure(closedError) }
        if path == Self.inMemory {
          let book = state.book
          let (result, updated) = try withDatabase { database throws(StoreError) in
            var book = book
            let result = try body(&book, database.outbox)
            return (result, book)
          }
          state.book = updated
          return .success(result)
        }
        if state.database == nil {
          state.database = try OutboxDatabase.open(path: path, sync: sync)
        }
        guard let database = state.database else { return .failure(closedError) }
        return .success(try body(&state.book, database))
      } catch {
        return .failure(error)
      }
    }
    return try outcome.get()
  }

  private var closedError: StoreError {
    StoreError(.closed, path: path, message: "the store is closed")
  }
}
