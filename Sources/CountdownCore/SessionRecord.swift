/// What a controller asks of a session, admitted and typed: the one schema of
/// the command path, from the decoder (`WireCodec.decode`) through the gate
/// and the sequencer to the rules (`SessionRecord.applying`) and Redis's
/// function (`CommandCall`). A new op is a case here plus its rules; every
/// switch over it is exhaustive, so the compiler names each place to change.
public enum SessionCommand: Equatable, Sendable {
  /// `length` is already resolved: a start that named no length has the server's default.
  case start(StartLength, finishedLabel: String?)
  case cancel
  case pause
  case resume
  /// Moves the deadline (or the frozen time left) by this many seconds, either way.
  case adjust(seconds: Int)
  /// Replaces the session's controller key (key mode): the hash of the new
  /// key, which the sequencer stores so the old key stops working everywhere.
  /// The hub makes the key when it admits the request (`ClientRequest.rotateKey`).
  case rotateKey(KeyHash)

  /// The ops, by their name on the wire and in metrics, and in Redis's function.
  public enum Op: String, CaseIterable, Sendable {
    case start
    case cancel
    case pause
    case resume
    case adjust
    case rotateKey = "rotate_key"
  }

  public var op: Op {
    switch self {
    case .start: .start
    case .cancel: .cancel
    case .pause: .pause
    case .resume: .resume
    case .adjust: .adjust
    case .rotateKey: .rotateKey
    }
  }
}

