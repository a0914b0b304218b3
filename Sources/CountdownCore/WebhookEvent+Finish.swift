extension SessionRecord {
  /// The moment at which this record finished by itself by `now` (a run
  /// past its deadline or a day into overtime, a wait past its timeout), or
  /// nil when it has not.
  /// The same rule as `settled(at:)`, so the hub's `advance`, a restart and
  /// a command sequenced just past the deadline agree on whether, and when,
  /// it finished.
  public func finishedByItself(by now: Int64) -> Int64? {
    selfFinishAt.flatMap { $0 <= now ? $0 : nil }
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
