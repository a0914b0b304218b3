import CountdownCore
import Foundation
import Libev
import Synchronization
import Testing

@testable import RedisCluster

/// Every redis-server a test started and has not stopped: killed when the
/// test process exits, so a test that leaks its RedisProcess leaves no
/// server behind.
private let running = Mutex<Set<pid_t>>([])
private let reaper: Void = {
  atexit {
    for pid in running.withLock({ $0 }) { kill(pid, SIGKILL) }
  }
}()

/// A real redis-server of the test's own, on a unix socket in a fresh
/// directory, so tests never race for a TCP port. `stop()` and `start()`
/// again keep the directory (and with AOF, the data).
final class RedisProcess {
  let directory: String
  let appendOnly: Bool
  private var pid: pid_t?

  var socket: String { directory + "/redis.sock" }
  var address: RedisAddress { RedisAddress(endpoint: .unix(path: socket)) }

  init(appendOnly: Bool = false) throws {
    // As the server does: a hiredis write to a Redis a test stopped must
    // fail with EPIPE, not end the test process without a word.
    signal(SIGPIPE, SIG_IGN)
    directory = NSTemporaryDirectory() + "redis-cluster-" + UUID().uuidString
    self.appendOnly = appendOnly
    try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    try start()
  }

  deinit {
    stop()
    try? FileManager.default.removeItem(atPath: directory)
  }

  /// Starts the server and returns once it says it accepts connections.
  /// posix_spawn and waitpid rather than Foundation's Process, whose
  /// waitUntilExit can hang on Linux.
  func start() throws {
    var pipe: [Int32] = [0, 0]
    guard Glibc.pipe(&pipe) == 0 else { throw RedisError(.disconnected, "pipe failed") }
    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    // Its stderr too: an inherited stderr is `swift test`'s pipe, which a
    // server alive past the test process would hold open, and `swift test`
    // would wait for it forever.
    posix_spawn_file_actions_adddup2(&actions, pipe[1], 1)
    posix_spawn_file_actions_adddup2(&actions, pipe[1], 2)
    posix_spawn_file_actions_addclose(&actions, pipe[0])
    let arguments = [
      "redis-server", "--port", "0", "--unixsocket", socket, "--dir", directory, "--save", "",
      "--appendonly", appendOnly ? "yes" : "no", "--appendfsync", "always",
    ]
    // Test threads block signals, and a child inherits the mask: without
    // this, Redis would never see SIGTERM.
    var attributes = posix_spawnattr_t()
    posix_spawnattr_init(&attributes)
    var none = sigset_t()
    sigemptyset(&none)
    posix_spawnattr_setsigmask(&attributes, &none)
    posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK))
    defer { posix_spawnattr_destroy(&attributes) }
    var argv = arguments.map { strdup($0) } + [nil]
    var pid: pid_t = 0
    let spawned = posix_spawn(&pid, "/usr/bin/redis-server", &actions, &attributes, &argv, environ)
    argv.forEach { free($0) }
    posix_spawn_file_actions_destroy(&actions)
    close(pipe[1])
    guard spawned == 0 else { throw RedisError(.disconnected, "cannot start redis-server") }
    self.pid = pid
    _ = reaper
    running.withLock { _ = $0.insert(pid) }
    // Redis logs to stdout; its "ready" line is the event to wait for. Then
    // a thread keeps draining the pipe so Redis never blocks on its log.
    let reader = pipe[0]
    var seen = ""
    var buffer = [UInt8](repeating: 0, count: 4096)
    while !seen.contains("ready to accept connections") {
      let count = read(reader, &buffer, buffer.count)
      guard count > 0 else {
        close(reader)
        throw RedisError(.disconnected, "redis-server exited: \(seen)")
      }
      seen += String(decoding: buffer[0..<count], as: UTF8.self)
    }
    Thread.detachNewThread {
      var sink = [UInt8](repeating: 0, count: 4096)
      while read(reader, &sink, sink.count) > 0 {}
      close(reader)
    }
  }

  /// SIGTERM and wait; or SIGKILL for a crash.
  func stop(signal: Int32 = SIGTERM) {
    guard let pid else { return }
    kill(pid, signal)
    var status: Int32 = 0
    waitpid(pid, &status, 0)
    running.withLock { _ = $0.remove(pid) }
    self.pid = nil
  }

  func blocking() throws -> BlockingRedis { try BlockingRedis(address, timeoutMs: 2000) }
}

/// A viewer that reads every frame the hub has for it.
struct Viewer {
  let id: ConnectionID
  var state: [String: Any] = [:]
  var messages: [[String: Any]] = []
  var seq: Int64 = 0

  init(_ hub: Hub, _ session: String, key: String? = nil, since: UInt64? = nil) {
    guard
      case .joined(let id) = hub.connect(
        session: session, key: key, since: since, peer: "192.0.2.1", now: now())
    else {
      Issue.record("join refused")
      self.id = -1
      return
    }
    self.id = id
  }

  mutating func read(_ hub: Hub) {
    while let frame = hub.nextFrame(for: id, now: now()) {
      guard let parsed = try? JSONSerialization.jsonObject(with: Data(frame)),
        let message = parsed as? [String: Any]
      else { continue }
      messages.append(message)
      if let seq = message["seq"] as? Int64 { self.seq = seq }
      if message["type"] as? String == "snapshot", let state = message["state"] as? [String: Any] {
        self.state = state
      }
      if message["type"] as? String == "patch", let patch = message["patch"] as? [String: Any] {
        for (field, value) in patch {
          if value is NSNull { state[field] = nil } else { state[field] = value }
        }
      }
    }
  }

