import CLibev

/// A one-shot timer on a `LibevLoop`, in milliseconds: `schedule` (re)arms
/// it, earlier or later than before, `cancel` disarms it, and it disarms
/// itself when it goes. It keeps its loop alive. The process's only timer
/// type on libev: the server's ticks, hiredis's deadlines and retries, and
/// the cluster's checks all use it.
public final class LoopTimer {
  private let loop: LibevLoop
  private let fire: () -> Void
  private let watcher: UnsafeMutablePointer<cev_timer_t>

  public init(loop: LibevLoop, fire: @escaping () -> Void) {
    self.loop = loop
    self.fire = fire
    watcher = .allocate(capacity: 1)
    watcher.initialize(to: cev_timer_t())
    cev_timer_init(watcher, loopTimerFired, Unmanaged.passUnretained(self).toOpaque())
  }

  deinit {
    cev_timer_stop(loop.unsafeRawLoop, watcher)
    watcher.deallocate()
  }

  /// Fires once, `delay` ms from now (at once when not positive).
  public func schedule(afterMs delay: Int64) {
    cev_timer_arm(loop.unsafeRawLoop, watcher, Double(max(0, delay)) / 1000)
  }

  public func cancel() { cev_timer_stop(loop.unsafeRawLoop, watcher) }

  fileprivate func fired() { fire() }
}

private func loopTimerFired(_ user: UnsafeMutableRawPointer?) {
  guard let user else { return }
  Unmanaged<LoopTimer>.fromOpaque(user).takeUnretainedValue().fired()
}
