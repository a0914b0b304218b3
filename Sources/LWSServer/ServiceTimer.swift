import CLibWebSockets
import Libev

/// One of the server's one-shot timers, in milliseconds, on whichever loop it
/// runs: on libev a `LoopTimer`, the process's one libev timer type; on poll,
/// where lws runs a loop of its own, an lws sul. Not an lws sul on libev:
/// lws 4.1.6 re-arms its libev timer with ev_timer_set on a watcher that may
/// still be active, which libev ignores, so a sul scheduled earlier than the
/// pending one, from outside lws's timer callback, fires late. The sul's raw
/// memory and C callback stay in this file.
final class ServiceTimer {
  private let fire: () -> Void
  private let sul: UnsafeMutablePointer<cds_timer_t>
  private var onLibev: LoopTimer?
  private var context: LWSContext?
  private var armed = false

  init(fire: @escaping () -> Void) {
    self.fire = fire
    sul = .allocate(capacity: 1)
    sul.initialize(to: cds_timer_t())
  }

  deinit { sul.deallocate() }

  /// Binds the timer to a running context, and to its libev loop if it has one.
  func attach(context: LWSContext, loop: LibevLoop?) {
    self.context = context
    sul.pointee.user = Unmanaged.passUnretained(self).toOpaque()
    onLibev = loop.map { LoopTimer(loop: $0) { [unowned self] in fired() } }
  }

  /// Cancels and forgets the loop; call before the context or loop goes.
  func detach() {
    cancel()
    context = nil
    onLibev = nil
  }

  func schedule(afterMs delay: Int64) {
    armed = true
    if let onLibev {
      onLibev.schedule(afterMs: delay)
    } else if let context {
      lws_sul_schedule(context.raw, 0, &sul.pointee.sul, sulFired, lws_usec_t(max(0, delay)) * 1000)
    }
  }

  func cancel() {
    guard armed else { return }
    armed = false
    if let onLibev {
      onLibev.cancel()
    } else if context != nil {
      lws_sul_cancel(&sul.pointee.sul)
    }
  }

  fileprivate func fired() {
    armed = false
    fire()
  }
}

/// lws hands a sul callback nothing but the sul; the shim's struct carries the timer.
private func sulFired(_ sul: UnsafeMutablePointer<lws_sorted_usec_list_t>?) {
  guard let sul, let user = cds_timer_user(sul) else { return }
  Unmanaged<ServiceTimer>.fromOpaque(user).takeUnretainedValue().fired()
}
