/// One session as a directory reads it, from where its state lives (a
/// cluster's Redis): its record as it stands and its viewers everywhere.
public struct DirectorySession: Equatable, Sendable {
  public var id: String
  /// The record as read (its `seq` the floor any instance may have reached).
  public var record: SessionRecord
  public var viewers: Int

  public init(id: String, record: SessionRecord, viewers: Int) {
    self.id = id
    self.record = record
    self.viewers = viewers
  }
}

/// The HTTP API's reads of sessions this instance does not hold: a port
/// the core defines and a cluster adapter implements (`RedisSequencer`).
/// Both calls are asynchronous and answer on the service thread; neither
/// creates anything (no slot, no row, no Redis key).
public protocol SessionDirectory: AnyObject {
  /// Commanded sessions with an id after `after` (nil: from the first), in
  /// id order, at most `limit` (1 to `SessionDirectoryLimits.maxListLimit`).
  /// `bad_request` for an `after` that is no session id or a limit out of
  /// range, `unavailable` when the cluster cannot be read.
  func listSessions(
    after: String?, limit: Int,
    completion: @escaping (Result<[DirectorySession], ErrorCode>) -> Void)
  /// One session, or nil when it has no state anywhere (it reads as idle).
  func readSession(
    _ id: String, completion: @escaping (Result<DirectorySession?, ErrorCode>) -> Void)
}

public enum SessionDirectoryLimits {
  /// The most sessions one list answer holds.
  public static let maxListLimit = 1000

  /// Whether a list request's bounds may be asked of a directory: one more
  /// than a page may be, to tell whether a next page exists.
  public static func isValid(after: String?, limit: Int) -> Bool {
    (1...maxListLimit + 1).contains(limit) && after.map(SessionID.isValid) != false
  }
}

extension Hub {
  /// Where sessions this instance does not hold are read (a cluster), if anywhere.
  public var directory: (any SessionDirectory)? { sequencer as? any SessionDirectory }

  /// The snapshot object (`type`, `session`, `epoch`, `seq`, `serverTime`,
  /// `state`) of a session read from a directory, as a WebSocket snapshot
  /// of it here would be: settled at `now`, seq past whatever any instance
  /// may have sent since the record was written. Nil: a session nobody
  /// commanded, read as idle.
  public func snapshot(reading summary: DirectorySession?, session: String, now: Int64) -> [UInt8] {
    var machine = SessionStateMachine(config: sessionConfig, now: now)
    if let summary {
      machine = SessionStateMachine(restoring: summary.record, config: sessionConfig, now: now)
      _ = machine.viewersChanged(to: summary.viewers, now: now)
    }
    return WireCodec.snapshot(
      session: session, epoch: epoch, seq: machine.seq, serverTime: now, state: machine.published)
  }
}

extension DirectorySession {
  /// Its line in the paged session list, as it stands at `now`.
  public func summary(now: Int64) -> SessionSummary {
    let settled = record.settled(at: now)
    return SessionSummary(
      id: id, phase: settled.phase, viewers: viewers, endsAt: settled.endsAt)
  }
}
