import Observability
import WebhookDelivery

/// The webhook families of `/metrics`, from one snapshot of the deliverer's counters.
func collectWebhookStats(_ stats: DeliveryStats, into writer: inout MetricsWriter) {
  writer.single(
    "countdown_webhook_events_queued", .gauge,
    help: "Events the deliverer holds: being sent, or waiting for a retry.",
    Double(stats.queued))
  writer.family(
    "countdown_webhook_deliveries_total", .counter,
    help: "Events delivered (a 2xx from every --webhook), tried again, or given up as dead.")
  for (result, count) in [
    ("delivered", stats.delivered), ("retried", stats.retried), ("dead", stats.dead),
  ] {
    writer.sample("countdown_webhook_deliveries_total", ["result": result], Double(count))
  }
  let latency = stats.latencyMs
  writer.histogram(
    "countdown_webhook_delivery_seconds",
    help: "From an event's change to the last --webhook's 2xx.", bounds: latency.bounds,
    counts: latency.counts, sum: latency.sum, count: latency.count, scale: 0.001)
}
