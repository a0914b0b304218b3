/// Where sessions' durable facts are written: the port a store (SQLite, say)
/// implements. Every call comes from the service thread and must not block:
/// queue the write and return. A write that carries a ticket is reported back
/// through `Hub.complete`, on the service thread, once it is durable or failed.
public protocol SessionStore: AnyObject {
  func write(_ write: StoreWrite)
}

public enum StoreWrite: Equatable, Sendable {
  /// Insert or replace a session's row. `keyHash` is nil in open mode.
  /// `events` (webhooks on) go into the outbox in the same transaction.
  case save(
    session: String, record: SessionRecord, keyHash: KeyHash?, ticket: Ticket?,
    events: [WebhookEvent] = [])
  case delete(session: String)
  /// A command sent with an idempotency key: its answer, and when it applied
  /// its record (with `keyHash`, as `.save`), in one transaction. Completed
  /// with the answer's outcome once durable.
  case remember(
    IdempotencyEntry, keyHash: KeyHash?, ticket: Ticket, events: [WebhookEvent] = [])
  /// A run that elapsed or a wait that timed out by itself (webhooks on):
  /// `record`, the running or waiting record it finished from, is stored
  /// settled, with `event` in the outbox, in one transaction, so a restart
  /// does not record the finish again. Nothing is written when the row no
  /// longer holds `record`'s revision: a command sequenced before the
  /// deadline came first, and the finish never happened.
  case finish(session: String, record: SessionRecord, event: WebhookEvent)
}

/// A session as a store hands it back at start-up.
public struct StoredSession: Equatable, Sendable {
  public var id: String
  public var record: SessionRecord
  public var keyHash: KeyHash?

  public init(id: String, record: SessionRecord, keyHash: KeyHash?) {
    self.id = id
    self.record = record
    self.keyHash = keyHash
  }
}
