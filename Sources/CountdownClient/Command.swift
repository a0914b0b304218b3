import Foundation

/// What a start asks of its run beyond its length (docs/protocol.md, `start`).
public struct StartOptions: Sendable, Hashable {
  /// Count on into overtime at zero instead of finishing.
  public var overtime: Bool
  /// The level turns warning, then danger, with this many seconds left (1 to 86400; danger
  /// below warning).
  public var warnAtSeconds: Int?
  public var dangerAtSeconds: Int?

  public init(overtime: Bool = false, warnAtSeconds: Int? = nil, dangerAtSeconds: Int? = nil) {
    self.overtime = overtime
    self.warnAtSeconds = warnAtSeconds
    self.dangerAtSeconds = dangerAtSeconds
  }
}

/// A command to a session, as docs/protocol.md's "Client → server" describes it. The server
/// checks every range; this type only spells the JSON.
public enum Command: Sendable, Hashable {
  /// Count down `seconds` (1 to 86400); nil for the server's `--default-seconds`.
  case start(seconds: Int? = nil, finishLabel: String? = nil, options: StartOptions = .init())
  /// Count down to a moment, epoch ms (1 s to 30 days after the server's time).
  case startUntil(epochMs: Int64, finishLabel: String? = nil, options: StartOptions = .init())
  /// End a run, before zero or in overtime: finished, `stopped`, with the time over.
  case stop
  /// Show `text` (1 to 140 characters, no control characters) on every screen; nil clears it.
  case message(String?)
  /// Blank every viewer's screen, or show it again.
  case blackout(Bool)
  case pause
  case resume
  /// Move the deadline by `seconds` (non-zero, −86400 to 86400).
  case adjust(seconds: Int)
  case cancel
  /// The spinner with no deadline, for a job outside to end with `done` or `fail`.
  case wait(label: String? = nil, timeoutSeconds: Int? = nil, timeoutLabel: String? = nil)
  case done(label: String? = nil)
  case fail(label: String? = nil)
  /// `--control key`: a new controller key, in the ack's `key`.
  case rotateKey

  /// Count down to `date`.
  public static func start(
    until date: Date, finishLabel: String? = nil, options: StartOptions = .init()
  ) -> Command {
    .startUntil(
      epochMs: Int64((date.timeIntervalSince1970 * 1000).rounded()), finishLabel: finishLabel,
      options: options)
  }

  /// Count down to the next `HH:MM` (24-hour, local to `calendar`) after `now`: today's if it
  /// is still ahead, else tomorrow's. Nil when `text` is not a time of day.
  public static func start(
    untilTimeOfDay text: String, now: Date = Date(), calendar: Calendar = .current,
    finishLabel: String? = nil
  ) -> Command? {
    guard let date = nextTimeOfDay(text, after: now, calendar: calendar) else { return nil }
    return .start(until: date, finishLabel: finishLabel)
  }

  /// The next moment after `now` whose local time is `text` (`H:MM` or `HH:MM`).
  public static func nextTimeOfDay(_ text: String, after now: Date, calendar: Calendar) -> Date? {
    let parts = text.split(separator: ":", omittingEmptySubsequences: false)
    guard parts.count == 2, (1...2).contains(parts[0].count), parts[1].count == 2,
      parts.allSatisfy({ $0.allSatisfy(\.isASCII) && $0.allSatisfy(\.isNumber) }),
      let hour = Int(parts[0]), let minute = Int(parts[1]), (0...23).contains(hour),
      (0...59).contains(minute)
    else { return nil }
    return calendar.nextDate(
      after: now, matching: DateComponents(hour: hour, minute: minute, second: 0),
      matchingPolicy: .nextTime)
  }

  /// The op's name on the wire.
  public var op: String {
    switch self {
    case .start, .startUntil: return "start"
    case .stop: return "stop"
    case .message: return "message"
    case .blackout: return "blackout"
    case .pause: return "pause"
    case .resume: return "resume"
    case .adjust: return "adjust"
    case .cancel: return "cancel"
    case .wait: return "wait"
    case .done: return "done"
    case .fail: return "fail"
    case .rotateKey: return "rotate_key"
    }
  }

