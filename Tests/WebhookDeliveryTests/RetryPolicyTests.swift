import Testing

@testable import WebhookDelivery

@Suite struct RetryPolicyTests {
  let policy = RetryPolicy(baseMs: 1000, capMs: 60_000, windowMs: 86_400_000)

  /// The backoff's ceiling doubles from the base up to the cap and stays there, for any count of attempts.
  @Test func ceilingDoublesToTheCap() {
    #expect(policy.backoffCeiling(attempts: 1) == 1000)
    #expect(policy.backoffCeiling(attempts: 2) == 2000)
    #expect(policy.backoffCeiling(attempts: 6) == 32_000)
    #expect(policy.backoffCeiling(attempts: 7) == 60_000)
    for huge in [63, 64, 65, 1000, Int.max] {
      #expect(policy.backoffCeiling(attempts: huge) == 60_000)
    }
    for low in [0, -1, Int.min] { #expect(policy.backoffCeiling(attempts: low) == 1000) }
  }

  /// Full jitter: the wait is the draw times the ceiling, and a draw outside [0, 1) (or NaN) is clamped.
  @Test func jitterSpansZeroToTheCeiling() {
    let now: Int64 = 1_700_000_000_000
    #expect(policy.next(attempts: 3, now: now, changedAt: now, jitter: 0) == .retry(at: now))
    #expect(
      policy.next(attempts: 3, now: now, changedAt: now, jitter: 0.5) == .retry(at: now + 2000))
    #expect(
      policy.next(attempts: 3, now: now, changedAt: now, jitter: 0.999_999)
        == .retry(at: now + 3999))
    for (draw, wait) in [
      (-1.0, 0), (2.0, 4000), (Double.nan, 0), (.infinity, 4000), (-.infinity, 0),
    ] {
      #expect(
        policy.next(attempts: 3, now: now, changedAt: now, jitter: draw)
          == .retry(at: now + Int64(wait)))
    }
  }

  /// Past the window it gives up; inside it, no retry is set past the window's end.
  @Test func windowBoundsEveryRetry() {
    let changed: Int64 = 1_700_000_000_000
    let end = changed + 86_400_000
    #expect(policy.next(attempts: 40, now: end, changedAt: changed, jitter: 0) == .giveUp)
    #expect(policy.next(attempts: 40, now: end + 1, changedAt: changed, jitter: 0) == .giveUp)
    #expect(
      policy.next(attempts: 40, now: end - 10, changedAt: changed, jitter: 0.99) == .retry(at: end))
    let none = RetryPolicy(baseMs: 1000, capMs: 1000, windowMs: 0)
    #expect(none.next(attempts: 1, now: changed, changedAt: changed, jitter: 0) == .giveUp)
  }

  /// Times at the ends of Int64 neither trap nor wrap: the deadline saturates, and so does the retry time.
  @Test func extremeTimesSaturate() {
    #expect(policy.next(attempts: 1, now: .max, changedAt: .max, jitter: 0.5) == .giveUp)
    #expect(
      policy.next(attempts: 1, now: .max - 1, changedAt: .max - 10, jitter: 0.9) == .retry(at: .max)
    )
    #expect(
      policy.next(attempts: 1, now: .min, changedAt: .min, jitter: 0.5) == .retry(at: .min + 500))
    // A change stamped in the future (a clock stepped back) is still bounded by its window.
    #expect(policy.next(attempts: 1, now: 0, changedAt: .max, jitter: 0) == .retry(at: 0))
  }

  /// Out-of-range settings are clamped: no zero or negative base, no cap under the base, no negative window.
  @Test func settingsAreClamped() {
    let odd = RetryPolicy(baseMs: -5, capMs: Int64.min, windowMs: -1)
    #expect(odd.baseMs == 1 && odd.capMs == 1 && odd.windowMs == 0)
    let huge = RetryPolicy(baseMs: .max, capMs: .max, windowMs: .max)
    #expect(huge.backoffCeiling(attempts: 2) == .max)
    #expect(huge.next(attempts: 5, now: 1, changedAt: 1, jitter: 0.5) != .giveUp)
  }
}
