#if canImport(Glibc)
  import Glibc
#endif

/// State behind a pthread mutex, with a condition to wait on. The server has
/// no Foundation, and `Synchronization.Mutex` has no condition variable, so
/// the writer thread's wake-up is built here; the pthread pointers stay in
/// this file.
final class Guarded<State>: @unchecked Sendable {
  // Heap-allocated because pthread objects must not move once initialised.
  private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
  private let condition = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)
  private var state: State

  init(_ state: State) {
    self.state = state
    pthread_mutex_init(mutex, nil)
    var attributes = pthread_condattr_t()
    pthread_condattr_init(&attributes)
    // Timed waits measure the monotonic clock, so a wall-clock step cannot stall them.
    pthread_condattr_setclock(&attributes, CLOCK_MONOTONIC)
    pthread_cond_init(condition, &attributes)
    pthread_condattr_destroy(&attributes)
  }

  deinit {
    pthread_cond_destroy(condition)
    pthread_mutex_destroy(mutex)
    mutex.deallocate()
    condition.deallocate()
  }

  func withLock<Result>(_ body: (inout State) throws -> Result) rethrows -> Result {
    pthread_mutex_lock(mutex)
    defer { pthread_mutex_unlock(mutex) }
    return try body(&state)
  }

  /// Changes the state and wakes every waiter.
  func update<Result>(_ body: (inout State) -> Result) -> Result {
    pthread_mutex_lock(mutex)
    defer {
      pthread_cond_broadcast(condition)
      pthread_mutex_unlock(mutex)
    }
    return body(&state)
  }

  /// Waits until `ready` holds or `timeout` has passed (nil: no limit), then
  /// runs `body` under the same lock.
  func wait<Result>(
    until ready: (State) -> Bool, timeout: Duration? = nil, then body: (inout State) -> Result
  ) -> Result {
    pthread_mutex_lock(mutex)
    defer { pthread_mutex_unlock(mutex) }
    if let timeout {
      var deadline = timespec()
      clock_gettime(CLOCK_MONOTONIC, &deadline)
      let (seconds, attoseconds) = timeout.components
      let nanoseconds = Int(deadline.tv_nsec) + Int(attoseconds / 1_000_000_000)
      deadline.tv_sec += Int(seconds) + nanoseconds / 1_000_000_000
      deadline.tv_nsec = nanoseconds % 1_000_000_000
      while !ready(state) {
        if pthread_cond_timedwait(condition, mutex, &deadline) == ETIMEDOUT { break }
      }
    } else {
      while !ready(state) { pthread_cond_wait(condition, mutex) }
    }
    return body(&state)
  }
}

/// A joinable thread running one closure.
final class JoinableThread: @unchecked Sendable {
  private var thread = pthread_t()

  init(_ body: @escaping @Sendable () -> Void) {
    final class Box {
      let body: @Sendable () -> Void
      init(_ body: @escaping @Sendable () -> Void) { self.body = body }
    }
    // The thread takes the retained box over and releases it when done.
    let box = Unmanaged.passRetained(Box(body)).toOpaque()
    let code = pthread_create(
      &thread, nil,
      { argument in
        let box = Unmanaged<Box>.fromOpaque(argument!).takeRetainedValue()
        box.body()
        return nil
      }, box)
    precondition(code == 0, "pthread_create failed: \(code)")
  }

  /// Blocks until the closure has returned. Call once.
  func join() { pthread_join(thread, nil) }
}