/// How long a start runs: a number of seconds, or until a moment.
public enum StartLength: Equatable, Sendable {
  case seconds(Int)
  /// A deadline in epoch ms.
  case until(Int64)
}

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
    case finished
  }

  public var status: Status
  /// Seconds of the current or last run, adjustments included.
  public var duration: Int
  /// The run's own finished label, when its start named one.
  public var finishedLabel: String?
  /// The session's seq when the command that wrote this record was applied.
  public var seq: UInt64
  /// Commands applied to the session since it was created.
  public var revision: UInt64
  /// When that command was sequenced (epoch ms); bounds the patches sent since.
  public var updatedAt: Int64

  public init(
    _ status: Status = .idle, duration: Int = 0, finishedLabel: String? = nil, seq: UInt64 = 0,
    revision: UInt64 = 0, updatedAt: Int64 = 0
  ) {
    self.status = status
    self.duration = duration
    self.finishedLabel = finishedLabel
    self.seq = seq
    self.revision = revision
    self.updatedAt = updatedAt
  }

  public var phase: Phase {
    switch status {
    case .idle: .idle
    case .running: .running
    case .paused: .paused
    case .finished: .finished
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

  /// Limits of the commands, shared with the page through `Public/constants.js`.
  public static let secondsRange = 1...86_400
  public static let adjustRange = -86_400...86_400
  /// How far ahead a deadline may be: at least a second, at most 30 days.
  public static let aheadMsRange: ClosedRange<Int64> = 1000...2_592_000_000

  /// Moments a record may hold (epoch ms, 1970 to the end of 9999): wide
  /// enough for any real deadline, narrow enough that a sum or difference of
  /// two of them, or of one and a duration, cannot overflow.
  public static let epochMsRange: ClosedRange<Int64> = 0...253_402_300_799_999
  /// Seconds a run may count in all, adjustments included: what storage keeps
  /// in a 32-bit column.
  public static let durationRange = 0...Int(Int32.max)
  /// Seq and revision stay exact in a JavaScript number.
  public static let maxCounter: UInt64 = 1 << 53 - 1

  /// A finished label a client may set: 1 to 64 characters of text, with no
  /// control characters (U+0000–U+001F, U+007F), which would reach every
  /// viewer's screen and, with NUL, cut C strings short.
  public static func isValidFinishedLabel(_ label: String) -> Bool {
    let scalars = label.unicodeScalars
    guard !scalars.isEmpty, scalars.count <= SessionConfig.maxFinishedLabelLength else {
      return false
    }
    return !scalars.contains { $0.value < 0x20 || $0.value == 0x7F }
  }

  /// Why the record could not have come from the command rules (a field out
  /// of range), or nil: what `init(validating:)` checks beyond the shape.
  public var damage: String? { fields.damage }

  /// The record as it stands at `now`: a run whose deadline has passed is finished.
  public func settled(at now: Int64) -> SessionRecord {
    guard case .running(let endsAt) = status, endsAt <= now else { return self }
    var copy = self
    copy.status = .finished
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
    case (.start, .running), (.start, .paused):
      return .failure(.busy)
    case (.start(let length, let label), .idle), (.start(let length, let label), .finished):
      if let label, !Self.isValidFinishedLabel(label) { return .failure(.badRequest) }
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
    case (.cancel, .running), (.cancel, .paused):
      next.status = .idle
    case (.cancel, .idle), (.cancel, .finished):
      return .failure(.notRunning)
    case (.pause, .running(let endsAt)):
      // A clock stepped back by weeks could leave more than a run may hold.
      guard let left = Self.span(from: at, to: endsAt) else { return .failure(.badRequest) }
      next.status = .paused(remainingMs: min(left, Self.aheadMsRange.upperBound))
    case (.pause, .idle), (.pause, .paused), (.pause, .finished):
      return .failure(.notRunning)
    case (.resume, .paused(let left)):
      guard let endsAt = Self.moment(at, plusMs: left) else { return .failure(.badRequest) }
      next.status = .running(endsAt: endsAt)
    case (.resume, .idle), (.resume, .running), (.resume, .finished):
      return .failure(.notPaused)
    case (.adjust(let seconds), .running), (.adjust(let seconds), .paused):
      guard seconds != 0, Self.adjustRange.contains(seconds) else { return .failure(.badRequest) }
      let delta = Int64(seconds) * 1000
      let before: Int64?
      switch next.status {
      case .running(let endsAt): before = Self.span(from: at, to: endsAt)
      case .paused(let remainingMs): before = remainingMs
      case .idle, .finished: before = nil
      }
      guard let before, case (let left, false) = before.addingReportingOverflow(delta),
        left <= Self.aheadMsRange.upperBound
      else { return .failure(.badRequest) }
      // Clamped both ways, so a run adjusted for ever never leaves what storage keeps.
      next.duration = min(
        Self.durationRange.upperBound, max(Self.durationRange.lowerBound, next.duration + seconds))
      if left <= 0 {
        next.status = .finished
      } else if case .running = next.status {
        guard let endsAt = Self.moment(at, plusMs: left) else { return .failure(.badRequest) }
        next.status = .running(endsAt: endsAt)
      } else {
        next.status = .paused(remainingMs: left)
      }
    case (.adjust, .idle), (.adjust, .finished):
      return .failure(.notRunning)
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

  /// Whole seconds in `ms`, rounded up: what a countdown shows.
  public static func wholeSeconds(_ ms: Int64) -> Int64 {
    ms <= 0 ? 0 : ms / 1000 + (ms % 1000 == 0 ? 0 : 1)
  }
}

/// A command's place in the sequencer, from `Hub` to the sequencer and back.
public struct Ticket: Hashable, Sendable {
  public let value: UInt64
  public init(_ value: UInt64) { self.value = value }
}

/// One command on its way through the sequencer.
public struct SequenceRequest: Sendable {
  public let ticket: Ticket
  public let session: String
  public let command: SessionCommand
  /// The session's durable record before the command.
  public let current: SessionRecord
  /// The session's controller key hash in key mode, kept with every save.
  public let keyHash: KeyHash?
  /// The hash of the key the commanding connection holds (key mode), for a
  /// sequencer that checks it again (a cluster): nil in open mode.
  public let presentedKeyHash: KeyHash?
  /// The service thread's time when the command was admitted.
  public let now: Int64
}

/// What became of a sequenced command.
public enum SequenceOutcome: Equatable, Sendable {
  /// Stored or ordered: the session adopts this record, then the command is acked.
  case applied(SessionRecord)
  /// Refused by the session's rules (busy, not_running, …); nothing changed.
  case rejected(ErrorCode)
  /// Storage or the cluster could not take it; nothing changed.
  case unavailable(String)
}

/// The "sequence" step of the command path: fixes a command's time and order,
/// and may make it durable first. It answers at once (`done`) or later, by
/// calling `Hub.complete(_:_:now:)` on the service thread.
public protocol CommandSequencer: AnyObject {
  func sequence(_ request: SequenceRequest) -> SequenceResult
  /// A session was created here (with its controller key's hash in key
  /// mode). `.loading` when its state lives elsewhere (a cluster): its
  /// viewers and commands then wait for `Hub.loaded(session:record:keyHash:now:)`.
  func created(session: String, record: SessionRecord, keyHash: KeyHash?) -> SessionLoad
  /// The hub forgot a session: its durable facts may go too.
  func forgot(session: String)
}

/// Whether a session created here can be shown at once.
public enum SessionLoad: Equatable, Sendable {
  /// The fresh record is the session's state.
  case ready
  /// The state is being fetched; `Hub.loaded` follows on the service thread.
  case loading
}

public enum SequenceResult: Equatable, Sendable {
  case done(SequenceOutcome)
  /// The sequencer will call `Hub.complete` with this request's ticket.
  case pending
}

/// Where sessions' durable facts are written: the port a store (SQLite, say)
/// implements. Every call comes from the service thread and must not block:
/// queue the write and return. A write that carries a ticket is reported back
/// through `Hub.complete`, on the service thread, once it is durable or failed.
public protocol SessionStore: AnyObject {
  func write(_ write: StoreWrite)
}

public enum StoreWrite: Equatable, Sendable {
  /// Insert or replace a session's row. `keyHash` is nil in open mode.
  case save(session: String, record: SessionRecord, keyHash: KeyHash?, ticket: Ticket?)
  case delete(session: String)
}

/// A session as a store hands it back at start-up.
public struct StoredSession: Equatable, Sendable {
  public var id: String
  public var record: SessionRecord
  public var keyHash: KeyHash?

  public init(id: String, record: SessionRecord, keyHash: KeyHash?) {
    self.id = id
    self.record = record
    self.keyHash = keyHash
  }
}

/// Sequences in memory, in order, at the service thread's clock; with a
/// store, a command that changes a session completes once it is durable.
public final class LocalSequencer: CommandSequencer {
  private let store: (any SessionStore)?

  public init(store: (any SessionStore)? = nil) { self.store = store }

  public func sequence(_ request: SequenceRequest) -> SequenceResult {
    switch request.current.applying(request.command, at: request.now) {
    case .failure(let code):
      return .done(.rejected(code))
    case .success(let record):
      guard let store else { return .done(.applied(record)) }
      var keyHash = request.keyHash
      if case .rotateKey(let rotated) = request.command { keyHash = rotated }
      store.write(
        .save(session: request.session, record: record, keyHash: keyHash, ticket: request.ticket))
      return .pending
    }
  }

  public func created(session: String, record: SessionRecord, keyHash: KeyHash?) -> SessionLoad {
    // An open-mode session has nothing durable until its first command.
    if let keyHash {
      store?.write(.save(session: session, record: record, keyHash: keyHash, ticket: nil))
    }
    return .ready
  }

  public func forgot(session: String) {
    store?.write(.delete(session: session))
  }
}
