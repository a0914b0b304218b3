import CLibWebSockets

/// Keeps lws's own libev timer firing at least once a second.
///
/// lws 4.1.6 re-arms its libev timer (`hrtimer` in lib/event-libs/libev/libev.c,
/// `lws_ev_idle_cb`) with `ev_timer_set` on a watcher that may still be active,
/// which libev ignores, and `lws_sul_schedule` does not touch it at all. So a
/// timeout lws sets for itself (the 5 s wait for a close reply, the header
/// timeout, `LWS_TO_KILL_ASYNC` from the keepalive sweep) waits for whatever
/// the timer was last armed for, however far that is. A sul that re-schedules
/// itself from its own callback, which runs inside lws's timer callback, makes
/// lws re-arm that timer with an inactive watcher every time: lws's timeouts
/// are then late by at most the period. On poll, lws computes its wait from
/// the sul list each time, and this is not needed.
final class LibraryHeartbeat {
  static let periodMicroseconds: lws_usec_t = 1_000_000

  private let sul: UnsafeMutablePointer<cds_timer_t>
  private var context: OpaquePointer?

  init() {
    sul = .allocate(capacity: 1)
    sul.initialize(to: cds_timer_t())
  }

  deinit { sul.deallocate() }

  func start(context: OpaquePointer) {
    self.context = context
    sul.pointee.user = Unmanaged.passUnretained(self).toOpaque()
    schedule()
  }

  func stop() {
    guard context != nil else { return }
    lws_sul_cancel(&sul.pointee.sul)
    context = nil
  }

  fileprivate func schedule() {
    guard let context else { return }
    lws_sul_schedule(context, 0, &sul.pointee.sul, heartbeatFired, Self.periodMicroseconds)
  }
}

private func heartbeatFired(_ sul: UnsafeMutablePointer<lws_sorted_usec_list_t>?) {
  guard let sul, let user = cds_timer_user(sul) else { return }
  Unmanaged<LibraryHeartbeat>.fromOpaque(user).takeUnretainedValue().schedule()
}
