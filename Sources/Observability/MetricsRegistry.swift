/// Every metric family the process exposes, as collectors that each write
/// their families from counters they already keep.
///
/// A render costs O(families): collectors read plain counters and must never
/// walk sessions or connections. Modules that come later (storage, Redis)
/// add their families with `register`. Used on the service thread only.
public final class MetricsRegistry {
  public typealias Collector = (inout MetricsWriter) -> Void

  private var collectors: [Collector] = []
  /// How long the previous render took, exposed by the render after it.
  private var lastRenderSeconds = 0.0

  public init() {}

  public func register(_ collector: @escaping Collector) {
    collectors.append(collector)
  }

  public func render() -> [UInt8] {
    let started = monotonicSeconds()
    var writer = MetricsWriter()
    for collect in collectors { collect(&writer) }
    writer.single(
      "countdown_metrics_render_seconds", .gauge,
      help: "How long the previous /metrics render took on the service thread.",
      lastRenderSeconds)
    lastRenderSeconds = monotonicSeconds() - started
    return writer.bytes
  }
}
