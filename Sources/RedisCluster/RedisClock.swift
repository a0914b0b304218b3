import CountdownCore
import Synchronization

/// Redis's clock as this instance reads it: its own wall clock plus the
/// offset measured with TIME. In a cluster `endsAt` is Redis's time (the
/// function library stamps it), so every instance ticks, finishes and stamps
/// `serverTime` on this clock: one whose own clock is off still finishes
/// with the others.
///
/// Read on the service thread, set from the sequencer's replies (the same
/// thread) and once at start-up; atomic so that it is Sendable as
/// `WallClock` asks.
public final class RedisClock: WallClock {
  /// This instance's own wall clock, which the offset is measured against.
  public let local: any WallClock
  private let offset = Atomic<Int64>(0)
  /// The round trip of the sample the offset came from (µs); a sample is
  /// taken only when its round trip is not much longer, since Redis read its
  /// clock somewhere within it.
  private let sampleRoundTrip = Atomic<Int64>(.max)

  public init(local: any WallClock = SystemClock()) {
    self.local = local
  }

  /// Redis's clock minus the local one, in microseconds.
  public var offsetMicroseconds: Int64 { offset.load(ordering: .relaxed) }

  public func nowMilliseconds() -> Int64 { nowMicroseconds() / 1000 }

  public func nowMicroseconds() -> Int64 { local.nowMicroseconds() + offsetMicroseconds }

  /// Redis answered TIME with `redisMicros`, asked at `asked` and answered
  /// at `answered` on the local clock (µs). Redis read its clock somewhere
  /// within the round trip; the offset assumes the start of it, so that
  /// this clock is never behind Redis's, only ahead by at most the round
  /// trip. Behind, an instance would handle a reply stamped by Redis at a
  /// time still to come for it: a fresh start shows 601 s, then ticks to
  /// 600 at once, a patch between the command's and its ack. A sample over
  /// twice the best round trip (plus a millisecond, for noise) is not
  /// taken, unless `fresh` (a new connection, maybe another host).
  func measured(redisMicros: Int64, asked: Int64, answered: Int64, fresh: Bool) {
    let roundTrip = max(0, answered - asked)
    let best = fresh ? Int64.max : sampleRoundTrip.load(ordering: .relaxed)
    guard best == .max || roundTrip <= best * 2 + 1000 else {
      // So that a link grown slower for good is measured again in a few checks.
      sampleRoundTrip.store(min(best * 2, Int64.max / 4), ordering: .relaxed)
      return
    }
    offset.store(redisMicros - asked, ordering: .relaxed)
    sampleRoundTrip.store(min(roundTrip, best), ordering: .relaxed)
  }

  /// A TIME reply as microseconds, or nil.
  static func micros(ofTime reply: RedisReply) -> Int64? {
    guard let parts = reply.elements, parts.count == 2, let seconds = Int64(parts[0].text ?? ""),
      let micros = Int64(parts[1].text ?? ""),
      // Redis's reply is input: a moment within the years a record may hold.
      (0...SessionRecord.epochMsRange.upperBound / 1000).contains(seconds),
      (0..<1_000_000).contains(micros)
    else { return nil }
    return seconds * 1_000_000 + micros
  }
}
