import Foundation
import Testing

/// The built `countdown-server`, started on a loopback port for one test, as
/// IntegrationTests/e2e/serverproc.py starts it: `--port 0` (or a given port), the port read from the
/// one line it prints on stdout, a fresh SQLite file unless the test passes `--data`.
final class ServerProcess: @unchecked Sendable {
  static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
    .deletingLastPathComponent().deletingLastPathComponent()
  static var binary: URL {
    if let path = ProcessInfo.processInfo.environment["COUNTDOWN_SERVER_BIN"] {
      return URL(fileURLWithPath: path)
    }
    return root.appendingPathComponent(".build/debug/countdown-server")
  }

  let process = Process()
  private let exited = DispatchSemaphore(value: 0)
  let port: Int
  let dataDir: URL
  let stderrPath: URL

  var base: URL { URL(string: "http://127.0.0.1:\(port)/")! }

  /// A new directory for a test's database, removed by nobody: the OS's tmp cleaner owns it.
  static func freshDataDir() throws -> URL {
    let dir = FileManager.default.temporaryDirectory.appendingPathComponent(
      "countdown-client-test-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
    return dir
  }

  init(_ extra: [String] = [], port: Int = 0, dataDir: URL? = nil) throws {
    let binary = Self.binary
    try #require(
      FileManager.default.isExecutableFile(atPath: binary.path),
      "countdown-server not built at \(binary.path) (run swift build)")
    self.dataDir = try dataDir ?? Self.freshDataDir()
    stderrPath = self.dataDir.appendingPathComponent("stderr-\(UUID().uuidString).log")
    try #require(FileManager.default.createFile(atPath: stderrPath.path, contents: nil))
    let out = Pipe()
    process.executableURL = binary
    process.currentDirectoryURL = Self.root
    var args = ["--host", "127.0.0.1", "--port", String(port), "--log-format", "json"]
    if !extra.contains("--public") {
      args += ["--public", Self.root.appendingPathComponent("Public").path]
    }
    if !extra.contains("--data") {
      args += ["--data", self.dataDir.appendingPathComponent("countdown.db").path]
    }
    process.arguments = args + extra
    process.standardInput = FileHandle.nullDevice
    process.standardOutput = out
    process.standardError = try FileHandle(forWritingTo: stderrPath)
    let exited = self.exited
    process.terminationHandler = { _ in exited.signal() }
    try process.run()

    // Read the listening line on a thread of its own, so a silent server fails the test
    // after the timeout instead of hanging it.
    let reader = out.fileHandleForReading
    let found = LockedBox<String?>(nil)
    let done = DispatchSemaphore(value: 0)
    Thread.detachNewThread {
      var buffer = Data()
      while true {
        let chunk = reader.availableData
        if chunk.isEmpty { break }
        buffer.append(chunk)
        if let nl = buffer.firstIndex(of: 0x0A) {
          found.set(String(decoding: buffer[..<nl], as: UTF8.self))
          done.signal()
          // Keep draining, so the server never blocks on a full pipe.
          while !reader.availableData.isEmpty {}
          return
        }
      }
      done.signal()
    }
    _ = done.wait(timeout: .now() + 20)
    let line = found.get() ?? ""
    let prefix = "countdown-server listening on http://127.0.0.1:"
    guard line.hasPrefix(prefix), let p = Int(line.dropFirst(prefix.count).dropLast()), p > 0
    else {
      process.terminate()
      let log = (try? String(contentsOf: stderrPath, encoding: .utf8)) ?? ""
      throw ServerError.noListeningLine(line, log)
    }
    self.port = p
  }

  enum ServerError: Error { case noListeningLine(String, String) }

  /// SIGKILL, as a crash: no drain, no clean close of any stream. (Not SIGTERM: a child
  /// that Foundation's Process spawns from a concurrency thread inherits that thread's
  /// blocked signals, so the server would never see a SIGTERM.)
  func kill() {
    guard process.isRunning else { return }
    Foundation.kill(process.processIdentifier, SIGKILL)
    // Not waitUntilExit(), which spins a core on Linux while it waits.
    _ = exited.wait(timeout: .now() + 10)
  }

  deinit { kill() }
}

/// A value shared with the reader thread.
final class LockedBox<T>: @unchecked Sendable {
  private let lock = NSLock()
  private var value: T
  init(_ value: T) { self.value = value }
  func get() -> T { lock.withLock { value } }
  func set(_ v: T) { lock.withLock { value = v } }
}
