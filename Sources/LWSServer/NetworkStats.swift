import CountdownCore
import Observability

/// The network layer's counters: plain integers bumped on the service thread
/// by the events that change them, so a render reads them in O(1).
struct NetworkStats {
  var accepted: UInt64 = 0
  /// By close code (as a label value): what either side sent first, "1006"
  /// when the TCP connection ended without a Close, "unknown" when lws sent a
  /// Close of its own (1002 or 1007; lws 4.1.6 does not say which).
  var closed: [String: UInt64] = [:]
  var refused = [UInt64](repeating: 0, count: RefusalCause.allCases.count)
  var framesSent: UInt64 = 0
  var bytesSent: UInt64 = 0
  /// Busy time of one service-loop iteration: thread CPU time, so the wait
  /// in poll() is not counted.
  var loopSeconds = Histogram(bounds: [
    0.000_05, 0.000_1, 0.000_25, 0.000_5, 0.001, 0.002_5, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1,
  ])

  /// The longest iteration since start: a stall the histogram's top
  /// bucket would only bound.
  var loopSecondsMax = 0.0

  static let loopBoundLabels = MetricsWriter.boundLabels(NetworkStats().loopSeconds.bounds)
  static let latenessBounds = HubStats().tickLatenessMs.bounds
  static let latenessBoundLabels = MetricsWriter.boundLabels(latenessBounds, scale: 0.001)

  mutating func refuse(_ cause: RefusalCause) {
    refused[RefusalCause.allCases.firstIndex(of: cause)!] += 1
  }

  /// A client may send any code; codes outside the registered range share one label.
  static func label(forCode code: UInt16) -> String {
    (1000...1015).contains(code) || code == 4000 ? String(code) : "other"
  }
}
