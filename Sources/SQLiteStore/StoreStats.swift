import CountdownCore

/// The store's counters for metrics: a snapshot taken under the queue's lock.
public struct StoreStats: Equatable, Sendable {
  /// Transactions committed, and transactions that failed and were rolled back.
  public var commits: UInt64 = 0
  public var failedCommits: UInt64 = 0
  /// Writes stored by those commits (a kept write tried again counts once stored).
  public var writesCommitted: UInt64 = 0
  /// Ticketed writes answered `.unavailable`.
  public var writesFailed: UInt64 = 0
  /// Ticketed writes answered `.unavailable` because `queueLimit` writes
  /// were uncommitted.
  public var writesRefused: UInt64 = 0
  /// Writes without a ticket dropped at twice `queueLimit`.
  public var writesDropped: UInt64 = 0
  /// The store's bound on uncommitted writes.
  public var queueLimit = 0
  /// Writes without a ticket held after a failed commit, to try again.
  public var writesKept = 0
  /// Writes queued and not yet taken by the writer.
  public var queueDepth = 0
  /// Writes in the transaction being committed now (0 when the writer is idle).
  public var batchInProgress = 0
  /// The most writes one transaction has carried.
  public var largestBatch = 0
  /// How long each commit took, successful or not, in milliseconds.
  public var commitMs = Histogram(bounds: [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 25, 100, 1000])
  /// The last failure, for the log; nil once a commit succeeds again.
  public var lastError: StoreError?

  public init() {}

  mutating func record(
    batch: Int, ticketed: Int, kept: Int, elapsed: Duration, failure: StoreError?
  ) {
    let (seconds, attoseconds) = elapsed.components
    commitMs.observe(Double(seconds) * 1000 + Double(attoseconds) / 1e15)
    largestBatch = max(largestBatch, batch)
    batchInProgress = 0
    writesKept = kept
    lastError = failure
    if failure == nil {
      commits += 1
      writesCommitted += UInt64(batch)
    } else {
      failedCommits += 1
      writesFailed += UInt64(ticketed)
    }
  }
}
