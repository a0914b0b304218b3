import CSQLite

#if canImport(Glibc)
  import Glibc
#endif

/// Every way the store fails, as one type: SQLite's result codes are turned
/// into it in one place (`init(resultCode:…)`), so callers match on `kind`
/// and show `description`, which names the file.
public struct StoreError: Error, Equatable, Sendable, CustomStringConvertible {
  public enum Kind: String, Equatable, Sendable {
    /// The file exists but is not a SQLite database.
    case notADatabase
    /// The file is a SQLite database, but not one of this server's.
    case foreign
    /// The file's schema version is newer than this build understands.
    case newerSchema
    /// The file or its directory cannot be written.
    case readOnly
    /// The disk or the filesystem's quota is full.
    case full
    /// The file cannot be opened or created (missing directory, permissions…).
    case cannotOpen
    /// The database is damaged, or holds a row this build cannot read.
    case corrupt
    /// Another connection holds a lock SQLite gave up waiting for.
    case busy
    /// A read or write failed below SQLite.
    case io
    /// Another server (another store) has the file open.
    case inUse
    /// Used after `close()`.
    case closed
    /// Any other SQLite result.
    case other
  }

  public let kind: Kind
  /// The database file's path, as given to `open`.
  public let path: String
  /// What went wrong, in words, without the path.
  public let message: String
  /// SQLite's extended result code, or nil where SQLite did not fail.
  public let resultCode: Int32?

  public init(_ kind: Kind, path: String, message: String, resultCode: Int32? = nil) {
    self.kind = kind
    self.path = path
    self.message = message
    self.resultCode = resultCode
  }

  /// A failed SQLite call. `detail` is SQLite's own message; `systemErrno`
  /// (from `sqlite3_system_errno`) refines an open failure into "read-only".
  init(resultCode: Int32, path: String, detail: String, systemErrno: Int32 = 0) {
    let kind: Kind
    switch resultCode & 0xff {
    case SQLITE_NOTADB: kind = .notADatabase
    case SQLITE_READONLY: kind = .readOnly
    case SQLITE_FULL: kind = .full
    case SQLITE_CANTOPEN:
      kind = systemErrno == EROFS || systemErrno == EACCES ? .readOnly : .cannotOpen
    case SQLITE_CORRUPT: kind = .corrupt
    case SQLITE_BUSY, SQLITE_LOCKED: kind = .busy
    case SQLITE_IOERR: kind = systemErrno == ENOSPC ? .full : .io
    default: kind = .other
    }
    var message = detail
    if systemErrno != 0, let text = strerror(systemErrno) {
      message += " (\(String(cString: text)))"
    }
    self.init(kind, path: path, message: message, resultCode: resultCode)
  }

  public var description: String {
    switch kind {
    case .notADatabase: "\(path) is not a SQLite database: \(message)"
    case .newerSchema, .foreign, .closed: "\(path): \(message)"
    case .readOnly: "\(path) cannot be written: \(message)"
    case .full: "\(path): the disk is full: \(message)"
    case .cannotOpen: "\(path) cannot be opened or created: \(message)"
    case .inUse: "\(path) is in use: \(message)"
    default: "\(path): \(message)"
    }
  }
}
