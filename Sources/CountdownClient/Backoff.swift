/// Capped exponential backoff with full jitter, as the page reconnects: a delay drawn
/// uniformly from [0, min(cap, base × 2^attempt)), which spreads a crowd of clients out
/// after a server restart instead of having them retry in step.
public struct Backoff: Sendable, Hashable {
  /// Seconds: the ceiling of the first delay.
  public var base: Double
  /// Seconds: no delay is longer.
  public var cap: Double

  public init(base: Double, cap: Double) {
    self.base = base
    self.cap = cap
  }

  /// The delay in seconds before retry number `attempt` (0 for the first), for `random`
  /// in [0, 1) (values outside are clamped, so any source of randomness is safe).
  public func delay(attempt: Int, random: Double) -> Double {
    let base = self.base.isFinite ? max(0, self.base) : 0
    let cap = self.cap.isFinite ? max(0, self.cap) : 0
    // 2^n overflows for a large n; the cap is reached long before.
    let exponent = min(max(0, attempt), 62)
    let ceiling = min(cap, base * Double(UInt64(1) << UInt64(exponent)))
    let r = random.isFinite ? min(max(random, 0), 1 - Double.ulpOfOne) : 0
    return r * ceiling
  }
}
