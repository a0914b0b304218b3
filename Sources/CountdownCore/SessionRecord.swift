/// The durable facts of one session: all that storage or a cluster keeps for
/// a restart to bring the session back. Ticks, labels and viewer counts are
/// derived from it, never stored, so the write load is one record per command.
///
/// The phase carries the one time it needs (`status`), so a running record
/// always has its deadline and a paused one its time left. Storage sees the
/// record flat (`fields`) and comes back through `init(validating:)`.
public struct SessionRecord: Equatable, Sendable {
  /// The phase with its time.
  public enum Status: Equatable, Sendable {
    case idle
    /// The deadline in epoch ms.
    case running(endsAt: Int64)
    /// The exact time left in ms.
    case paused(remainingMs: Int64)
    /// Since `startedAt` (epoch ms), until a `done` or `fail`, or `timeoutAt`.
    case waiting(startedAt: Int64, timeoutAt: Int64?)
    case finished(Outcome)
    /// Past the deadline (`since`, epoch ms) of a run that counts on.
    case overtime(since: Int64)
  }

  public var status: Status
  /// Seconds of the current or last run, adjustments included.
  public var duration: Int
  /// The run's own finished label, when its start named one; while waiting,
  /// the label the timeout finishes with; once finished, the label shown.
  public var finishedLabel: String?
  /// The label shown while waiting, when the wait named one.
  public var waitLabel: String?
  /// The session's seq when the command that wrote this record was applied.
  public var seq: UInt64
  /// Commands applied to the session since it was created.
  public var revision: UInt64
  /// When that command was sequenced (epoch ms); bounds the patches sent since.
  public var updatedAt: Int64
  /// The run's overtime and levels: `.none` unless running, paused or in overtime.
  public var run: RunOptions
  /// How far past zero a `stopped` run went (ms), and only there.
  public var overMs: Int64?
  /// The presenter's message, kept across runs until cleared.
  public var message: String?
  /// Every viewer's screen is blanked, kept across runs until turned off.
  public var blackout: Bool

  public init(
    _ status: Status = .idle, duration: Int = 0, finishedLabel: String? = nil,
    waitLabel: String? = nil, seq: UInt64 = 0, revision: UInt64 = 0, updatedAt: Int64 = 0,
    run: RunOptions = .none, overMs: Int64? = nil, message: String? = nil, blackout: Bool = false
  ) {
    self.status = status
    self.duration = duration
    self.finishedLabel = finishedLabel
    self.waitLabel = waitLabel
    self.seq = seq
    self.revision = revision
    self.updatedAt = updatedAt
    self.run = run
    self.overMs = overMs
    self.message = message
    self.blackout = blackout
  }

  public var phase: Phase {
    switch status {
    case .idle: .idle
    case .running: .running
    case .paused: .paused
    case .waiting: .waiting
    case .finished: .finished
    case .overtime: .overtime
    }
  }

  /// The deadline a run in overtime passed.
  public var overSince: Int64? {
    if case .overtime(let since) = status { return since }
    return nil
  }

  /// When the record finishes by itself if no command comes first: a run
  /// at its deadline (or a day past it, in overtime), a wait at its timeout.
  /// `settled(at:)` finishes it then, and Redis's deadline set holds the same moment.
  public var selfFinishAt: Int64? {
    switch status {
    case .running(let endsAt): run.overtime ? endsAt + Self.maxOvertimeMs : endsAt
    case .overtime(let since): since + Self.maxOvertimeMs
    case .waiting(_, let timeoutAt): timeoutAt
    case .idle, .paused, .finished: nil
    }
  }

  /// The deadline, while running.
  public var endsAt: Int64? {
    if case .running(let endsAt) = status { return endsAt }
    return nil
  }

  /// The time left, while paused.
  public var remainingMs: Int64? {
    if case .paused(let remainingMs) = status { return remainingMs }
    return nil
  }

  /// When the wait began, while waiting.
  public var startedAt: Int64? {
    if case .waiting(let startedAt, _) = status { return startedAt }
    return nil
  }

  /// When the wait times out, while waiting with a timeout.
  public var timeoutAt: Int64? {
    if case .waiting(_, let timeoutAt) = status { return timeoutAt }
    return nil
  }

  /// How the session ended, once finished.
  public var outcome: Outcome? {
    if case .finished(let outcome) = status { return outcome }
    return nil
  }

  /// Limits of the commands, shared with the page through `Public/constants.js`.
  public static let secondsRange = 1...86_400
  public static let adjustRange = -86_400...86_400
  /// How long a wait may last before it finishes by itself.
  public static let timeoutSecondsRange = 1...86_400
  /// How far ahead a deadline may be: at least a second, at most 30 days.
  public static let aheadMsRange: ClosedRange<Int64> = 1000...2_592_000_000

  /// Moments a record may hold (epoch ms, 1970 to the end of 9999): wide
  /// enough for any real deadline, narrow enough that a sum or difference of
  /// two of them, or of one and a duration, cannot overflow.
  public static let epochMsRange: ClosedRange<Int64> = 0...253_402_300_799_999
  /// Seconds a run may count in all, adjustments included: what storage keeps
  /// in a 32-bit column.
  public static let durationRange = 0...Int(Int32.max)
  /// How long overtime counts before the run stops by itself, so that an
  /// abandoned session cannot tick for ever.
  public static let maxOvertimeMs: Int64 = 86_400_000
  /// The longest presenter message, in Unicode scalars.
  public static let maxMessageLength = 140
  /// Seq and revision stay exact in a JavaScript number.
  public static let maxCounter: UInt64 = 1 << 53 - 1

  /// A finished label a client may set: 1 to 64 characters of text, with no
  /// control characters (U+0000–U+001F, U+007F), which would reach every
  /// viewer's screen and, with NUL, cut C strings short.
  public static func isValidFinishedLabel(_ label: String) -> Bool {
    isText(label, maxLength: SessionConfig.maxFinishedLabelLength)
  }

  /// A presenter message: 1 to 140 characters of text, no control characters.
  public static func isValidMessage(_ text: String) -> Bool {
    isText(text, maxLength: maxMessageLength)
  }

  /// 1 to `maxLength` Unicode scalars, none of them a control character.
  static func isText(_ text: String, maxLength: Int) -> Bool {
    let scalars = text.unicodeScalars
    guard !scalars.isEmpty, scalars.count <= maxLength else { return false }
    return !scalars.contains { $0.value < 0x20 || $0.value == 0x7F }
  }

  /// Why the record could not have come from the command rules (a field out
  /// of range), or nil: what `init(validating:)` checks beyond the shape.
  public var damage: String? { fields.damage }

  /// Whole seconds in `ms`, rounded up: what a countdown shows.
  public static func wholeSeconds(_ ms: Int64) -> Int64 {
    ms <= 0 ? 0 : ms / 1000 + (ms % 1000 == 0 ? 0 : 1)
  }
}