  var hasSnapshot: Bool { messages.contains { $0["type"] as? String == "snapshot" } }

  func reply(_ id: Int) -> [String: Any]? {
    messages.last {
      ($0["type"] as? String == "ack" || $0["type"] as? String == "error")
        && ($0["id"] as? Int) == id
    }
  }

  func send(_ hub: Hub, _ json: String) {
    hub.receive(Array(json.utf8), from: id, now: now())
  }
}

func now() -> Int64 { SystemClock().nowMilliseconds() }

/// One "instance": a hub and its sequencer, on the test's loop and thread.
final class Instance {
  let hub: Hub
  let sequencer: RedisSequencer

  init(
    _ redis: RedisProcess, loop: LibevLoop, epoch: String, control: ControlMode = .open,
    timeoutMs: Int64 = 2000, checkIntervalMs: Int64 = 5000, heartbeatTTLMs: Int64 = 3000,
    recordsEvents: Bool = false, idempotencyLimits: IdempotencyLimits = IdempotencyLimits(),
    commandsPerSecond: Double = 20
  ) {
    var settings = RedisSequencer.Settings(address: redis.address, epoch: epoch)
    settings.recordsEvents = recordsEvents
    settings.idempotencyLimits = idempotencyLimits
    settings.timeoutMs = timeoutMs
    settings.checkIntervalMs = checkIntervalMs
    settings.heartbeatTTLMs = heartbeatTTLMs
    sequencer = RedisSequencer(settings: settings)
    var config = HubConfig()
    config.control = control
    config.recordsEvents = recordsEvents
    config.commandsPerSecond = commandsPerSecond
    hub = Hub(config: config, epoch: epoch, sequencer: sequencer)
    sequencer.hub = hub
    sequencer.start(on: loop)
  }

  deinit { sequencer.stop() }
}

/// Runs the loop until `done`, failing the test after `seconds`.
func waitFor(
  _ loop: LibevLoop, seconds: Int64 = 10, _ what: String,
  sourceLocation: SourceLocation = #_sourceLocation, until done: () -> Bool
) {
  if !loop.run(timeoutMs: seconds * 1000, until: done) {
    Issue.record("timed out waiting for \(what)", sourceLocation: sourceLocation)
  }
}

/// A relay on a unix socket between instances and redis-server, so that a
/// test can lose what one direction carries: a command that reaches Redis
/// while its reply never comes back, or one that never reaches Redis.
final class LinkRelay: @unchecked Sendable {
  enum Mode: Int {
    case forward, dropReplies, dropCommands
  }

  let path: String
  let upstream: String
  var address: RedisAddress { RedisAddress(endpoint: .unix(path: path)) }
  private let listener: Int32
  private let lock = NSLock()
  private var mode = Mode.forward
  private var dropped = 0

  init(to redis: RedisProcess) throws {
    upstream = redis.socket
    path = redis.directory + "/relay.sock"
    listener = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
    guard Self.withAddress(path, { bind(listener, $0, $1) }) == 0, listen(listener, 16) == 0
    else { throw RedisError(.disconnected, "relay: cannot listen on \(path)") }
    Thread.detachNewThread { [self] in accepting() }
  }

  deinit {
    shutdown(listener, Int32(SHUT_RDWR))
    close(listener)
  }

  func set(_ mode: Mode) { lock.withLock { self.mode = mode } }

  /// Bytes thrown away since the relay started.
  var droppedBytes: Int { lock.withLock { dropped } }

  private func accepting() {
    while true {
      let client = accept(listener, nil, nil)
      guard client >= 0 else { return }
      let server = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
      guard Self.withAddress(upstream, { connect(server, $0, $1) }) == 0 else {
        close(client)
        close(server)
        continue
      }
      let ends = Ends()
      Thread.detachNewThread { [self] in pump(from: client, to: server, replies: false, ends) }
      Thread.detachNewThread { [self] in pump(from: server, to: client, replies: true, ends) }
    }
  }

  /// Both pumps of a link: the second to finish closes the descriptors.
  private final class Ends: @unchecked Sendable {
    let lock = NSLock()
    var finished = 0
  }

  private func pump(from source: Int32, to target: Int32, replies: Bool, _ ends: Ends) {
    var buffer = [UInt8](repeating: 0, count: 65536)
    while true {
      let count = read(source, &buffer, buffer.count)
      guard count > 0 else { break }
      let drop = lock.withLock {
        let drop = mode == (replies ? .dropReplies : .dropCommands)
        if drop { dropped += count }
        return drop
      }
      if drop { continue }
      var written = 0
      while written < count {
        let n = buffer[written..<count].withUnsafeBytes {
          send(target, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL))
        }
        guard n > 0 else { break }
        written += n
      }
    }
    shutdown(source, Int32(SHUT_RDWR))
    shutdown(target, Int32(SHUT_RDWR))
    let last = ends.lock.withLock {
      ends.finished += 1
      return ends.finished == 2
    }
    if last {
      close(source)
      close(target)
    }
  }

  private static func withAddress(
    _ path: String, _ body: (UnsafePointer<sockaddr>, socklen_t) -> Int32
  ) -> Int32 {
    var address = sockaddr_un()
    address.sun_family = sa_family_t(AF_UNIX)
    let bytes = Array(path.utf8)
    withUnsafeMutableBytes(of: &address.sun_path) { raw in
      for (index, byte) in bytes.prefix(raw.count - 1).enumerated() { raw[index] = byte }
    }
    return withUnsafePointer(to: &address) {
      $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
        body($0, socklen_t(MemoryLayout<sockaddr_un>.size))
      }
    }
  }
}
