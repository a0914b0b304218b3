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
  /// The same clock in microseconds, for arming timers to the deadline.
  func nowMicroseconds() -> Int64
}

extension WallClock {
  public func nowMicroseconds() -> Int64 { nowMilliseconds() * 1000 }
}

/// The system's real-time clock, the one browsers compare `endsAt` against.
public struct SystemClock: WallClock {
  public init() {}

  public func nowMilliseconds() -> Int64 { nowMicroseconds() / 1000 }

  public func nowMicroseconds() -> Int64 {
    var spec = timespec()
    clock_gettime(CLOCK_REALTIME, &spec)
    return Int64(spec.tv_sec) * 1_000_000 + Int64(spec.tv_nsec) / 1000
  }
}

/// Another clock shifted by a fixed amount: `--test-clock-offset-ms`, which
/// stands in for a host whose clock is off (libfaketime cannot be preloaded
/// into a Swift binary).
public struct ShiftedClock: WallClock {
  public let base: any WallClock
  public let offsetMs: Int64

  public init(_ base: any WallClock = SystemClock(), byMs offsetMs: Int64) {
    self.base = base
    self.offsetMs = offsetMs
  }

  public func nowMilliseconds() -> Int64 { base.nowMilliseconds() + offsetMs }
  public func nowMicroseconds() -> Int64 { base.nowMicroseconds() + offsetMs * 1000 }
}
