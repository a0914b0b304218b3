/// A fixed-bucket histogram in the Prometheus shape: cumulative counts per
/// upper bound, plus the sum and count of every observation.
public struct Histogram: Sendable, Equatable {
  /// Upper bounds of the buckets, ascending; `+Inf` is implied.
  public let bounds: [Double]
  /// Observations at or below each bound (not cumulative; the renderer sums).
  public private(set) var counts: [UInt64]
  public private(set) var sum: Double = 0
  public private(set) var count: UInt64 = 0

  public init(bounds: [Double]) {
    self.bounds = bounds
    counts = Array(repeating: 0, count: bounds.count + 1)
  }

  public mutating func observe(_ value: Double) {
    var index = 0
    while index < bounds.count && value > bounds[index] { index += 1 }
    counts[index] += 1
    sum += value
    count += 1
  }
}
