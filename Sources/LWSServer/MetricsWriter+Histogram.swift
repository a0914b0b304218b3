import CountdownCore
import Observability

extension MetricsWriter {
  /// A histogram kept by `Histogram` (of CountdownCore), with its bound labels cached.
  mutating func histogram(
    _ name: String, help: String, _ histogram: Histogram, boundLabels: [String], scale: Double = 1
  ) {
    self.histogram(
      name, help: help, boundLabels: boundLabels, counts: histogram.counts, sum: histogram.sum,
      count: histogram.count, scale: scale)
  }
}
