// scheduler-bench: the countdown scheduler in-process, with no sockets.
//
// For each N (default 10k, 100k, 1M) it builds a Hub with N running sessions
// (each: a viewer joins, sends start for a 1-day countdown, and leaves; a
// running session keeps running with no viewers), with the starts spread
// evenly across one second. It then drives simulated time forward 1 ms at a
// time, calling `advance(now:)` and draining the writable list as the server
// does, and reports:
//   - hub_ns_per_tick: wall time of advance + drain / patches published
//     (each due tick: heap pop, state machine advance, one patch encode, heap push)
//   - heap_ns_per_tick: the same deadline pattern on a bare DeadlineHeap
//   - bytes_per_session: malloc'd bytes (mallinfo2 uordblks) after building the
//     N sessions minus before, / N; and the same for RSS (/proc/self/statm)
//   - heap_bytes_per_session: the bare DeadlineHeap's share of that
// One JSON object per N on stdout, one per line.
//
//   scheduler-bench [--sessions N[,N...]] [--seconds S]

import CountdownCore

#if canImport(Glibc)
  import Glibc
#endif

func monotonicNs() -> UInt64 {
  var spec = timespec()
  clock_gettime(CLOCK_MONOTONIC, &spec)
  return UInt64(spec.tv_sec) * 1_000_000_000 + UInt64(spec.tv_nsec)
}

/// Bytes in use by malloc: glibc's mallinfo2() uordblks (small blocks) + hblkhd
/// (mmapped blocks). Glibc's module map leaves out <malloc.h>, so the function
/// is found with dlsym; its 10-word struct comes back through a hidden result
/// pointer, which on x86-64 is the first integer argument. Elsewhere: nil.
func mallocBytes() -> Int? {
  #if arch(x86_64)
    typealias MallInfo2 = @convention(c) (UnsafeMutableRawPointer) -> UnsafeMutableRawPointer?
    guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "mallinfo2") else {
      return nil
    }
    let call = unsafeBitCast(symbol, to: MallInfo2.self)
    var words = [Int](repeating: 0, count: 10)
    words.withUnsafeMutableBytes { _ = call($0.baseAddress!) }
    // struct mallinfo2 { arena, ordblks, smblks, hblks, hblkhd, usmblks, fsmblks, uordblks, fordblks, keepcost }
    return words[7] + words[4]
  #else
    return nil
  #endif
}

func rssBytes() -> Int {
  guard let file = fopen("/proc/self/statm", "r") else { return 0 }
  defer { fclose(file) }
  var size = 0
  var resident = 0
  _ = withUnsafeMutablePointer(to: &size) { s in
    withUnsafeMutablePointer(to: &resident) { r in
      withVaList([s, r]) { vfscanf(file, "%ld %ld", $0) }
    }
  }
  return resident * Int(sysconf(Int32(_SC_PAGESIZE)))
}

struct Result {
  var sessions: Int
  var hubNsPerTick: Double
  var hubTicks: Int
  var heapNsPerTick: Double
  var heapTicks: Int
  var bytesPerSession: Double
  var rssPerSession: Double
  var heapBytesPerSession: Double
  var buildNsPerSession: Double
}

let base: Int64 = 1_800_000_000_000

func benchHeap(_ n: Int, seconds: Int) -> (nsPerTick: Double, ticks: Int, bytesPerKey: Double) {
  let m0 = mallocBytes() ?? 0
  var heap = DeadlineHeap()
  for key in 0..<n {
    heap.set(Int32(key), to: base + Int64(key) * 1000 / Int64(n))
  }
  let bytes = Double((mallocBytes() ?? 0) - m0) / Double(n)
  var ticks = 0
  let t0 = monotonicNs()
  for ms in 1...(seconds * 1000) {
    let now = base + Int64(ms)
    while let key = heap.popDue(now: now) {
      // The hub re-arms each session 1 s after its last tick.
      heap.set(key, to: now + 1000)
      ticks += 1
    }
  }
  let elapsed = monotonicNs() - t0
  precondition(heap.count == n)
  return (Double(elapsed) / Double(max(ticks, 1)), ticks, bytes)
}

