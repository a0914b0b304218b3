import CLibWebSockets

#if canImport(Glibc)
  import Glibc
#endif

/// Times each iteration of a libev loop (from the moment its wait returns to
/// the next wait) on the thread's CPU clock, and hands each duration to
/// `record`. On poll, `CountdownServer` times `lws_service` itself; on libev
/// that call is the whole run. Its raw memory and C callbacks stay in this file.
final class LoopClock {
  private let record: (Double) -> Void
  private let watchers: UnsafeMutablePointer<cds_ev_loop_clock_t>
  private var loop: OpaquePointer?
  private var wokeAt: Double?

  init(record: @escaping (Double) -> Void) {
    self.record = record
    watchers = .allocate(capacity: 1)
    watchers.initialize(to: cds_ev_loop_clock_t())
  }

  deinit { watchers.deallocate() }

  func start(on loop: OpaquePointer) {
    self.loop = loop
    cds_ev_loop_clock_start(
      loop, watchers, loopClockWoke, loopClockSleeping, Unmanaged.passUnretained(self).toOpaque())
  }

  func stop() {
    guard let loop else { return }
    cds_ev_loop_clock_stop(loop, watchers)
    self.loop = nil
  }

  fileprivate func woke() { wokeAt = Self.threadCPUSeconds() }

  fileprivate func sleeping() {
    guard let wokeAt else { return }
    self.wokeAt = nil
    record(Self.threadCPUSeconds() - wokeAt)
  }

  static func threadCPUSeconds() -> Double {
    var spec = timespec()
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &spec)
    return Double(spec.tv_sec) + Double(spec.tv_nsec) / 1e9
  }
}

private func loopClockWoke(_ user: UnsafeMutableRawPointer?) {
  guard let user else { return }
  Unmanaged<LoopClock>.fromOpaque(user).takeUnretainedValue().woke()
}

private func loopClockSleeping(_ user: UnsafeMutableRawPointer?) {
  guard let user else { return }
  Unmanaged<LoopClock>.fromOpaque(user).takeUnretainedValue().sleeping()
}
