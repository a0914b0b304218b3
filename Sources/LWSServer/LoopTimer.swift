import CLibWebSockets

/// One one-shot timer on the service loop, whichever loop that is: an lws sul
/// on poll, and on libev an ev_timer of the server's own, since lws 4.1.6
/// cannot bring its libev timer forward (see `cds_ev_timer_t` in the shim).
/// Its raw memory and C callbacks stay in this file.
final class LoopTimer {
  private let fire: () -> Void
  private let sul: UnsafeMutablePointer<cds_timer_t>
  private let watcher: UnsafeMutablePointer<cds_ev_timer_t>
  private var context: OpaquePointer?
  private var libevLoop: OpaquePointer?
  private var armed = false

  init(fire: @escaping () -> Void) {
    self.fire = fire
    sul = .allocate(capacity: 1)
    sul.initialize(to: cds_timer_t())
    watcher = .allocate(capacity: 1)
    watcher.initialize(to: cds_ev_timer_t())
  }

  deinit {
    sul.deallocate()
    watcher.deallocate()
  }

  /// Binds the timer to a running context, and to its libev loop if it has one.
  func attach(context: OpaquePointer, libevLoop: OpaquePointer?) {
    self.context = context
    self.libevLoop = libevLoop
    let user = Unmanaged.passUnretained(self).toOpaque()
    sul.pointee.user = user
    if libevLoop != nil { cds_ev_timer_init(watcher, loopTimerFired, user) }
  }

  /// Cancels and forgets the loop; call before the context or loop goes.
  func detach() {
    cancel()
    context = nil
    libevLoop = nil
  }

  func schedule(afterMicroseconds delay: Int64) {
    armed = true
    if let libevLoop {
      cds_ev_timer_arm(libevLoop, watcher, Double(max(0, delay)) / 1_000_000)
    } else if let context {
      lws_sul_schedule(context, 0, &sul.pointee.sul, sulFired, lws_usec_t(max(0, delay)))
    }
  }

  func cancel() {
    guard armed else { return }
    armed = false
    if let libevLoop {
      cds_ev_timer_stop(libevLoop, watcher)
    } else if context != nil {
      lws_sul_cancel(&sul.pointee.sul)
    }
  }

  fileprivate func fired() {
    armed = false
    fire()
  }
}

private func loopTimerFired(_ user: UnsafeMutableRawPointer?) {
  guard let user else { return }
  Unmanaged<LoopTimer>.fromOpaque(user).takeUnretainedValue().fired()
}

/// lws hands a sul callback nothing but the sul; the shim's struct carries the timer.
private func sulFired(_ sul: UnsafeMutablePointer<lws_sorted_usec_list_t>?) {
  guard let sul, let user = cds_timer_user(sul) else { return }
  Unmanaged<LoopTimer>.fromOpaque(user).takeUnretainedValue().fired()
}