func benchHub(_ n: Int, seconds: Int) -> Result {
  let start = Array(#"{"op":"start","seconds":86400}"#.utf8)
  let m0 = mallocBytes()
  let r0 = rssBytes()
  let t0 = monotonicNs()
  // Every session runs: one address starts them all, so its cap must allow n.
  var hub: Hub? = Hub(config: HubConfig(maxSessions: 2 * n + 10, maxSessionsPerAddress: n))
  for index in 0..<n {
    let now = base + Int64(index) * 1000 / Int64(n)
    guard
      case .joined(let id) = hub!.connect(session: "bench-\(index)", peer: "192.0.2.1", now: now)
    else {
      fatalError("join refused at \(index)")
    }
    hub!.receive(start, from: id, now: now)
    hub!.disconnect(id, now: now)
    if index % 1024 == 0 { hub!.drainWritable { _ in } }
  }
  hub!.drainWritable { _ in }
  let built = monotonicNs() - t0
  // Let the viewer-count patches of the joins settle before measuring.
  var now = base + 1000
  while now < base + 2000 {
    now += 1
    hub!.advance(now: now)
    hub!.drainWritable { _ in }
  }
  let m1 = mallocBytes()
  let r1 = rssBytes()
  precondition(hub!.sessionCount == n)
  let running = hub!.stats.sessionsByPhase[Phase.allCases.firstIndex(of: .running)!]
  precondition(running == n, "\(running) of \(n) sessions running")
  // The hub counts every due tick it applies (its tick-lateness histogram).
  let before = hub!.stats.tickLatenessMs.count
  let t1 = monotonicNs()
  let end = now + Int64(seconds) * 1000
  while now < end {
    now += 1
    hub!.advance(now: now)
    hub!.drainWritable { _ in }
  }
  let elapsed = monotonicNs() - t1
  let ticks = Int(hub!.stats.tickLatenessMs.count - before)
  hub = nil
  let heap = benchHeap(n, seconds: seconds)
  return Result(
    sessions: n, hubNsPerTick: Double(elapsed) / Double(max(ticks, 1)), hubTicks: ticks,
    heapNsPerTick: heap.nsPerTick, heapTicks: heap.ticks,
    bytesPerSession: m0.flatMap { a in m1.map { Double($0 - a) / Double(n) } } ?? Double(r1 - r0)
      / Double(n), rssPerSession: Double(r1 - r0) / Double(n),
    heapBytesPerSession: heap.bytesPerKey, buildNsPerSession: Double(built) / Double(n))
}

var sizes = [10_000, 100_000, 1_000_000]
var seconds = 3
var arguments = CommandLine.arguments.dropFirst()
while let flag = arguments.popFirst() {
  switch flag {
  case "--sessions":
    sizes = (arguments.popFirst() ?? "").split(separator: ",").compactMap { Int($0) }
  case "--seconds":
    seconds = Int(arguments.popFirst() ?? "") ?? seconds
  default:
    print("usage: scheduler-bench [--sessions N[,N...]] [--seconds S]")
    exit(2)
  }
}

// The inline sizes behind bytes_per_session.
print(
  """
  {"layout":{"SessionStateMachine":\(MemoryLayout<SessionStateMachine>.stride),\
  "HubSessionSlot":\(Hub.sessionSlotBytes),\
  "SessionConfig":\(MemoryLayout<SessionConfig>.stride),\
  "CountdownState":\(MemoryLayout<CountdownState>.stride),\
  "Patch":\(MemoryLayout<Patch>.stride)}}
  """)

for n in sizes {
  let r = benchHub(n, seconds: seconds)
  func f(_ x: Double) -> String { String(Int((x * 10).rounded())).withDecimal }
  print(
    """
    {"sessions":\(r.sessions),"hub_ns_per_tick":\(f(r.hubNsPerTick)),"hub_ticks":\(r.hubTicks),\
    "heap_ns_per_tick":\(f(r.heapNsPerTick)),"heap_ticks":\(r.heapTicks),\
    "bytes_per_session":\(f(r.bytesPerSession)),"rss_bytes_per_session":\(f(r.rssPerSession)),\
    "heap_bytes_per_session":\(f(r.heapBytesPerSession)),"build_ns_per_session":\(f(r.buildNsPerSession))}
    """)
  fflush(nil)
}

extension String {
  /// "1234" (tenths) -> "123.4"
  var withDecimal: String {
    let negative = hasPrefix("-")
    var digits = negative ? String(dropFirst()) : self
    while digits.count < 2 { digits = "0" + digits }
    return (negative ? "-" : "") + digits.dropLast() + "." + digits.suffix(1)
  }
}
