import Testing

@testable import SQLiteStore

@Suite struct GuardedTests {
  /// Waiters on different conditions of one state each wake when an update
  /// makes theirs true, however the updates fall between their waits (a
  /// shared wake-up once lost one of two waiters for good).
  @Test func everyWaiterWakesOnItsUpdate() async {
    let shared = Guarded(0)
    await withTaskGroup(of: Bool.self) { group in
      for target in 1...4 {
        group.addTask {
          await withCheckedContinuation { (done: CheckedContinuation<Bool, Never>) in
            _ = JoinableThread {
              // A timeout far above the updates' pace: reaching it is the failure.
              let clock = ContinuousClock()
              let started = clock.now
              let seen = shared.wait(until: { $0 >= target }, timeout: .seconds(10)) { $0 }
              done.resume(returning: seen >= target && clock.now - started < .seconds(5))
            }
          }
        }
      }
      // Every waiter asleep first, so each update has someone to wake.
      while shared.sleeperCount < 4 { await Task.yield() }
      for _ in 1...4 { shared.update { $0 += 1 } }
      for await reached in group { #expect(reached) }
    }
  }

  /// A wait whose condition never holds ends at its timeout and still runs
  /// its body under the lock; an update after that reaches nobody stale.
  @Test func timeoutEndsTheWait() {
    let shared = Guarded(0)
    let clock = ContinuousClock()
    let started = clock.now
    let seen = shared.wait(until: { $0 > 0 }, timeout: .milliseconds(50)) { $0 }
    #expect(seen == 0)
    #expect(clock.now - started >= .milliseconds(50))
    shared.update { $0 = 1 }
    #expect(shared.wait(until: { $0 == 1 }, timeout: .seconds(5)) { $0 } == 1)
  }
}
