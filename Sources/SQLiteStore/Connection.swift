import CSQLite

/// One SQLite connection. Every raw pointer into SQLite lives in this file:
/// the rest of the module sees connections, statements and `StoreError`.
///
/// Not thread-safe by itself: its owner serialises use (the store's lock).
final class Connection {
  let path: String
  private let handle: OpaquePointer

  private init(path: String, handle: OpaquePointer) {
    self.path = path
    self.handle = handle
  }

  /// Opens `path`. Read-only never creates the file; read-write creates it.
  static func open(path: String, readOnly: Bool) throws(StoreError) -> Connection {
    var handle: OpaquePointer?
    // No shared cache, no URI parsing: the path is a plain file name or
    // ":memory:". NOMUTEX because the owner already serialises every call, so
    // SQLite's own per-call mutex would be paid on every bind and step for nothing.
    let flags =
      (readOnly ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE)
      | SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_PRIVATECACHE
    let code = sqlite3_open_v2(path, &handle, flags, nil)
    guard code == SQLITE_OK, let handle else {
      // A failed open may still hand back a handle, which only carries the message.
      let detail = handle.map { String(cString: sqlite3_errmsg($0)) } ?? "out of memory"
      let systemErrno = handle.map { sqlite3_system_errno($0) } ?? 0
      sqlite3_close_v2(handle)
      throw StoreError(resultCode: code, path: path, detail: detail, systemErrno: systemErrno)
    }
    sqlite3_extended_result_codes(handle, 1)
    return Connection(path: path, handle: handle)
  }

  deinit {
    // close_v2 waits for any statement still alive; statements keep their
    // connection alive, so by now they are all finalized.
    sqlite3_close_v2(handle)
  }

  /// True when SQLite opened the main database read-only (for example a file
  /// on a read-only mount, which a read-write open silently falls back to).
  var isReadOnly: Bool { sqlite3_db_readonly(handle, "main") == 1 }

  /// True between BEGIN and COMMIT/ROLLBACK; SQLite may end a transaction by
  /// itself after some errors (SQLITE_FULL among them).
  var inTransaction: Bool { sqlite3_get_autocommit(handle) == 0 }

  /// Rows the last INSERT, UPDATE or DELETE on this connection changed.
  var changes: Int64 { sqlite3_changes64(handle) }

  /// Runs SQL without parameters and without rows (pragmas, DDL, BEGIN…).
  func execute(_ sql: String) throws(StoreError) {
    try check(sqlite3_exec(handle, sql, nil, nil, nil))
  }

  func prepare(_ sql: String) throws(StoreError) -> Statement {
    var statement: OpaquePointer?
    try check(
      sqlite3_prepare_v3(handle, sql, -1, UInt32(SQLITE_PREPARE_PERSISTENT), &statement, nil))
    guard let statement else {
      throw StoreError(.other, path: path, message: "no statement in: \(sql)")
    }
    return Statement(connection: self, handle: statement)
  }

  /// Turns a result code into `StoreError`, with SQLite's message for it.
  fileprivate func check(_ code: Int32) throws(StoreError) {
    guard code != SQLITE_OK && code != SQLITE_ROW && code != SQLITE_DONE else { return }
    throw StoreError(
      resultCode: code, path: path, detail: String(cString: sqlite3_errmsg(handle)),
      systemErrno: sqlite3_system_errno(handle))
  }
}

/// A value bound to a statement's `?`.
enum SQLValue: Equatable {
  case integer(Int64)
  case text(String)
  case blob([UInt8])
  case null
}

/// One prepared statement, reused for the connection's lifetime.
final class Statement {
  private let connection: Connection
  private let handle: OpaquePointer

  fileprivate init(connection: Connection, handle: OpaquePointer) {
    self.connection = connection
    self.handle = handle
  }

  deinit { sqlite3_finalize(handle) }

  /// Runs the statement with `values` to completion; for writes.
  func run(_ values: [SQLValue] = []) throws(StoreError) {
    try bind(values)
    defer { sqlite3_reset(handle) }
    while try step() {}
  }

