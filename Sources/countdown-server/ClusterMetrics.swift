import Observability
import RedisCluster

/// The cluster families of `/metrics`, from the sequencer's counters.
func collectClusterStats(_ cluster: RedisSequencer, into writer: inout MetricsWriter) {
  let stats = cluster.stats
  writer.singles([
    (
      "countdown_redis_connected", .gauge,
      "1 while both Redis connections are up and subscribed, else 0.",
      cluster.isConnected ? 1 : 0
    ),
    (
      "countdown_redis_commands_total", .counter, "Commands sent to Redis as one FCALL each.",
      Double(stats.commandsSent)
    ),
    (
      "countdown_redis_commands_unavailable_total", .counter,
      "Commands answered unavailable: Redis unreachable, late or refusing.",
      Double(stats.commandsUnavailable)
    ),
    (
      "countdown_redis_messages_total", .counter, "Changes received on the channel.",
      Double(stats.messages)
    ),
    (
      "countdown_redis_rereads_total", .counter,
      "Session hashes read: creations, gaps, other epochs, reconnects, lost messages.",
      Double(stats.rereads)
    ),
    (
      "countdown_redis_disconnects_total", .counter, "Redis connections lost.",
      Double(stats.reconnects)
    ),
    (
      "countdown_redis_clock_offset_seconds", .gauge,
      "Redis's clock minus this host's, as last measured; the instance runs on Redis's.",
      Double(cluster.redisClock.offsetMicroseconds) / 1e6
    ),
    (
      "countdown_redis_damaged_records_total", .counter,
      "Records from Redis out of range or unreadable: dropped, or reset by the function.",
      Double(stats.damagedRecords)
    ),
  ])
  writer.family(
    "countdown_redis_lost_replies_total", .counter,
    help: "Commands whose reply was lost, by what reading the session back found.")
  for (outcome, count) in [
    ("applied", stats.lostRepliesApplied), ("not_applied", stats.lostRepliesNotApplied),
    ("unknown", stats.lostRepliesUnknown),
  ] {
    writer.sample("countdown_redis_lost_replies_total", ["outcome": outcome], Double(count))
  }
}
