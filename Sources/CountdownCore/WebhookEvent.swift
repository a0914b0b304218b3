/// The kinds of change a webhook reports, by their Standard Webhooks `type`.
public enum WebhookEventType: String, CaseIterable, Sendable {
  case started = "session.started"
  case paused = "session.paused"
  case resumed = "session.resumed"
  case adjusted = "session.adjusted"
  case cancelled = "session.cancelled"
  case waiting = "session.waiting"
  case finished = "session.finished"
  case message = "session.message"
  case blackout = "session.blackout"

  /// The event an applied command reports, judged by its op and the record
  /// it left: an adjust that takes the last second away finishes the run, so
  /// it reports `finished`. A key rotation changes nothing a backend sees.
  public static func of(_ op: SessionCommand.Op, result: SessionRecord) -> WebhookEventType? {
    // A rotation on a finished session leaves it finished: no new finish.
    if op == .rotateKey { return nil }
    if case .finished = result.status, op != .cancel { return .finished }
    switch op {
    case .start: return .started
    case .pause: return .paused
    case .resume: return .resumed
    case .adjust: return .adjusted
    case .cancel: return .cancelled
    case .wait: return .waiting
    case .done, .fail, .stop: return .finished
    case .message: return .message
    case .blackout: return .blackout
    case .rotateKey: return nil
    }
  }
}

/// One change as a webhook carries it: the body is fixed when the change is
/// recorded, so every retry, from any instance, sends the same bytes under
/// the same id, and a receiver can drop a repeat by `webhook-id`.
public struct WebhookEvent: Equatable, Sendable {
  /// The `webhook-id`: the same for the same change wherever it is built.
  public let id: String
  public let type: WebhookEventType
  public let session: String
  /// The session's seq at the change (the record's).
  public let seq: UInt64
  /// When the change happened, epoch ms: a command's sequencing time, or the
  /// deadline a run or wait finished at by itself.
  public let timestamp: Int64
  /// `{"type":…,"timestamp":…,"data":{"session":…,"seq":…,"state":{…}}}`.
  public let body: [UInt8]

  public init(
    id: String, type: WebhookEventType, session: String, seq: UInt64, timestamp: Int64,
    body: [UInt8]
  ) {
    self.id = id
    self.type = type
    self.session = session
    self.seq = seq
    self.timestamp = timestamp
    self.body = body
  }

  /// The event for `record`, the session's record after the change, as it
  /// stood at `at`. Pure and deterministic: the single server and every
  /// cluster instance build the same event from the same record.
  public init(
    _ type: WebhookEventType, session: String, record: SessionRecord, at: Int64,
    config: SessionConfig.Shared
  ) {
    let settled = record.settled(at: at)
    let machine = SessionStateMachine(restoring: settled, config: config, now: at)
    var state = machine.published
    // A webhook speaks of the session, not of who watched it here.
    state.viewers = 0
    var writer = JSONWriter()
    writer.raw("{\"type\":")
    writer.string(type.rawValue)
    writer.raw(",\"timestamp\":")
    writer.string(Self.iso8601(at))
    writer.raw(",\"data\":{\"session\":")
    writer.string(session)
    writer.raw(",\"seq\":")
    writer.integer(record.seq)
    if type == .finished, let outcome = settled.outcome {
      writer.raw(",\"outcome\":")
      writer.string(outcome.rawValue)
    }
    writer.raw(",\"state\":")
    WireCodec.writeFields(.all, of: state, to: &writer)
    writer.raw("}}")
    self.init(
      id: Self.id(type, session: session, record: record), type: type, session: session,
      seq: record.seq, timestamp: at, body: writer.bytes)
  }

  /// `msg_` and 32 hex digits of a hash of what makes the change unique: the
  /// session, the record's seq and sequencing time (a session forgotten and
  /// made again starts its seq anew, at a later time), and the type (a run's
  /// start and its own finish share one record).
  static func id(_ type: WebhookEventType, session: String, record: SessionRecord) -> String {
    var message = Array(session.utf8)
    message.append(0)
    message.append(contentsOf: String(record.seq).utf8)
    message.append(0)
    message.append(contentsOf: String(record.updatedAt).utf8)
    message.append(0)
    message.append(contentsOf: type.rawValue.utf8)
    let digest = SHA256.digest(message)
    var hex = "msg_"
    for index in 0..<16 {
      let byte = digest[index]
      hex.append(Self.hexDigits[Int(byte >> 4)])
      hex.append(Self.hexDigits[Int(byte & 0xF)])
    }
    return hex
  }

  private static let hexDigits = Array("0123456789abcdef")

  /// `2026-12-01T18:30:00.250Z`: epoch ms as the UTC time Standard Webhooks'
  /// `timestamp` field shows, without Foundation (the core has none).
  static func iso8601(_ ms: Int64) -> String {
    let clamped = min(
      max(ms, SessionRecord.epochMsRange.lowerBound), SessionRecord.epochMsRange.upperBound)
    let days = clamped / 86_400_000
    let msOfDay = clamped % 86_400_000
    // Days to a civil date (Howard Hinnant's algorithm), for days ≥ 0.
    let z = days + 719_468
    let era = z / 146_097
    let dayOfEra = z - era * 146_097
    let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
    let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
    let monthIndex = (5 * dayOfYear + 2) / 153
    let day = dayOfYear - (153 * monthIndex + 2) / 5 + 1
    let month = monthIndex < 10 ? monthIndex + 3 : monthIndex - 9
    let year = yearOfEra + era * 400 + (month <= 2 ? 1 : 0)
    func pad(_ value: Int64, _ width: Int) -> String {
      let digits = String(value)
      return String(repeating: "0", count: max(0, width - digits.count)) + digits
    }
    return
      "\(pad(year, 4))-\(pad(month, 2))-\(pad(day, 2))T\(pad(msOfDay / 3_600_000, 2)):"
      + "\(pad(msOfDay / 60_000 % 60, 2)):\(pad(msOfDay / 1000 % 60, 2)).\(pad(msOfDay % 1000, 3))Z"
  }
}