  /// Runs the statement and hands each row to `row`; for reads.
  func query(_ values: [SQLValue] = [], row: (Row) throws(StoreError) -> Void) throws(StoreError) {
    try bind(values)
    defer { sqlite3_reset(handle) }
    while try step() { try row(Row(handle: handle)) }
  }

  private func bind(_ values: [SQLValue]) throws(StoreError) {
    sqlite3_reset(handle)
    sqlite3_clear_bindings(handle)
    for (offset, value) in values.enumerated() {
      let index = Int32(offset + 1)
      let code: Int32
      switch value {
      case .integer(let number): code = sqlite3_bind_int64(handle, index, number)
      case .text(let text):
        var text = text
        code = text.withUTF8 {
          // Past Int32 SQLite could not take it anyway; TOOBIG, not a trap.
          guard let count = Int32(exactly: $0.count) else { return SQLITE_TOOBIG }
          return sqlite3_bind_text(handle, index, $0.baseAddress, count, cds_sqlite_transient())
        }
      case .blob(let bytes):
        code = bytes.withUnsafeBytes {
          guard let count = Int32(exactly: $0.count) else { return SQLITE_TOOBIG }
          return sqlite3_bind_blob(handle, index, $0.baseAddress, count, cds_sqlite_transient())
        }
      case .null: code = sqlite3_bind_null(handle, index)
      }
      try connection.check(code)
    }
  }

  /// True while there is a row to read.
  private func step() throws(StoreError) -> Bool {
    let code = sqlite3_step(handle)
    try connection.check(code)
    return code == SQLITE_ROW
  }
}

/// SQLite's storage classes: a column declared INTEGER may still hold any of them.
enum ColumnType: String { case integer, real, text, blob, null }

/// The current row of a statement, valid only inside `query`'s closure.
struct Row {
  fileprivate let handle: OpaquePointer

  func isNull(_ column: Int32) -> Bool { sqlite3_column_type(handle, column) == SQLITE_NULL }

  /// The value's storage class as SQLite holds it, before any conversion.
  func type(_ column: Int32) -> ColumnType {
    switch sqlite3_column_type(handle, column) {
    case SQLITE_INTEGER: .integer
    case SQLITE_FLOAT: .real
    case SQLITE_TEXT: .text
    case SQLITE_BLOB: .blob
    default: .null
    }
  }

  /// The integer only when it is stored as one: SQLite would turn 'abc' into
  /// 0 and 1e308 into Int64.max without a word.
  func exactInteger(_ column: Int32) -> Int64? {
    type(column) == .integer ? sqlite3_column_int64(handle, column) : nil
  }

  /// The text only when it is stored as text and is valid UTF-8: a repair
  /// would show every viewer something nobody wrote.
  func exactText(_ column: Int32) -> String? {
    guard type(column) == .text else { return nil }
    return String(validating: bytes(column), as: UTF8.self)
  }

  /// The value's bytes as SQLite hands out text or a blob, whatever it holds.
  func bytes(_ column: Int32) -> [UInt8] {
    let pointer = sqlite3_column_blob(handle, column)
    let count = Int(sqlite3_column_bytes(handle, column))
    guard let pointer, count > 0 else { return [] }
    return Array(UnsafeRawBufferPointer(start: pointer, count: count))
  }

  func integer(_ column: Int32) -> Int64 { sqlite3_column_int64(handle, column) }

  func text(_ column: Int32) -> String? {
    guard let text = sqlite3_column_text(handle, column) else { return nil }
    // By length, not up to a NUL: a label may hold any character.
    let count = Int(sqlite3_column_bytes(handle, column))
    return String(decoding: UnsafeRawBufferPointer(start: text, count: count), as: UTF8.self)
  }

  func blob(_ column: Int32) -> [UInt8]? {
    guard !isNull(column) else { return nil }
    // Ask for the pointer first: SQLite's rule for column_blob then column_bytes.
    let pointer = sqlite3_column_blob(handle, column)
    let count = Int(sqlite3_column_bytes(handle, column))
    guard let pointer, count > 0 else { return [] }
    return Array(UnsafeRawBufferPointer(start: pointer, count: count))
  }
}
