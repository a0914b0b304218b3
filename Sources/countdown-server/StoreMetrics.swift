import Observability
import SQLiteStore

/// The storage families of `/metrics`, from one snapshot of the store's counters.
func collectStoreStats(_ stats: StoreStats, into writer: inout MetricsWriter) {
  writer.singles([
    ("countdown_store_commits_total", .counter, "Transactions committed.", Double(stats.commits)),
    (
      "countdown_store_commit_failures_total", .counter,
      "Transactions that failed (disk full, read-only) and were rolled back.",
      Double(stats.failedCommits)
    ),
    (
      "countdown_store_writes_failed_total", .counter,
      "Commands answered unavailable because their commit failed.", Double(stats.writesFailed)
    ),
    (
      "countdown_store_writes_refused_total", .counter,
      "Commands answered unavailable because --store-queue-limit writes were uncommitted.",
      Double(stats.writesRefused)
    ),
    (
      "countdown_store_writes_dropped_total", .counter,
      "Creations, deletions and webhook finishes dropped at twice --store-queue-limit uncommitted writes.",
      Double(stats.writesDropped)
    ),
    (
      "countdown_store_queue_limit", .gauge, "Uncommitted writes past which commands are refused.",
      Double(stats.queueLimit)
    ),
    (
      "countdown_store_queue_depth", .gauge, "Writes queued for the writer thread.",
      Double(stats.queueDepth + stats.batchInProgress + stats.writesKept)
    ),
    (
      "countdown_store_up", .gauge, "1 while the last commit succeeded, 0 after a failure.",
      stats.lastError == nil ? 1 : 0
    ),
  ])
  let commit = stats.commitMs
  writer.histogram(
    "countdown_store_commit_seconds", help: "How long each group commit took.",
    bounds: commit.bounds, counts: commit.counts, sum: commit.sum, count: commit.count,
    scale: 0.001)
}
