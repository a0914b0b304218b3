import Dispatch
import Synchronization

#if canImport(Glibc)
  import Glibc
#endif

/// State behind a `Mutex`, with a wake-up to wait on: `Synchronization.Mutex`
/// has no condition variable, so a waiter that finds `ready` false leaves a
/// semaphore of its own in the state and sleeps on it, and `update` signals
/// every semaphore it finds. Each wait has a fresh one, so a wake-up that
/// comes after a timeout reaches nobody.
final class Guarded<State>: Sendable {
  private struct Locked {
    var state: State
    /// One per waiter asleep, or about to be.
    var sleepers: [DispatchSemaphore] = []
  }

  private let locked: Mutex<Locked>

  init(_ state: sending State) {
    locked = Mutex(Locked(state: state))
  }

  func withLock<Result>(
    _ body: (inout sending State) throws -> sending Result
  ) rethrows -> sending Result {
    try locked.withLock { try body(&$0.state) }
  }

  /// Waiters asleep now: for tests, which must know their waiters wait.
  var sleeperCount: Int { locked.withLock { $0.sleepers.count } }

  /// Changes the state and wakes every waiter.
  func update<Result>(_ body: (inout sending State) -> sending Result) -> sending Result {
    let (result, sleepers) = locked.withLock { locked in
      let result = body(&locked.state)
      defer { locked.sleepers = [] }
      return (result, locked.sleepers)
    }
    for sleeper in sleepers { sleeper.signal() }
    return result
  }

  /// Waits until `ready` holds or `timeout` has passed (nil: no limit), then
  /// runs `body` under the same lock. The timeout is on the monotonic clock,
  /// so a wall-clock step cannot stall it.
  func wait<Result>(
    until ready: (State) -> Bool, timeout: Duration? = nil,
    then body: (inout sending State) -> sending Result
  ) -> sending Result {
    let deadline = timeout.map { timeout in
      let (seconds, attoseconds) = timeout.components
      return DispatchTime.now()
        + .nanoseconds(Int(seconds) * 1_000_000_000 + Int(attoseconds / 1_000_000_000))
    }
    var wake = DispatchSemaphore(value: 0)
    while true {
      wake = DispatchSemaphore(value: 0)
      let done: Result? = locked.withLock { [wake] locked in
        if ready(locked.state) { return body(&locked.state) }
        locked.sleepers.append(wake)
        return nil
      }
      if let done { return done }
      if let deadline {
        guard wake.wait(timeout: deadline) == .success else { break }
      } else {
        wake.wait()
      }
    }
    return locked.withLock { [wake] locked in
      locked.sleepers.removeAll { $0 === wake }
      return body(&locked.state)
    }
  }
}

/// A joinable thread running one closure.
final class JoinableThread: Sendable {
  private let thread: pthread_t

  init(_ body: @escaping @Sendable () -> Void) {
    final class Box {
      let body: @Sendable () -> Void
      init(_ body: @escaping @Sendable () -> Void) { self.body = body }
    }
    // The thread takes the retained box over and releases it when done.
    let box = Unmanaged.passRetained(Box(body)).toOpaque()
    var thread = pthread_t()
    let code = pthread_create(
      &thread, nil,
      { argument in
        let box = Unmanaged<Box>.fromOpaque(argument!).takeRetainedValue()
        box.body()
        return nil
      }, box)
    precondition(code == 0, "pthread_create failed: \(code)")
    self.thread = thread
  }

  /// Blocks until the closure has returned. Call once.
  func join() { pthread_join(thread, nil) }
}
