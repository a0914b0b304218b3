import Dispatch
import Synchronization

#if canImport(Glibc)
  import Glibc
#endif

/// State behind a `Mutex`, with a wake-up to wait on: `Synchronization.Mutex`
/// has no condition variable, so a waiter that finds `ready` false counts
/// itself in and sleeps on a semaphore, and `update` wakes whoever counted
/// in. A wake-up that comes late only makes a waiter look again.
final class Guarded<State>: Sendable {
  private struct Locked {
    var state: State
    /// Waiters asleep, or about to be, on `wake`.
    var sleepers = 0
  }

  private let locked: Mutex<Locked>
  private let wake = DispatchSemaphore(value: 0)

  init(_ state: sending State) {
    locked = Mutex(Locked(state: state))
  }

  func withLock<Result>(
    _ body: (inout sending State) throws -> sending Result
  ) rethrows -> sending Result {
    try locked.withLock { try body(&$0.state) }
  }

  /// Changes the state and wakes every waiter.
  func update<Result>(_ body: (inout sending State) -> sending Result) -> sending Result {
    let (result, sleepers) = locked.withLock { locked in
      let result = body(&locked.state)
      defer { locked.sleepers = 0 }
      return (result, locked.sleepers)
    }
    for _ in 0..<sleepers { wake.signal() }
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
    while true {
      let done: Result? = locked.withLock { locked in
        if ready(locked.state) { return body(&locked.state) }
        locked.sleepers += 1
        return nil
      }
      if let done { return done }
      if let deadline {
        guard wake.wait(timeout: deadline) == .success else { break }
      } else {
        wake.wait()
      }
    }
    // Timed out: no longer a sleeper, unless an update counted this one out already.
    return locked.withLock { locked in
      locked.sleepers = max(0, locked.sleepers - 1)
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