  private struct Body: Encodable {
    var op: String
    var seconds: Int?
    var until: Int64?
    var finishedLabel: String?
    var label: String?
    var timeoutSeconds: Int?
    var timeoutLabel: String?
    var overtime: Bool?
    var warnAtSeconds: Int?
    var dangerAtSeconds: Int?
    /// A message's text: `.some(nil)` is sent as `"text":null`, which clears it.
    var text: String??
    var on: Bool?

    enum CodingKeys: String, CodingKey {
      case op, seconds, until, finishedLabel, label, timeoutSeconds, timeoutLabel, overtime
      case warnAtSeconds, dangerAtSeconds, text, on
    }

    func encode(to encoder: any Encoder) throws {
      var c = encoder.container(keyedBy: CodingKeys.self)
      try c.encode(op, forKey: .op)
      try c.encodeIfPresent(seconds, forKey: .seconds)
      try c.encodeIfPresent(until, forKey: .until)
      try c.encodeIfPresent(finishedLabel, forKey: .finishedLabel)
      try c.encodeIfPresent(label, forKey: .label)
      try c.encodeIfPresent(timeoutSeconds, forKey: .timeoutSeconds)
      try c.encodeIfPresent(timeoutLabel, forKey: .timeoutLabel)
      try c.encodeIfPresent(overtime, forKey: .overtime)
      try c.encodeIfPresent(warnAtSeconds, forKey: .warnAtSeconds)
      try c.encodeIfPresent(dangerAtSeconds, forKey: .dangerAtSeconds)
      if let text { try c.encode(text, forKey: .text) }
      try c.encodeIfPresent(on, forKey: .on)
    }

    mutating func apply(_ options: StartOptions) {
      overtime = options.overtime ? true : nil
      warnAtSeconds = options.warnAtSeconds
      dangerAtSeconds = options.dangerAtSeconds
    }
  }

  /// The JSON body, the same bytes on every retry.
  func body() throws -> Data {
    var b = Body(op: op)
    switch self {
    case .start(let seconds, let finishLabel, let options):
      b.seconds = seconds
      b.finishedLabel = finishLabel
      b.apply(options)
    case .startUntil(let epochMs, let finishLabel, let options):
      b.until = epochMs
      b.finishedLabel = finishLabel
      b.apply(options)
    case .message(let text):
      b.text = .some(text)
    case .blackout(let on):
      b.on = on
    case .adjust(let seconds):
      b.seconds = seconds
    case .wait(let label, let timeoutSeconds, let timeoutLabel):
      b.label = label
      b.timeoutSeconds = timeoutSeconds
      b.timeoutLabel = timeoutLabel
    case .done(let label), .fail(let label):
      b.label = label
    case .pause, .resume, .cancel, .rotateKey, .stop:
      break
    }
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
    return try encoder.encode(b)
  }
}

/// The server's answer to an applied command.
public struct Ack: Sendable, Hashable, Decodable {
  /// The session's `seq` as the command applied it; any later snapshot's is at least this.
  public let seq: Int64
  /// The session as the command left it.
  public let state: SessionState
  /// `rotateKey` only: the new controller key (absent when the answer is a replay).
  public let key: String?

  enum CodingKeys: String, CodingKey { case type, seq, state, key }

  public init(seq: Int64, state: SessionState, key: String? = nil) {
    self.seq = seq
    self.state = state
    self.key = key
  }

  public init(from decoder: any Decoder) throws {
    let c = try decoder.container(keyedBy: CodingKeys.self)
    guard try c.decode(String.self, forKey: .type) == "ack" else {
      throw DecodingError.dataCorruptedError(
        forKey: .type, in: c, debugDescription: "not an ack")
    }
    self.init(
      seq: try c.decodeInt64(.seq, in: Bounds.seq),
      state: try c.decode(SessionState.self, forKey: .state),
      key: try c.decodeIfPresent(String.self, forKey: .key))
  }
}
