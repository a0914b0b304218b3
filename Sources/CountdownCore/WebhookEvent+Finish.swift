extension SessionRecord {
  /// The deadline at which this record finished by itself by `now` (a run
  /// past its deadline, a wait past its timeout), or nil when it has not.
  /// The same rule as `settled(at:)`, so the hub's `advance`, a restart and
  /// a command sequenced just past the deadline agree on whether, and when,
  /// it finished.
  public func finishedByItself(by now: Int64) -> Int64? {
    switch status {
    case .running(let endsAt) where endsAt <= now: endsAt
    case .waiting(_, let timeoutAt?) where timeoutAt <= now: timeoutAt
    case .idle, .running, .paused, .waiting, .finished: nil
    }
  }
}

extension WebhookEvent {
  /// The `session.finished` a record reaches by itself by `now`, stamped at
  /// its deadline; nil when it has not.
  public static func finish(
    of record: SessionRecord, session: String, by now: Int64, config: SessionConfig.Shared
  ) -> WebhookEvent? {
    record.finishedByItself(by: now).map {
      WebhookEvent(.finished, session: session, record: record, at: $0, config: config)
    }
  }
}
