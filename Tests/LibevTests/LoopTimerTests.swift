import Libev
import Testing

#if canImport(Glibc)
  import Glibc
#endif

/// Milliseconds on the monotonic clock.
private func nowMs() -> Int64 {
  var spec = timespec()
  clock_gettime(CLOCK_MONOTONIC, &spec)
  return Int64(spec.tv_sec) * 1000 + Int64(spec.tv_nsec) / 1_000_000
}

struct LoopTimerTests {
  /// A scheduled timer fires once, no earlier than its delay, and not again by itself.
  @Test func firesOnceAfterItsDelay() {
    let loop = LibevLoop()
    var fired: [Int64] = []
    let timer = LoopTimer(loop: loop) { fired.append(nowMs()) }
    let start = nowMs()
    timer.schedule(afterMs: 30)
    #expect(loop.run(timeoutMs: 2000) { !fired.isEmpty })
    #expect(fired.count == 1)
    #expect(fired[0] - start >= 30)
    // Nothing re-arms it: a further run sees no second firing.
    _ = loop.run(timeoutMs: 80) { fired.count > 1 }
    #expect(fired.count == 1)
  }

  /// Scheduling again replaces the pending time, earlier as well as later.
  @Test func rescheduleMovesItEarlierAndLater() {
    let loop = LibevLoop()
    var firedAt: Int64?
    let timer = LoopTimer(loop: loop) { firedAt = nowMs() }
    let start = nowMs()
    timer.schedule(afterMs: 5000)
    timer.schedule(afterMs: 10)
    #expect(loop.run(timeoutMs: 2000) { firedAt != nil })
    #expect((firedAt ?? .max) - start < 1000)

    firedAt = nil
    let later = nowMs()
    timer.schedule(afterMs: 10)
    timer.schedule(afterMs: 150)
    #expect(loop.run(timeoutMs: 2000) { firedAt != nil })
    #expect((firedAt ?? 0) - later >= 150)
  }

  /// A cancelled timer, or one that went away, never fires; a delay below
  /// zero fires at once, and one of Int64.max ms is armed but never due.
  @Test func cancelAndDeinitDisarm() {
    let loop = LibevLoop()
    var cancelledFired = false
    var droppedFired = false
    let cancelled = LoopTimer(loop: loop) { cancelledFired = true }
    cancelled.schedule(afterMs: 10)
    cancelled.cancel()
    var dropped: LoopTimer? = LoopTimer(loop: loop) { droppedFired = true }
    dropped?.schedule(afterMs: 10)
    dropped = nil
    var farFired = false
    let far = LoopTimer(loop: loop) { farFired = true }
    far.schedule(afterMs: .max)
    var soonFired = false
    let soon = LoopTimer(loop: loop) { soonFired = true }
    soon.schedule(afterMs: -Int64.max)
    #expect(loop.run(timeoutMs: 1000) { soonFired })
    _ = loop.run(timeoutMs: 60) { cancelledFired || droppedFired }
    #expect(!cancelledFired)
    #expect(!droppedFired)
    #expect(!farFired)
  }

  /// A timer keeps its loop alive: the loop outlives the last other reference.
  @Test func timerKeepsItsLoop() {
    var fired = false
    weak var weakLoop: LibevLoop?
    let timer: LoopTimer
    do {
      let loop = LibevLoop()
      weakLoop = loop
      timer = LoopTimer(loop: loop) { fired = true }
    }
    #expect(weakLoop != nil)
    timer.schedule(afterMs: 0)
    #expect(weakLoop?.run(timeoutMs: 1000) { fired } == true)
  }
}

struct LibevLoopTests {
  /// The iteration watchers call `woke` then `sleeping` around each wait,
  /// and stop when asked; `run` gives up at its timeout when nothing is done.
  @Test func iterationsAreWatchedUntilStopped() {
    let loop = LibevLoop()
    var events: [String] = []
    loop.watchIterations(woke: { events.append("woke") }, sleeping: { events.append("sleeping") })
    var ticks = 0
    let timer = LoopTimer(loop: loop) { ticks += 1 }
    timer.schedule(afterMs: 5)
    #expect(loop.run(timeoutMs: 1000) { ticks == 1 })
    #expect(events.contains("woke"))
    #expect(events.contains("sleeping"))
    // Each wait is bracketed: never two of the same in a row.
    #expect(zip(events, events.dropFirst()).allSatisfy { $0 != $1 })
    loop.stopWatchingIterations()
    events = []
    timer.schedule(afterMs: 5)
    #expect(loop.run(timeoutMs: 1000) { ticks == 2 })
    #expect(events.isEmpty)
    #expect(!loop.run(timeoutMs: 20) { false })
    #expect(["epoll", "poll", "select", "other"].contains(loop.backendName))
  }
}
