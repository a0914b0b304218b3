/// What a controller asks of a session, admitted and typed: the input of the
/// command path (admit → sequence → apply).
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
  case rotateKey(KeyHash)

  /// The wire's name for the command, as counted in metrics.
  public var op: String {
    switch self {
    case .start: "start"
    case .cancel: "cancel"
    case .pause: "pause"
    case .resume: "resume"
    case .adjust: "adjust"
    case .rotateKey: "rotate_key"
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
public struct SessionRecord: Equatable, Sendable {
  public var phase: Phase
  /// Seconds of the current or last run, adjustments included.
  public var duration: Int
  /// The deadline in epoch ms, while running.
  public var endsAt: Int64?
  /// The exact time left in ms, while paused.
  public var remainingMs: Int64?
  /// The run's own finished label, when its start named one.
  public var finishedLabel: String?
  /// The session's seq when the command that wrote this record was applied.
  public var seq: UInt64
  /// Commands applied to the session since it was created.
  public var revision: UInt64
  /// When that command was sequenced (epoch ms); bounds the patches sent since.
  public var updatedAt: Int64

  public init(
    phase: Phase = .idle, duration: Int = 0, endsAt: Int64? = nil, remainingMs: Int64? = nil,
    finishedLabel: String? = nil, seq: UInt64 = 0, revision: UInt64 = 0, updatedAt: Int64 = 0
  ) {
    self.phase = phase
    self.duration = duration
    self.endsAt = endsAt
    self.remainingMs = remainingMs
    self.finishedLabel = finishedLabel
    self.seq = seq
    self.revision = revision
    self.updatedAt = updatedAt
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

  /// Why a record that came from outside (a database row, a Redis hash or
  /// message) cannot be taken as it is, or nil when every field is in range
  /// and agrees with its phase. Callers check it before any arithmetic.
  public var damage: String? {
    guard Self.durationRange.contains(duration) else { return "duration \(duration) out of range" }
    guard Self.epochMsRange.contains(updatedAt) else {
      return "updatedAt \(updatedAt) out of range"
    }
    guard seq <= Self.maxCounter, revision <= Self.maxCounter else {
      return "seq or revision out of range"
    }
    if let finishedLabel, !Self.isValidFinishedLabel(finishedLabel) {
      return "finishedLabel is not 1 to \(SessionConfig.maxFinishedLabelLength) characters of text"
    }
    switch phase {
    case .running:
      guard let endsAt, Self.epochMsRange.contains(endsAt), remainingMs == nil else {
        return "a running record needs endsAt in range and no remainingMs"
      }
    case .paused:
      guard let remainingMs, (1...Self.aheadMsRange.upperBound).contains(remainingMs), endsAt == nil
      else { return "a paused record needs remainingMs in range and no endsAt" }
    case .idle, .finished:
      guard endsAt == nil, remainingMs == nil else {
        return "an \(phase.rawValue) record holds no endsAt or remainingMs"
      }
    }
    return nil
  }

  /// The record as it stands at `now`: a run whose deadline has passed is finished.
  public func settled(at now: Int64) -> SessionRecord {
    guard phase == .running, let endsAt, endsAt <= now else { return self }
    var copy = self
    copy.phase = .finished
    copy.endsAt = nil
    return copy
  }

  /// The record after `command`, sequenced at `at`, or the error the command
  /// gets. Pure: the in-memory and SQLite sequencers call it, and Redis's
  /// function mirrors it, so a command replayed anywhere gives the same record.
  public func applying(_ command: SessionCommand, at: Int64) -> Result<SessionRecord, ErrorCode> {
    var next = settled(at: at)
    switch (command, next.phase) {
    case (.start, .running), (.start, .paused):
      return .failure(.busy)
    case (.start(let length, let label), _):
      let endsAt: Int64
      switch length {
      case .seconds(let seconds):
        guard Self.secondsRange.contains(seconds) else { return .failure(.badRequest) }
        endsAt = at + Int64(seconds) * 1000
      case .until(let deadline):
        guard Self.aheadMsRange.contains(deadline - at) else { return .failure(.badRequest) }
        endsAt = deadline
      }
      next.phase = .running
      next.endsAt = endsAt
      next.remainingMs = nil
      next.duration = Int(Self.wholeSeconds(endsAt - at))
      next.finishedLabel = label
    case (.cancel, .running), (.cancel, .paused):
      next.phase = .idle
      next.endsAt = nil
      next.remainingMs = nil
    case (.cancel, _):
      return .failure(.notRunning)
    case (.pause, _) where next.phase != .running:
      return .failure(.notRunning)
    case (.pause, _):
      next.phase = .paused
      next.remainingMs = next.endsAt! - at
      next.endsAt = nil
    case (.resume, .paused):
      next.phase = .running
      next.endsAt = at + next.remainingMs!
      next.remainingMs = nil
    case (.resume, _):
      return .failure(.notPaused)
    case (.adjust(let seconds), .running), (.adjust(let seconds), .paused):
      guard seconds != 0, Self.adjustRange.contains(seconds) else { return .failure(.badRequest) }
      let delta = Int64(seconds) * 1000
      let left = (next.endsAt.map { $0 - at } ?? next.remainingMs!) + delta
      guard left <= Self.aheadMsRange.upperBound else { return .failure(.badRequest) }
      next.duration = max(0, next.duration + seconds)
      if left <= 0 {
        next.phase = .finished
        next.endsAt = nil
        next.remainingMs = nil
      } else if next.phase == .running {
        next.endsAt = at + left
      } else {
        next.remainingMs = left
      }
    case (.adjust, _):
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

  /// Whole seconds in `ms`, rounded up: what a countdown shows.
  public static func wholeSeconds(_ ms: Int64) -> Int64 { ms <= 0 ? 0 : (ms + 999) / 1000 }
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
