import Foundation

/// A session's phase (docs/protocol.md, State fields).
public enum Phase: String, Sendable, Hashable, Codable, CaseIterable {
  case idle, running, paused, finished, waiting
  /// A run started with overtime passed zero and counts up from `overSince`.
  case overtime
}

/// How a finished session ended.
public enum Outcome: String, Sendable, Hashable, Codable, CaseIterable {
  /// A countdown ran out, or was adjusted to nothing.
  case elapsed
  case done, failed, timeout
  /// Ended by a `stop` (before zero or in overtime), or a day into overtime.
  case stopped
}

/// How near its end a run is: the colour every screen shows.
public enum Level: String, Sendable, Hashable, Codable, CaseIterable {
  case normal, warning, danger
  /// In overtime.
  case over
}

/// The bounds a value from the server is checked against before any arithmetic on it:
/// the contract's (Public/constants.js) epoch and duration ranges.
enum Bounds {
  /// Epoch ms from 1970 to the last ms of year 9999.
  static let epochMs: ClosedRange<Int64> = 0...253_402_300_799_999
  static let durationSeconds: ClosedRange<Int64> = 0...2_147_483_647
  /// A paused run's milliseconds left: at most the longest run.
  static let remainingMs: ClosedRange<Int64> = 0...(durationSeconds.upperBound * 1000)
  static let count: ClosedRange<Int64> = 0...Int64(Int32.max)
  static let seq: ClosedRange<Int64> = 0...Int64.max
  /// A run's warning and danger times, in seconds left.
  static let levelSeconds: ClosedRange<Int64> = 1...86_400
  /// Time over a stopped run kept: at most the day overtime lasts.
  static let overMs: ClosedRange<Int64> = 0...86_400_000
}

/// A session's state as the server sends it: the snapshot's `state` object, kept up to
/// date by patches. Every field is the server's; nothing here is guessed.
public struct SessionState: Sendable, Hashable {
  public var phase: Phase
  /// True exactly while running, waiting or in overtime: show the spinner.
  public var spinner: Bool
  /// Whether the big button may be pressed (false while running, waiting or in overtime).
  public var enabled: Bool
  /// The server's label: seconds left, the wait's label, or how it finished.
  public var label: String
  /// Whole seconds left, rounded up, at the server's last tick.
  public var remaining: Int
  /// The seconds of the current or last run, adjustments included.
  public var duration: Int
  /// While running: the deadline, epoch ms on the server's clock.
  public var endsAt: Int64?
  /// While paused: the exact milliseconds left.
  public var remainingMs: Int64?
  /// While waiting: when the wait began, epoch ms on the server's clock.
  public var startedAt: Int64?
  /// While waiting with a timeout: when it times out.
  public var timeoutAt: Int64?
  /// When finished: how.
  public var outcome: Outcome?
  public var viewers: Int
  /// The server cannot confirm this state with its cluster right now.
  public var stale: Bool
  /// The colour of the moment; `normal` from a server that has no levels.
  public var level: Level
  /// In overtime: the deadline the run passed, epoch ms; it counts up from there.
  public var overSince: Int64?
  /// Finished `stopped`: the milliseconds past the deadline (0 when stopped before it).
  public var overMs: Int64?
  /// The current run goes into overtime at zero.
  public var overtime: Bool
  /// The current run's warning and danger times, in seconds left.
  public var warnAtSeconds: Int?
  public var dangerAtSeconds: Int?
  /// The presenter's message, kept across runs until cleared.
  public var message: String?
  /// Viewers' screens are blanked.
  public var blackout: Bool

  public init(
    phase: Phase, spinner: Bool, enabled: Bool, label: String, remaining: Int = 0,
    duration: Int = 0, endsAt: Int64? = nil, remainingMs: Int64? = nil, startedAt: Int64? = nil,
    timeoutAt: Int64? = nil, outcome: Outcome? = nil, viewers: Int = 0, stale: Bool = false,
    level: Level = .normal, overSince: Int64? = nil, overMs: Int64? = nil, overtime: Bool = false,
    warnAtSeconds: Int? = nil, dangerAtSeconds: Int? = nil, message: String? = nil,
    blackout: Bool = false
  ) {
    self.phase = phase
    self.spinner = spinner
    self.enabled = enabled
    self.label = label
    self.remaining = remaining
    self.duration = duration
    self.endsAt = endsAt
    self.remainingMs = remainingMs
    self.startedAt = startedAt
    self.timeoutAt = timeoutAt
    self.outcome = outcome
    self.viewers = viewers
    self.stale = stale
    self.level = level
    self.overSince = overSince
    self.overMs = overMs
    self.overtime = overtime
    self.warnAtSeconds = warnAtSeconds
    self.dangerAtSeconds = dangerAtSeconds
    self.message = message
    self.blackout = blackout
  }

