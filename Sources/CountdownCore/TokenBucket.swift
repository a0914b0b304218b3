/// A token bucket holding up to one second of commands, refilled continuously.
struct TokenBucket: Sendable {
  private var tokens: Double
  private var refilledAt: Int64
  /// When the current unbroken run of refusals began (`Int64.min`: none yet),
  /// kept without an optional's padding since every viewer has a bucket.
  private var floodStart = Int64.min
  private var lastRefusalAt = Int64.min / 2

  /// When the current unbroken run of refusals began, if one is under way.
  var floodingSince: Int64? { floodStart == .min ? nil : floodStart }

  init(rate: Double, now: Int64) {
    tokens = rate
    refilledAt = now
  }

  /// Takes one token if there is one. A refusal more than a second after the
  /// previous one starts a new run, so a client that merely bursts now and
  /// then is never taken for a flooder.
  mutating func take(rate: Double, now: Int64) -> Bool {
    tokens = min(rate, tokens + Double(now - refilledAt) * rate / 1000)
    refilledAt = now
    if tokens >= 1 {
      tokens -= 1
      return true
    }
    if now - lastRefusalAt > 1000 { floodStart = now }
    lastRefusalAt = now
    return false
  }
}
