/// When to try an event again after a failed attempt: exponential backoff
/// with full jitter (a random wait from zero to `min(cap, base·2^(n-1))`, so
/// many events failing at once spread out instead of retrying together),
/// for at most `window` after the change. A value: time and the random
/// draw are passed in.
public struct RetryPolicy: Sendable, Equatable {
  /// The first backoff's ceiling, ms.
  public let baseMs: Int64
  /// No backoff waits longer than this, ms.
  public let capMs: Int64
  /// How long after the change an event is still tried, ms; past it, dead.
  public let windowMs: Int64

  public static let defaultBaseMs: Int64 = 1000
  public static let defaultCapMs: Int64 = 3_600_000
  public static let defaultWindowMs: Int64 = 86_400_000

  /// Out-of-range values are clamped: a base of at least 1 ms, a cap of at
  /// least the base, a window of at least zero.
  public init(
    baseMs: Int64 = defaultBaseMs, capMs: Int64 = defaultCapMs, windowMs: Int64 = defaultWindowMs
  ) {
    self.baseMs = max(1, baseMs)
    self.capMs = max(self.baseMs, capMs)
    self.windowMs = max(0, windowMs)
  }

  public enum Decision: Equatable, Sendable {
    /// Try again at this epoch ms.
    case retry(at: Int64)
    /// The window is over: give the event up.
    case giveUp
  }

  /// After `attempts` failed tries (1 after the first), the last one at
  /// `now`, of an event whose change happened at `changedAt`. `jitter` is a
  /// draw in [0, 1) (anything else is clamped into it). The last retry is
  /// at the window's end, never past it.
  public func next(attempts: Int, now: Int64, changedAt: Int64, jitter: Double) -> Decision {
    let (end, overflow) = changedAt.addingReportingOverflow(windowMs)
    let deadline = overflow ? Int64.max : end
    guard now < deadline else { return .giveUp }
    let ceiling = backoffCeiling(attempts: attempts)
    let draw = jitter.isNaN ? 0 : min(max(jitter, 0), 1)
    // The draw stays below the ceiling, which is at most the cap: no overflow.
    let waitMs = min(Int64((Double(ceiling) * draw).rounded(.down)), ceiling)
    let (at, late) = now.addingReportingOverflow(waitMs)
    return .retry(at: late ? deadline : min(at, deadline))
  }

  /// `min(cap, base·2^(attempts-1))`, without overflow for any count.
  func backoffCeiling(attempts: Int) -> Int64 {
    let doublings = attempts <= 1 ? 0 : attempts - 1
    guard doublings < 63 else { return capMs }
    let (scaled, overflow) = baseMs.multipliedReportingOverflow(by: Int64(1) << doublings)
    return overflow ? capMs : min(scaled, capMs)
  }
}