  /// Milliseconds left at `serverNow` (epoch ms on the server's clock): from the deadline
  /// while running, so it never drifts; the frozen value while paused; nil otherwise.
  public func millisecondsLeft(serverNow: Int64) -> Int64? {
    switch phase {
    case .running:
      guard let endsAt else { return Int64(remaining) * 1000 }
      let (left, overflow) = endsAt.subtractingReportingOverflow(serverNow)
      return overflow ? 0 : max(0, left)
    case .paused:
      return remainingMs ?? Int64(remaining) * 1000
    default:
      return nil
    }
  }

  /// Milliseconds past the deadline at `serverNow`, in overtime; nil otherwise.
  public func millisecondsOver(serverNow: Int64) -> Int64? {
    guard phase == .overtime, let overSince else { return nil }
    let (ms, overflow) = serverNow.subtractingReportingOverflow(overSince)
    return overflow ? 0 : max(0, ms)
  }

  /// Milliseconds elapsed at `serverNow`: since the wait began while waiting; of the run
  /// (its duration less what is left) while running or paused; nil otherwise.
  public func millisecondsElapsed(serverNow: Int64) -> Int64? {
    switch phase {
    case .waiting:
      guard let startedAt else { return nil }
      let (ms, overflow) = serverNow.subtractingReportingOverflow(startedAt)
      return overflow ? 0 : max(0, ms)
    case .running, .paused:
      guard let left = millisecondsLeft(serverNow: serverNow) else { return nil }
      return max(0, Int64(duration) * 1000 - left)
    default:
      return nil
    }
  }
}

// MARK: - Reading the server's JSON

/// The JSON fields of a state object, shared by snapshots and patches.
enum StateKey: String, CodingKey, CaseIterable {
  case phase, spinner, enabled, label, remaining, duration, endsAt, remainingMs, startedAt
  case timeoutAt, outcome, viewers, stale
  case level, overSince, overMs, overtime, warnAtSeconds, dangerAtSeconds, message, blackout
}

extension KeyedDecodingContainer {
  /// An integer field checked against `range` before anyone does arithmetic on it.
  func decodeInt64(_ key: Key, in range: ClosedRange<Int64>) throws -> Int64 {
    let v = try decode(Int64.self, forKey: key)
    guard range.contains(v) else {
      throw DecodingError.dataCorruptedError(
        forKey: key, in: self, debugDescription: "\(v) is outside \(range)")
    }
    return v
  }

  func decodeInt64IfPresent(_ key: Key, in range: ClosedRange<Int64>) throws -> Int64? {
    guard contains(key), try !decodeNil(forKey: key) else { return nil }
    return try decodeInt64(key, in: range)
  }
}

extension SessionState: Decodable {
  public init(from decoder: any Decoder) throws {
    let c = try decoder.container(keyedBy: StateKey.self)
    self.init(
      phase: try c.decode(Phase.self, forKey: .phase),
      spinner: try c.decode(Bool.self, forKey: .spinner),
      enabled: try c.decode(Bool.self, forKey: .enabled),
      label: try c.decode(String.self, forKey: .label),
      remaining: Int(try c.decodeInt64(.remaining, in: Bounds.durationSeconds)),
      duration: Int(try c.decodeInt64(.duration, in: Bounds.durationSeconds)),
      endsAt: try c.decodeInt64IfPresent(.endsAt, in: Bounds.epochMs),
      remainingMs: try c.decodeInt64IfPresent(.remainingMs, in: Bounds.remainingMs),
      startedAt: try c.decodeInt64IfPresent(.startedAt, in: Bounds.epochMs),
      timeoutAt: try c.decodeInt64IfPresent(.timeoutAt, in: Bounds.epochMs),
      outcome: try c.decodeIfPresent(Outcome.self, forKey: .outcome),
      viewers: Int(try c.decodeInt64(.viewers, in: Bounds.count)),
      stale: try c.decodeIfPresent(Bool.self, forKey: .stale) ?? false,
      // A server from before the stage sends none of these: what it means is normal, off, none.
      level: try c.decodeIfPresent(Level.self, forKey: .level) ?? .normal,
      overSince: try c.decodeInt64IfPresent(.overSince, in: Bounds.epochMs),
      overMs: try c.decodeInt64IfPresent(.overMs, in: Bounds.overMs),
      overtime: try c.decodeIfPresent(Bool.self, forKey: .overtime) ?? false,
      warnAtSeconds: try c.decodeInt64IfPresent(.warnAtSeconds, in: Bounds.levelSeconds).map {
        Int($0)
      },
      dangerAtSeconds: try c.decodeInt64IfPresent(.dangerAtSeconds, in: Bounds.levelSeconds).map {
        Int($0)
      },
      message: try c.decodeIfPresent(String.self, forKey: .message),
      blackout: try c.decodeIfPresent(Bool.self, forKey: .blackout) ?? false)
  }
}

/// An RFC 7396 merge patch over a state: only the fields that changed; a `null` removes
/// (for the optional fields: sets to nil).
struct StatePatch: Decodable, Sendable {
  private var apply: @Sendable (inout SessionState) -> Void = { _ in }

