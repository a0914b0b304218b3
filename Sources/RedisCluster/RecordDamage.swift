import CountdownCore
import Observability

/// Records from Redis are input: each part that takes one checks it here
/// (fields in range, `SessionRecord(validating:)`) before any arithmetic on
/// it, and logs the ones it drops, so that all parts log damage alike.
enum RecordDamage {
  /// The record, if one that came from Redis can be taken. One that cannot
  /// is logged with its session and dropped; the rest carry on.
  static func accepted(_ message: RecordMessage, from source: String) -> SessionRecord? {
    let damage: String
    switch message.record {
    case .success(let record): return record
    case .failure(let error): damage = error.reason
    }
    Logger.shared.warn(
      "redis_record_damaged",
      [
        "session": LogValue(message.session), "source": LogValue(source),
        "damage": LogValue(damage),
      ])
    return nil
  }

  /// A message on the changes channel that is no record at all.
  static func unreadable(_ line: String) {
    let fields = line.split(separator: " ", maxSplits: 3)
    Logger.shared.warn(
      "redis_record_damaged",
      [
        "session": LogValue(fields.count > 2 ? String(fields[2].prefix(64)) : ""),
        "source": LogValue("message"), "damage": LogValue("not a record line"),
      ])
  }

  /// The function found the session's hash damaged and replaced it.
  static func reset(_ session: String, _ damage: String) {
    Logger.shared.warn(
      "redis_record_reset", ["session": LogValue(session), "damage": LogValue(damage)])
  }
}
