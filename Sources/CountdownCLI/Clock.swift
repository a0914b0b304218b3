/// Seconds as the page's clock shows them (Public/logic.js `formatClock`): plain seconds
/// under a minute ("5"), then "1:05", "1:02:05", and from a day "2d 01:02:05".
public func formatClock(_ seconds: Int64) -> String {
  let total = max(0, seconds)
  let days = total / 86_400
  let hours = total % 86_400 / 3600
  let minutes = total % 3600 / 60
  let secs = total % 60
  if total < 60 { return String(total) }
  if total < 3600 { return "\(minutes):\(pad2(secs))" }
  if total < 86_400 { return "\(hours):\(pad2(minutes)):\(pad2(secs))" }
  return "\(days)d \(pad2(hours)):\(pad2(minutes)):\(pad2(secs))"
}

/// The time elapsed as a clock that counts up (Public/logic.js `formatElapsed`): "0:05" from
/// the first second, then as `formatClock`.
public func formatElapsed(_ seconds: Int64) -> String {
  let s = max(0, seconds)
  return s < 60 ? "0:\(pad2(s))" : formatClock(s)
}

/// Whole seconds left, rounded up, as the server counts them.
public func secondsLeft(milliseconds ms: Int64) -> Int64 {
  ms <= 0 ? 0 : ms / 1000 + (ms % 1000 == 0 ? 0 : 1)
}

private func pad2(_ n: Int64) -> String { n < 10 ? "0\(n)" : String(n) }
