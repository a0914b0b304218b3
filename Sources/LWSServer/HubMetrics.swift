import CountdownCore
import Observability

/// The hub's counters (`Hub.stats`), rendered without touching a session.
public func collectHubStats(_ hub: Hub, into writer: inout MetricsWriter) {
  let stats = hub.stats
  writer.family("countdown_sessions", .gauge, help: "Live sessions, by phase.")
  for (index, phase) in Phase.allCases.enumerated() where index < stats.sessionsByPhase.count {
    writer.sample(
      "countdown_sessions", ["phase": phase.rawValue], Double(stats.sessionsByPhase[index]))
  }
  writer.family(
    "countdown_commands_total", .counter,
    help: "Commands received, by op and result (ok or the error code).")
  for (op, results) in stats.commands.sorted(by: { $0.key < $1.key }) {
    for (result, count) in results.sorted(by: { $0.key < $1.key }) {
      writer.sample("countdown_commands_total", ["op": op, "result": result], Double(count))
    }
  }
  writer.singles([
    (
      "countdown_sessions_created_total", .counter, "Sessions created.",
      Double(stats.sessionsCreated)
    ),
    (
      "countdown_sessions_forgotten_total", .counter, "Quiet sessions forgotten.",
      Double(stats.sessionsForgotten)
    ),
    (
      "countdown_commands_in_flight", .gauge,
      "Commands waiting for the sequencer to complete them.",
      Double(stats.commandsInFlight)
    ),
    (
      "countdown_patches_merged_total", .counter,
      "Merged catch-up patches sent to viewers that fell behind.", Double(stats.patchesMerged)
    ),
    (
      "countdown_replies_dropped_total", .counter,
      "Acks, errors and pongs dropped: their connection had 16 KiB of replies waiting.",
      Double(stats.repliesDropped)
    ),
  ])
  let lateness = stats.tickLatenessMs
  writer.histogram(
    "countdown_tick_lateness_seconds",
    help: "How late each tick was applied against its deadline.", lateness,
    boundLabels: lateness.bounds == NetworkStats.latenessBounds
      ? NetworkStats.latenessBoundLabels
      : MetricsWriter.boundLabels(lateness.bounds, scale: 0.001),
    scale: 0.001)
}
