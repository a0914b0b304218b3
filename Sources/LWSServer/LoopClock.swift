import Libev

#if canImport(Glibc)
  import Glibc
#endif

/// Times each iteration of a libev loop (from the moment its wait returns to
/// the next wait) on the thread's CPU clock, and hands each duration to
/// `record`. On poll, `CountdownServer` times `lws_service` itself; on libev
/// that call is the whole run.
final class LoopClock {
  private let record: (Double) -> Void
  private var loop: LibevLoop?
  private var wokeAt: Double?

  init(record: @escaping (Double) -> Void) {
    self.record = record
  }

  func start(on loop: LibevLoop) {
    self.loop = loop
    loop.watchIterations(
      woke: { [unowned self] in wokeAt = Self.threadCPUSeconds() },
      sleeping: { [unowned self] in sleeping() })
  }

  func stop() {
    loop?.stopWatchingIterations()
    loop = nil
  }

  private func sleeping() {
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
