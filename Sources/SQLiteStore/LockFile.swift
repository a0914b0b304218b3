#if canImport(Glibc)
  import Glibc
#endif

/// The claim one server holds on a database file: an exclusive `flock` on
/// `<file>.lock` beside it, holding the server's pid, for as long as the store
/// is open. SQLite's own locks are per transaction, so two servers on one
/// file would each commit happily and show sessions the other commands.
///
/// A lock file rather than a lock on the database itself: closing any
/// descriptor of the database would drop SQLite's POSIX locks, and backups
/// with the sqlite3 shell keep working. `flock` belongs to the open file, so
/// a second store in the same process is refused too; the kernel drops it
/// when the process dies, however it dies, so a crash leaves no stale claim.
final class LockFile {
  let path: String
  private let descriptor: Int32

  private init(path: String, descriptor: Int32) {
    self.path = path
    self.descriptor = descriptor
  }

  deinit { close(descriptor) }

  /// The lock file's name for `database`: beside the file the path resolves
  /// to, so a symbolic link to the database meets the same lock.
  static func path(for database: String) -> String {
    guard let resolved = realpath(database, nil) else { return database + ".lock" }
    defer { free(resolved) }
    return String(cString: resolved) + ".lock"
  }

  /// Takes the lock for `database` without waiting, or says who holds it.
  static func claim(_ database: String) throws(StoreError) -> LockFile {
    let path = path(for: database)
    let descriptor = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
    guard descriptor >= 0 else {
      let reason = String(cString: strerror(errno))
      throw StoreError(
        .cannotOpen, path: database, message: "cannot open its lock file \(path) (\(reason))")
    }
    guard flock(descriptor, LOCK_EX | LOCK_NB) == 0 else {
      let refusal = errno
      let holder = readPid(descriptor)
      close(descriptor)
      guard refusal == EWOULDBLOCK else {
        throw StoreError(
          .cannotOpen, path: database,
          message: "cannot lock \(path) (\(String(cString: strerror(refusal))))")
      }
      let who = holder.map { "another process (pid \($0))" } ?? "another process"
      throw StoreError(
        .inUse, path: database,
        message: "\(who) holds it (lock file \(path)); one server per database file")
    }
    let pid = Array("\(getpid())\n".utf8)
    // The pid is for the message a second server prints; the lock holds without it.
    if ftruncate(descriptor, 0) == 0 { _ = pwrite(descriptor, pid, pid.count, 0) }
    return LockFile(path: path, descriptor: descriptor)
  }

  private static func readPid(_ descriptor: Int32) -> Int32? {
    var buffer = [UInt8](repeating: 0, count: 16)
    let count = pread(descriptor, &buffer, buffer.count, 0)
    guard count > 0 else { return nil }
    let digits = buffer.prefix(count).prefix { (0x30...0x39).contains($0) }
    return Int32(String(decoding: digits, as: UTF8.self)).flatMap { $0 > 0 ? $0 : nil }
  }
}
