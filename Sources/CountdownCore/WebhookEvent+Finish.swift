extension WebhookEvent {
  /// The `session.finished` a record reaches by itself by `now` (a run past
  /// its deadline, a wait past its timeout), stamped at that deadline; nil
  /// when it has not. The same rule as `SessionRecord.settled(at:)`, so the
  /// hub's `advance`, a restart and a command sequenced just past the
  /// deadline agree on whether, and when, it finished.
  public static func finish(
    of record: SessionRecord, session: String, by now: Int64, config: SessionConfig.Shared
  ) -> WebhookEvent? {
    let deadline: Int64
    switch record.status {
    case .running(let endsAt) where endsAt <= now: deadline = endsAt
    case .waiting(_, let timeoutAt?) where timeoutAt <= now: deadline = timeoutAt
    case .idle, .running, .paused, .waiting, .finished: return nil
    }
    return WebhookEvent(.finished, session: session, record: record, at: deadline, config: config)
  }
}
