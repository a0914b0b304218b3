/// The command rules: what each `SessionCommand` makes of each phase. A new
/// op's rules go in `applying`'s switch, which lists every (command, status)
/// pair without a `default`, and in countdown.lua's `RULES`.
extension SessionRecord {
  /// The record as it stands at `now`: a run whose deadline has passed is
  /// finished (elapsed), and so is a wait whose timeout has (timeout, with
  /// the label the wait set for it).
  public func settled(at now: Int64) -> SessionRecord {
    var copy = self
    switch status {
    case .running(let endsAt) where endsAt <= now && run.overtime:
      copy.status = .overtime(since: endsAt)
      return copy.settled(at: now)
    case .running(let endsAt) where endsAt <= now:
      copy.status = .finished(.elapsed)
      copy.run = .none
    case .overtime(let since)
    where Self.span(from: since, to: now).map { $0 >= Self.maxOvertimeMs } ?? (now > since):
      copy.status = .finished(.stopped)
      copy.overMs = Self.maxOvertimeMs
      copy.run = .none
    case .waiting(_, let timeoutAt?) where timeoutAt <= now:
      copy.status = .finished(.timeout)
      copy.waitLabel = nil
    default:
      return self
    }
    return copy
  }

  /// The record after `command`, sequenced at `at`, or the error the command
  /// gets. Pure: the in-memory and SQLite sequencers call it, and Redis's
  /// function mirrors it, so a command replayed anywhere gives the same record.
  ///
  /// Every number that came from outside (a client's deadline, a record
  /// read back) is checked against its range before any arithmetic, and every
  /// sum or difference of times reports overflow rather than trapping: a
  /// result outside `epochMsRange` or `aheadMsRange` is `bad_request`. A
  /// clock outside `epochMsRange` (a broken host) is `unavailable`, since no
  /// record made at it could be stored.
  public func applying(_ command: SessionCommand, at: Int64) -> Result<SessionRecord, ErrorCode> {
    guard Self.epochMsRange.contains(at) else { return .failure(.unavailable) }
    var next = settled(at: at)
    switch (command, next.status) {
    case (.start, .running), (.start, .paused), (.start, .waiting), (.start, .overtime):
      return .failure(.busy)
    case (.start(let length, let label, let options), .idle),
      (.start(let length, let label, let options), .finished):
      if let label, !Self.isValidFinishedLabel(label) { return .failure(.badRequest) }
      guard options.isValid else { return .failure(.badRequest) }
      let endsAt: Int64
      switch length {
      case .seconds(let seconds):
        guard Self.secondsRange.contains(seconds),
          let deadline = Self.moment(at, plusMs: Int64(seconds) * 1000)
        else { return .failure(.badRequest) }
        endsAt = deadline
      case .until(let deadline):
        guard Self.epochMsRange.contains(deadline),
          let ahead = Self.span(from: at, to: deadline), Self.aheadMsRange.contains(ahead)
        else { return .failure(.badRequest) }
        endsAt = deadline
      }
      next.status = .running(endsAt: endsAt)
      next.duration = Int(Self.wholeSeconds(endsAt - at))
      next.finishedLabel = label
      next.run = options
      next.overMs = nil
    case (.cancel, .running), (.cancel, .paused), (.cancel, .waiting), (.cancel, .overtime):
      next.status = .idle
      next.waitLabel = nil
      next.run = .none
    case (.cancel, .idle), (.cancel, .finished):
      return .failure(.notRunning)
    case (.stop, .running), (.stop, .paused):
      next.status = .finished(.stopped)
      next.overMs = 0
      next.run = .none
    case (.stop, .overtime(let since)):
      next.status = .finished(.stopped)
      // Settled at `at`, so less than a day has passed since the deadline.
      next.overMs = max(0, at - since)
      next.run = .none
    case (.stop, .idle), (.stop, .finished), (.stop, .waiting):
      return .failure(.notRunning)
    case (.message(let text), _):
      if let text, !Self.isValidMessage(text) { return .failure(.badRequest) }
      next.message = text
    case (.blackout(let on), _):
      next.blackout = on
    case (.pause, .running(let endsAt)):
      // A clock stepped back by weeks could leave more than a run may hold.
      guard let left = Self.span(from: at, to: endsAt) else { return .failure(.badRequest) }
      next.status = .paused(remainingMs: min(left, Self.aheadMsRange.upperBound))
    case (.pause, .idle), (.pause, .paused), (.pause, .finished), (.pause, .waiting),
      (.pause, .overtime):
      return .failure(.notRunning)
    case (.resume, .paused(let left)):
      guard let endsAt = Self.moment(at, plusMs: left) else { return .failure(.badRequest) }
      next.status = .running(endsAt: endsAt)
    case (.resume, .idle), (.resume, .running), (.resume, .finished), (.resume, .waiting),
      (.resume, .overtime):
      return .failure(.notPaused)
    case (.adjust(let seconds), .running), (.adjust(let seconds), .paused),
      (.adjust(let seconds), .overtime):
      guard seconds != 0, Self.adjustRange.contains(seconds) else { return .failure(.badRequest) }
      let delta = Int64(seconds) * 1000
      let before: Int64?
      switch next.status {
      case .running(let endsAt), .overtime(let endsAt): before = Self.span(from: at, to: endsAt)
      case .paused(let remainingMs): before = remainingMs
      case .idle, .finished, .waiting: before = nil
      }
      guard let before, case (let left, false) = before.addingReportingOverflow(delta),
        left <= Self.aheadMsRange.upperBound
      else { return .failure(.badRequest) }
      // Clamped both ways, so a run adjusted for ever never leaves what storage keeps.
      next.duration = min(
        Self.durationRange.upperBound, max(Self.durationRange.lowerBound, next.duration + seconds))
      if left <= 0 && next.run.overtime {
        // Counts on from the deadline the adjustment implies.
        guard left > -Self.maxOvertimeMs, let since = Self.moment(at, plusMs: left) else {
          return .failure(.badRequest)
        }
        next.status = .overtime(since: since)
      } else if left <= 0 {
        next.status = .finished(.elapsed)
        next.run = .none
      } else if case .paused = next.status {
        next.status = .paused(remainingMs: left)
      } else {
        guard let endsAt = Self.moment(at, plusMs: left) else { return .failure(.badRequest) }
        next.status = .running(endsAt: endsAt)
      }
    case (.adjust, .idle), (.adjust, .finished), (.adjust, .waiting):
      return .failure(.notRunning)
    case (.wait, .running), (.wait, .paused), (.wait, .waiting), (.wait, .overtime):
      return .failure(.busy)
    case (.wait(let label, let timeoutSeconds, let timeoutLabel), .idle),
      (.wait(let label, let timeoutSeconds, let timeoutLabel), .finished):
      for label in [label, timeoutLabel] {
        if let label, !Self.isValidFinishedLabel(label) { return .failure(.badRequest) }
      }
      var timeoutAt: Int64?
      if let timeoutSeconds {
        guard Self.timeoutSecondsRange.contains(timeoutSeconds),
          let deadline = Self.moment(at, plusMs: Int64(timeoutSeconds) * 1000)
        else { return .failure(.badRequest) }
        timeoutAt = deadline
      }
      next.status = .waiting(startedAt: at, timeoutAt: timeoutAt)
      next.duration = 0
      next.waitLabel = label
      next.finishedLabel = timeoutLabel
      next.overMs = nil
    case (.done(let label), .waiting), (.fail(let label), .waiting):
      if let label, !Self.isValidFinishedLabel(label) { return .failure(.badRequest) }
      if case .done = command {
        next.status = .finished(.done)
      } else {
        next.status = .finished(.failed)
      }
      next.waitLabel = nil
      next.finishedLabel = label
    case (.done, .idle), (.done, .running), (.done, .paused), (.done, .finished),
      (.done, .overtime), (.fail, .idle), (.fail, .running), (.fail, .paused), (.fail, .finished),
      (.fail, .overtime):
      return .failure(.notWaiting)
    case (.rotateKey, _):
      // The key hash is kept beside the record, not in it; the revision
      // still moves, so every instance orders the rotation with the rest.
      break
    }
    next.revision += 1
    next.updatedAt = at
    return .success(next)
  }

  /// `from + ms` when it is a moment a record may hold, else nil.
  static func moment(_ from: Int64, plusMs ms: Int64) -> Int64? {
    let (sum, overflow) = from.addingReportingOverflow(ms)
    return !overflow && epochMsRange.contains(sum) ? sum : nil
  }

  /// `to − from` in ms, or nil when it does not fit in an Int64.
  static func span(from: Int64, to: Int64) -> Int64? {
    let (difference, overflow) = to.subtractingReportingOverflow(from)
    return overflow ? nil : difference
  }
}
