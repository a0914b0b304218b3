#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// Where "now" comes from. The hub never reads the time itself, so tests pass
/// their own and a whole countdown runs in microseconds.
public protocol WallClock: Sendable {
  /// Milliseconds since the Unix epoch: the unit of `endsAt` and `serverTime`.
  func nowMilliseconds() -> Int64
}

/// The system's real-time clock, the one browsers compare `endsAt` against.
public struct SystemClock: WallClock {
  public init() {}

  public func nowMilliseconds() -> Int64 {
    var spec = timespec()
    clock_gettime(CLOCK_REALTIME, &spec)
    return Int64(spec.tv_sec) * 1000 + Int64(spec.tv_nsec) / 1_000_000
  }
}
