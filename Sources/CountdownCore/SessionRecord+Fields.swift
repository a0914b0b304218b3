extension SessionRecord {
  /// Why a record that came from outside (a database row, a Redis hash or
  /// message) cannot be taken as it is.
  public struct Damage: Error, Equatable, Sendable {
    public let reason: String
    public init(_ reason: String) { self.reason = reason }
  }

  /// The record as storage lays it out: a phase, its optional times and
  /// labels, and a finished record's outcome, one column or hash field each. The SQLite row, the Redis hash and the
  /// record line all read and write this form, so their layout stays what
  /// it was before the phase carried its time.
  public struct Fields: Equatable, Sendable {
    public var phase: Phase
    public var duration: Int
    public var endsAt: Int64?
    public var remainingMs: Int64?
    public var finishedLabel: String?
    public var seq: UInt64
    public var revision: UInt64
    public var updatedAt: Int64
    public var startedAt: Int64?
    public var timeoutAt: Int64?
    public var waitLabel: String?
    public var outcome: Outcome?
    /// The run's options (running, paused, overtime only); the overtime
    /// phase keeps its `overSince` in `endsAt`, the deadline it passed.
    public var overtime: Bool
    public var warnAtSeconds: Int?
    public var dangerAtSeconds: Int?
    public var overMs: Int64?
    public var message: String?
    public var blackout: Bool

    public init(
      phase: Phase = .idle, duration: Int = 0, endsAt: Int64? = nil, remainingMs: Int64? = nil,
      finishedLabel: String? = nil, seq: UInt64 = 0, revision: UInt64 = 0, updatedAt: Int64 = 0,
      startedAt: Int64? = nil, timeoutAt: Int64? = nil, waitLabel: String? = nil,
      outcome: Outcome? = nil, overtime: Bool = false, warnAtSeconds: Int? = nil,
      dangerAtSeconds: Int? = nil, overMs: Int64? = nil, message: String? = nil,
      blackout: Bool = false
    ) {
      self.phase = phase
      self.duration = duration
      self.endsAt = endsAt
      self.remainingMs = remainingMs
      self.finishedLabel = finishedLabel
      self.seq = seq
      self.revision = revision
      self.updatedAt = updatedAt
      self.startedAt = startedAt
      self.timeoutAt = timeoutAt
      self.waitLabel = waitLabel
      self.outcome = outcome
      self.overtime = overtime
      self.warnAtSeconds = warnAtSeconds
      self.dangerAtSeconds = dangerAtSeconds
      self.overMs = overMs
      self.message = message
      self.blackout = blackout
    }

    /// Why these fields are no record, or nil when `init(validating:)` takes them.
    public var damage: String? {
      do throws(Damage) {
        _ = try SessionRecord(validating: self)
        return nil
      } catch {
        return error.reason
      }
    }
  }

  /// The flat view, for storage to write.
  public var fields: Fields {
    Fields(
      phase: phase, duration: duration, endsAt: endsAt ?? overSince, remainingMs: remainingMs,
      finishedLabel: finishedLabel, seq: seq, revision: revision, updatedAt: updatedAt,
      startedAt: startedAt, timeoutAt: timeoutAt, waitLabel: waitLabel, outcome: outcome,
      overtime: run.overtime, warnAtSeconds: run.warnAtSeconds,
      dangerAtSeconds: run.dangerAtSeconds, overMs: overMs, message: message, blackout: blackout)
  }

  /// The one way in from storage: every field in range and agreeing with its
  /// phase, checked before any arithmetic, or the damage that says which not.
  public init(validating fields: Fields) throws(Damage) {
    guard Self.durationRange.contains(fields.duration) else {
      throw Damage("duration \(fields.duration) out of range")
    }
    guard Self.epochMsRange.contains(fields.updatedAt) else {
      throw Damage("updatedAt \(fields.updatedAt) out of range")
    }
    guard fields.seq <= Self.maxCounter, fields.revision <= Self.maxCounter else {
      throw Damage("seq or revision out of range")
    }
    if let label = fields.finishedLabel, !Self.isValidFinishedLabel(label) {
      throw Damage(
        "finishedLabel is not 1 to \(SessionConfig.maxFinishedLabelLength) characters of text")
    }
    if let label = fields.waitLabel {
      guard Self.isValidFinishedLabel(label) else {
        throw Damage(
          "waitLabel is not 1 to \(SessionConfig.maxFinishedLabelLength) characters of text")
      }
      guard fields.phase == .waiting else { throw Damage("only a waiting record holds waitLabel") }
    }
    guard (fields.outcome != nil) == (fields.phase == .finished) else {
      throw Damage("a finished record, and only a finished one, holds an outcome")
    }
    guard fields.phase == .waiting || (fields.startedAt == nil && fields.timeoutAt == nil) else {
      throw Damage("only a waiting record holds startedAt or timeoutAt")
    }
    if let message = fields.message, !Self.isValidMessage(message) {
      throw Damage("message is not 1 to \(Self.maxMessageLength) characters of text")
    }
    let run = RunOptions(
      overtime: fields.overtime, warnAtSeconds: fields.warnAtSeconds,
      dangerAtSeconds: fields.dangerAtSeconds)
    if let problem = run.problem { throw Damage(problem) }
    let holdsRun = [.running, .paused, .overtime].contains(fields.phase)
    guard holdsRun || run == .none else {
      throw Damage("only a running, paused or overtime record holds overtime or levels")
    }
    guard fields.phase != .overtime || fields.overtime else {
      throw Damage("an overtime record must have overtime on")
    }
    if fields.outcome == .stopped {
      guard let overMs = fields.overMs, (0...Self.maxOvertimeMs).contains(overMs) else {
        throw Damage("a stopped record needs overMs from 0 to \(Self.maxOvertimeMs)")
      }
    } else if fields.overMs != nil {
      throw Damage("only a stopped record holds overMs")
    }
    let status: Status
    switch fields.phase {
    case .running:
      guard let endsAt = fields.endsAt, Self.epochMsRange.contains(endsAt),
        fields.remainingMs == nil
      else { throw Damage("a running record needs endsAt in range and no remainingMs") }
      // No command sets a deadline more than the longest run past its own
      // time; a later one would overflow the 32-bit seconds a tick shows.
      guard endsAt - fields.updatedAt <= Self.aheadMsRange.upperBound else {
        throw Damage("a running record's endsAt is more than 30 days after its updatedAt")
      }
      status = .running(endsAt: endsAt)
    case .paused:
      guard let remainingMs = fields.remainingMs,
        (1...Self.aheadMsRange.upperBound).contains(remainingMs), fields.endsAt == nil
      else { throw Damage("a paused record needs remainingMs in range and no endsAt") }
      status = .paused(remainingMs: remainingMs)
    case .waiting:
      guard let startedAt = fields.startedAt, Self.epochMsRange.contains(startedAt),
        startedAt <= fields.updatedAt, fields.endsAt == nil, fields.remainingMs == nil,
        fields.duration == 0
      else {
        throw Damage(
          "a waiting record needs startedAt in range, no later than updatedAt, and no endsAt, "
            + "remainingMs or duration")
      }
      // Both are in range, so the difference cannot overflow.
      if let timeoutAt = fields.timeoutAt {
        guard Self.epochMsRange.contains(timeoutAt),
          (Int64(Self.timeoutSecondsRange.lowerBound) * 1000...Int64(
            Self.timeoutSecondsRange.upperBound) * 1000).contains(timeoutAt - startedAt)
        else { throw Damage("a waiting record's timeoutAt is not 1 s to 1 day after startedAt") }
      }
      status = .waiting(startedAt: startedAt, timeoutAt: fields.timeoutAt)
    case .overtime:
      // A run's record is written when a command changes it, so the deadline
      // it passed may be after the record's time (as a running one's may),
      // or up to a day before it. Both are in range: no overflow.
      guard let since = fields.endsAt, Self.epochMsRange.contains(since), fields.remainingMs == nil,
        since - fields.updatedAt <= Self.aheadMsRange.upperBound,
        fields.updatedAt - since < Self.maxOvertimeMs
      else {
        throw Damage(
          "an overtime record needs endsAt (its overSince) in range, no more than 30 days after "
            + "updatedAt or a day before it, and no remainingMs")
      }
      status = .overtime(since: since)
    case .idle, .finished:
      guard fields.endsAt == nil, fields.remainingMs == nil else {
        throw Damage("an \(fields.phase.rawValue) record holds no endsAt or remainingMs")
      }
      status = fields.outcome.map { .finished($0) } ?? .idle
    }
    self.init(
      status, duration: fields.duration, finishedLabel: fields.finishedLabel,
      waitLabel: fields.waitLabel, seq: fields.seq, revision: fields.revision,
      updatedAt: fields.updatedAt, run: run, overMs: fields.overMs, message: fields.message,
      blackout: fields.blackout)
  }
}
