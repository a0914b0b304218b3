import CountdownCore
import Foundation
import Testing

@testable import SQLiteStore

/// A fresh directory under the system's temporary directory, removed by `remove()`.
struct TemporaryDirectory {
  let path: String

  init() throws {
    path = NSTemporaryDirectory() + "sqlite-store-" + UUID().uuidString
    try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
  }

  func file(_ name: String) -> String { path + "/" + name }

  /// The names in the directory, to prove that nothing was created beside a file.
  func names() throws -> [String] {
    try FileManager.default.contentsOfDirectory(atPath: path).sorted()
  }

  func remove() { try? FileManager.default.removeItem(atPath: path) }
}

/// Collects what the writer thread reports, and lets a test wait for it
/// instead of sleeping.
final class Completions: Sendable {
  private let received = Guarded<[StoreCompletion]>([])

  var handler: @Sendable ([StoreCompletion]) -> Void {
    { batch in self.received.update { $0 += batch } }
  }

  /// Waits until `count` completions have arrived (or 30 s, which a test then
  /// fails on), and returns all of them.
  func wait(for count: Int) -> [StoreCompletion] {
    received.wait(until: { $0.count >= count }, timeout: .seconds(30)) { $0 }
  }
}

/// Runs a command; true when it exited 0.
@discardableResult
func run(_ executable: String, _ arguments: [String]) -> Bool {
  let process = Process()
  process.executableURL = URL(fileURLWithPath: executable)
  process.arguments = arguments
  process.standardOutput = FileHandle.nullDevice
  process.standardError = FileHandle.nullDevice
  do { try process.run() } catch { return false }
  process.waitUntilExit()
  return process.terminationStatus == 0
}

/// A tmpfs of its own, for a full disk or a read-only filesystem: CI runs as
/// root, and file permissions do not stop root.
final class Tmpfs {
  let directory: TemporaryDirectory
  var path: String { directory.path }

  /// Whether this machine lets the tests mount a tmpfs (root, no sandbox refusing it).
  static let canMount: Bool = {
    guard let probe = try? Tmpfs(size: "64k") else { return false }
    probe.unmount()
    return true
  }()

  init(size: String) throws {
    directory = try TemporaryDirectory()
    guard run("/bin/mount", ["-t", "tmpfs", "-o", "size=\(size)", "tmpfs", directory.path]) else {
      directory.remove()
      throw MountRefused()
    }
  }

  func remountReadOnly() -> Bool { run("/bin/mount", ["-o", "remount,ro", path]) }

  func unmount() {
    run("/bin/umount", [path])
    directory.remove()
  }

  struct MountRefused: Error {}
}

/// A ticketed save, the way `LocalSequencer` writes one.
func save(_ session: String, _ record: SessionRecord, key: KeyHash? = nil, ticket: UInt64?)
  -> StoreWrite
{
  .save(session: session, record: record, keyHash: key, ticket: ticket.map(Ticket.init))
}

/// Runs raw SQL against a file, to build files in shapes the store would not write.
func rawSQL(_ path: String, _ sql: String) throws {
  try Connection.open(path: path, readOnly: false).execute(sql)
}

func rawUserVersion(_ path: String) throws -> Int64 {
  try Schema.userVersion(Connection.open(path: path, readOnly: true))
}

/// A store on a new file in a fresh directory, its completions collected.
struct Fixture {
  let directory: TemporaryDirectory
  let path: String
  let store: SQLiteStore
  let completions = Completions()

  init(sync: SyncMode = .full, queueLimit: Int = SQLiteStore.defaultQueueLimit) throws {
    directory = try TemporaryDirectory()
    path = directory.file("countdown.db")
    store = try SQLiteStore.open(path: path, sync: sync, queueLimit: queueLimit)
    store.onCompleted = completions.handler
  }

  /// Closes the store (again, if a test already did) and removes the directory.
  func finish() {
    store.close()
    directory.remove()
  }
}
