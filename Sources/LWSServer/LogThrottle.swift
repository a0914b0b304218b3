/// At most one log line per interval; lines held back meanwhile are counted,
/// and the count goes out with the next line.
struct LogThrottle {
  let intervalMs: Int64
  private var lastAt: Int64?
  private var held = 0

  init(intervalMs: Int64 = 1000) { self.intervalMs = intervalMs }

  /// nil: hold this line back. Otherwise log it, with how many were held back.
  mutating func admit(now: Int64) -> Int? {
    if let lastAt, now - lastAt < intervalMs, now >= lastAt {
      held += 1
      return nil
    }
    lastAt = now
    defer { held = 0 }
    return held
  }
}
