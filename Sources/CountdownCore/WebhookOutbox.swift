/// An event recorded with its change and not yet settled, as an outbox hands
/// it to the delivery side.
public struct OutboxEntry: Equatable, Sendable {
  public var event: WebhookEvent
  /// Tries made so far (a restart carries them on where the outbox keeps them).
  public var attempts: Int
  /// The outbox's own name for the entry: a row id, a stream entry id.
  public var handle: String

  public init(event: WebhookEvent, attempts: Int, handle: String) {
    self.event = event
    self.attempts = attempts
    self.handle = handle
  }
}

/// The delivery side of the transactional outbox: events are recorded with
/// the change that caused them (an SQLite transaction, a Redis function
/// call), and read back here. Called only from the delivery thread, never
/// the service thread, so its calls may block on a read or a round trip.
public protocol WebhookOutbox: AnyObject {
  /// At most `limit` entries this instance should deliver now, oldest first,
  /// that it has not been handed yet, or entries a dead holder left behind.
  /// Called at least every half second, with `limit` 0 while the deliverer
  /// is full: the outbox's chance for its own upkeep.
  func take(limit: Int, now: Int64) throws -> [OutboxEntry]
  /// Delivered (a 2xx from every endpoint) or given up: settled for good.
  func delivered(_ entry: OutboxEntry) throws
  func dead(_ entry: OutboxEntry) throws
  /// Tried and failed, to be tried again at `at` (epoch ms) by this
  /// instance; the outbox keeps `attempts` where it can, and keeps the entry
  /// from being claimed by another instance meanwhile.
  func retry(_ entry: OutboxEntry, attempts: Int, at: Int64) throws
  /// The deliverer stops with these entries unsettled (being sent, or
  /// waiting for a retry): another instance may take them over now, rather
  /// than once they look abandoned. The last call the outbox gets.
  func handBack(_ entries: [OutboxEntry]) throws
}

extension WebhookOutbox {
  /// An outbox no other process reads keeps them for its next start.
  public func handBack(_ entries: [OutboxEntry]) throws {}
}
