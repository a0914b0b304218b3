// store-bench: SQLiteStore alone, no sockets. Closed loop: each of N clients
// queues a ticketed save, and queues its next one when the writer reports the
// last one stored, so N writes are always outstanding and the writer groups
// whatever has queued while it committed.
//
//   swift run -c release store-bench [--seconds S] [--dir DIR] [--clients 1,100,1000]
//
// Prints one row per mode and client count: saves/s, commits/s, writes per
// commit, queue-to-completion latency (p50, p99, max) in ms, and the time
// write() calls took in µs (p99, max): what the service thread pays. On a
// loaded machine the max includes the caller being preempted.

import CountdownCore
import SQLiteStore
import Synchronization

#if canImport(Glibc)
  import Glibc
#endif

struct Options {
  var seconds = 2.0
  var directory = "/var/tmp"
  var clients = [1, 100, 1000]

  init(_ arguments: ArraySlice<String>) {
    var arguments = arguments
    while let flag = arguments.popFirst() {
      guard let value = arguments.popFirst() else { Self.usage() }
      switch flag {
      case "--seconds":
        guard let number = Double(value) else { Self.usage() }
        seconds = number
      case "--dir": directory = value
      case "--clients":
        let counts = value.split(separator: ",").compactMap { Int($0) }
        guard !counts.isEmpty, counts.allSatisfy({ $0 > 0 }) else { Self.usage() }
        clients = counts
      default: Self.usage()
      }
    }
  }

  static func usage() -> Never {
    print("usage: store-bench [--seconds S] [--dir DIR] [--clients 1,100,1000]")
    exit(2)
  }
}

/// What the completion handler and the main thread share.
struct Loop {
  var started: [UInt64: ContinuousClock.Instant] = [:]
  var latencies: [Duration] = []
  var nextTicket: UInt64 = 0
  var stopping = false
  var outstanding = 0
  var writeTimes: [Duration] = []
}

final class Run: Sendable {
  let store: SQLiteStore
  let loop = Mutex(Loop())

  init(store: SQLiteStore) { self.store = store }

  /// Queues one save as a client would cause it, timing the write() call.
  func issue() {
    let ticket = loop.withLock { loop -> UInt64? in
      guard !loop.stopping else { return nil }
      loop.nextTicket += 1
      loop.outstanding += 1
      loop.started[loop.nextTicket] = .now
      return loop.nextTicket
    }
    guard let ticket else { return }
    let record = SessionRecord(
      .running(endsAt: 1_796_024_364_226 + Int64(ticket)), duration: 60, seq: ticket,
      revision: ticket, updatedAt: 1_796_024_304_226)
    let before = ContinuousClock.now
    store.write(
      .save(session: "s\(ticket % 1000)", record: record, keyHash: nil, ticket: Ticket(ticket)))
    let took = ContinuousClock.now - before
    loop.withLock { $0.writeTimes.append(took) }
  }

  func completed(_ completions: [StoreCompletion]) {
    let now = ContinuousClock.now
    loop.withLock { loop in
      for completion in completions {
        if let started = loop.started.removeValue(forKey: completion.ticket.value) {
          loop.latencies.append(now - started)
        }
        loop.outstanding -= 1
      }
    }
    for _ in completions { issue() }
  }
}

func milliseconds(_ duration: Duration) -> Double {
  let (seconds, attoseconds) = duration.components
  return Double(seconds) * 1000 + Double(attoseconds) / 1e15
}

func measure(mode: String, sync: SyncMode, path: String, clients: Int, seconds: Double) throws {
  for suffix in ["", "-wal", "-shm"] { unlink(path + suffix) }
  let store = try SQLiteStore.open(path: path, sync: sync)
  let run = Run(store: store)
  store.onCompleted = { run.completed($0) }
  let start = ContinuousClock.now
  for _ in 0..<clients { run.issue() }
  usleep(UInt32(seconds * 1_000_000))
  run.loop.withLock { $0.stopping = true }
  while run.loop.withLock({ $0.outstanding }) > 0 { usleep(1000) }
  let elapsed = milliseconds(ContinuousClock.now - start) / 1000
  let stats = store.stats
  store.close()
  for suffix in ["", "-wal", "-shm"] { unlink(path + suffix) }

  let (latencies, writeTimes) = run.loop.withLock {
    ($0.latencies.sorted(), $0.writeTimes.sorted())
  }
  func percentile(_ p: Double, of sorted: [Duration] = latencies) -> Double {
    milliseconds(sorted[min(sorted.count - 1, Int(Double(sorted.count) * p))])
  }
  let row = [
    mode, "\(clients)", fixed(Double(latencies.count) / elapsed, 0),
    fixed(Double(stats.commits) / elapsed, 0),
    fixed(Double(stats.writesCommitted) / Double(max(1, stats.commits)), 1),
    fixed(percentile(0.5), 3), fixed(percentile(0.99), 3), fixed(percentile(1), 3),
    fixed(percentile(0.99, of: writeTimes) * 1000, 1),
    fixed(percentile(1, of: writeTimes) * 1000, 1),
  ]
  print(row.map { $0.padding(9) }.joined(separator: " "))
}

func fixed(_ value: Double, _ places: Int) -> String {
  var scale = 1.0
  for _ in 0..<places { scale *= 10 }
  let rounded = (value * scale).rounded() / scale
  guard places > 0 else { return "\(Int(rounded))" }
  let text = "\(rounded)"
  let decimals = text.split(separator: ".").last?.count ?? 0
  return text + String(repeating: "0", count: max(0, places - decimals))
}

extension String {
  func padding(_ width: Int) -> String {
    count >= width ? self : String(repeating: " ", count: width - count) + self
  }
}

let options = Options(CommandLine.arguments.dropFirst())
print(
  [
    "mode", "clients", "saves/s", "commits/s", "per-commit", "p50 ms", "p99 ms", "max ms",
    "write p99", "write max",
  ]
  .map { $0.padding(9) }.joined(separator: " "))
let file = options.directory + "/store-bench-\(getpid()).db"
let modes: [(String, SyncMode, String)] = [
  (":memory:", .normal, SQLiteStore.inMemory), ("normal", .normal, file), ("full", .full, file),
]
for (mode, sync, path) in modes {
  for clients in options.clients {
    do {
      try measure(mode: mode, sync: sync, path: path, clients: clients, seconds: options.seconds)
    } catch {
      print("store-bench: \(error)")
      exit(1)
    }
  }
}
