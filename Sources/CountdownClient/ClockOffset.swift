import Foundation

/// How far the server's clock is ahead of this device's (negative: behind), estimated from
/// the `serverTime` of snapshots, NTP-style: a snapshot written between a request's send and
/// its answer puts the server's time near the middle of that round trip, within half of it.
///
/// The tightest round trip wins, but a sample's error bound grows with its age (1 ms per
/// second, far more than clocks drift), so a newer, slightly looser sample takes over in
/// time and a clock that was stepped is not trusted forever.
public struct ClockOffset: Sendable, Hashable {
  /// Server minus local, in milliseconds. 0 before any sample.
  public private(set) var milliseconds: Double = 0
  /// Half the round trip of the sample in use, ms; nil before any sample.
  public private(set) var uncertainty: Double?
  private var sampledAtMs: Double = 0

  /// The error bound grows by this many ms per second of a sample's age.
  static let agingPerSecond = 1.0

  public init() {}

  /// Whether the offset comes from a sample rather than the 0 it starts from.
  public var isEstimated: Bool { uncertainty != nil }

  /// Adds a sample: `serverTime` (epoch ms) read from an answer to a request sent at
  /// `sentAt` and received at `receivedAt`. Returns whether it is now the one in use.
  @discardableResult
  public mutating func add(serverTime: Int64, sentAt: Date, receivedAt: Date) -> Bool {
    let sent = sentAt.timeIntervalSince1970 * 1000
    let received = max(sent, receivedAt.timeIntervalSince1970 * 1000)
    let half = (received - sent) / 2
    if let current = uncertainty {
      let age = max(0, received - sampledAtMs) / 1000
      guard half <= current + age * Self.agingPerSecond else { return false }
    }
    milliseconds = Double(serverTime) - (sent + half)
    uncertainty = half
    sampledAtMs = received
    return true
  }

  /// Forgets every sample: the server restarted (a new epoch), maybe on another host.
  public mutating func reset() { self = ClockOffset() }

  /// The server's clock at local time `date`, epoch ms.
  public func serverTime(at date: Date) -> Int64 {
    let ms = (date.timeIntervalSince1970 * 1000 + milliseconds).rounded()
    guard ms.isFinite else { return 0 }
    return Int64(min(max(ms, Double(Bounds.epochMs.lowerBound)), Double(Bounds.epochMs.upperBound)))
  }
}