  init(from decoder: any Decoder) throws {
    let c = try decoder.container(keyedBy: StateKey.self)
    var steps: [@Sendable (inout SessionState) -> Void] = []
    for key in StateKey.allCases where c.contains(key) {
      let isNull = try c.decodeNil(forKey: key)
      switch key {
      case .phase:
        let v = try c.decode(Phase.self, forKey: key)
        steps.append { $0.phase = v }
      case .spinner:
        let v = try c.decode(Bool.self, forKey: key)
        steps.append { $0.spinner = v }
      case .enabled:
        let v = try c.decode(Bool.self, forKey: key)
        steps.append { $0.enabled = v }
      case .label:
        let v = try c.decode(String.self, forKey: key)
        steps.append { $0.label = v }
      case .remaining:
        let v = Int(try c.decodeInt64(key, in: Bounds.durationSeconds))
        steps.append { $0.remaining = v }
      case .duration:
        let v = Int(try c.decodeInt64(key, in: Bounds.durationSeconds))
        steps.append { $0.duration = v }
      case .viewers:
        let v = Int(try c.decodeInt64(key, in: Bounds.count))
        steps.append { $0.viewers = v }
      case .stale:
        let v = isNull ? false : try c.decode(Bool.self, forKey: key)
        steps.append { $0.stale = v }
      case .endsAt:
        let v = try c.decodeInt64IfPresent(key, in: Bounds.epochMs)
        steps.append { $0.endsAt = v }
      case .remainingMs:
        let v = try c.decodeInt64IfPresent(key, in: Bounds.remainingMs)
        steps.append { $0.remainingMs = v }
      case .startedAt:
        let v = try c.decodeInt64IfPresent(key, in: Bounds.epochMs)
        steps.append { $0.startedAt = v }
      case .timeoutAt:
        let v = try c.decodeInt64IfPresent(key, in: Bounds.epochMs)
        steps.append { $0.timeoutAt = v }
      case .outcome:
        let v = try c.decodeIfPresent(Outcome.self, forKey: key)
        steps.append { $0.outcome = v }
      case .level:
        let v = isNull ? Level.normal : try c.decode(Level.self, forKey: key)
        steps.append { $0.level = v }
      case .overSince:
        let v = try c.decodeInt64IfPresent(key, in: Bounds.epochMs)
        steps.append { $0.overSince = v }
      case .overMs:
        let v = try c.decodeInt64IfPresent(key, in: Bounds.overMs)
        steps.append { $0.overMs = v }
      case .overtime:
        let v = isNull ? false : try c.decode(Bool.self, forKey: key)
        steps.append { $0.overtime = v }
      case .warnAtSeconds:
        let v = try c.decodeInt64IfPresent(key, in: Bounds.levelSeconds).map { Int($0) }
        steps.append { $0.warnAtSeconds = v }
      case .dangerAtSeconds:
        let v = try c.decodeInt64IfPresent(key, in: Bounds.levelSeconds).map { Int($0) }
        steps.append { $0.dangerAtSeconds = v }
      case .message:
        let v = try c.decodeIfPresent(String.self, forKey: key)
        steps.append { $0.message = v }
      case .blackout:
        let v = isNull ? false : try c.decode(Bool.self, forKey: key)
        steps.append { $0.blackout = v }
      }
    }
    let all = steps
    apply = { state in for step in all { step(&state) } }
  }

  func applied(to state: SessionState) -> SessionState {
    var s = state
    apply(&s)
    return s
  }
}

/// A session as `GET /api/v1/sessions/{id}` answers it, and as an event stream's first event.
public struct SessionSnapshot: Sendable, Hashable, Decodable {
  public let session: String
  /// Random each time the server starts: a new one means everything held before is gone.
  public let epoch: String
  public let seq: Int64
  /// The server's clock when it wrote the snapshot, epoch ms.
  public let serverTime: Int64
  public let state: SessionState

  enum CodingKeys: String, CodingKey { case session, epoch, seq, serverTime, state }

  public init(session: String, epoch: String, seq: Int64, serverTime: Int64, state: SessionState) {
    self.session = session
    self.epoch = epoch
    self.seq = seq
    self.serverTime = serverTime
    self.state = state
  }

  public init(from decoder: any Decoder) throws {
    let c = try decoder.container(keyedBy: CodingKeys.self)
    self.init(
      session: try c.decode(String.self, forKey: .session),
      epoch: try c.decode(String.self, forKey: .epoch),
      seq: try c.decodeInt64(.seq, in: Bounds.seq),
      serverTime: try c.decodeInt64(.serverTime, in: Bounds.epochMs),
      state: try c.decode(SessionState.self, forKey: .state))
  }
}

/// A patch event's frame.
struct PatchFrame: Decodable, Sendable {
  let seq: Int64
  let patch: StatePatch

  enum CodingKeys: String, CodingKey { case seq, patch }

  init(from decoder: any Decoder) throws {
    let c = try decoder.container(keyedBy: CodingKeys.self)
    seq = try c.decodeInt64(.seq, in: Bounds.seq)
    patch = try c.decode(StatePatch.self, forKey: .patch)
  }
}
