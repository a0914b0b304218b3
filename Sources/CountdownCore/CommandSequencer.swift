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
  /// The command came with an API token (an HTTP request), which may command
  /// any session: a sequencer that checks `presentedKeyHash` again skips
  /// that check for it, rather than being sent the session's own hash.
  public var authorisedByToken = false
  /// An HTTP command's `Idempotency-Key` (`IdempotencyKey.isValid`): a
  /// sequencer that finds the key's first answer for this session answers
  /// `.replayed` with it and applies nothing; otherwise it remembers the
  /// answer with the command, in the same atomic step. A new key past
  /// `IdempotencyLimits` is refused `rate_limited` and nothing is applied.
  public let idempotencyKey: String?
  /// The client address budget the command came from (an IPv6 client's
  /// prefix), which a new idempotency key counts against ("" for none).
  public var address: String
  /// The settings a webhook body is built with, when the hub records events
  /// (`HubConfig.recordsEvents`); nil when it does not.
  public var eventConfig: SessionConfig.Shared?

  public init(
    ticket: Ticket, session: String, command: SessionCommand, current: SessionRecord,
    keyHash: KeyHash?, presentedKeyHash: KeyHash?, now: Int64, authorisedByToken: Bool = false,
    idempotencyKey: String? = nil, address: String = "",
    eventConfig: SessionConfig.Shared? = nil
  ) {
    self.ticket = ticket
    self.session = session
    self.command = command
    self.current = current
    self.keyHash = keyHash
    self.presentedKeyHash = presentedKeyHash
    self.now = now
    self.authorisedByToken = authorisedByToken
    self.idempotencyKey = idempotencyKey
    self.address = address
    self.eventConfig = eventConfig
  }
}

/// What became of a sequenced command.
public enum SequenceOutcome: Equatable, Sendable {
  /// Stored or ordered: the session adopts this record, then the command is acked.
  case applied(SessionRecord)
  /// Refused by the session's rules (busy, not_running, …); nothing changed.
  case rejected(ErrorCode)
  /// Storage or the cluster could not take it; nothing changed.
  case unavailable(String)
  /// The command's idempotency key was used before on this session: this is
  /// the first answer, and nothing was applied now.
  case replayed(IdempotentAnswer)
}

/// The "sequence" step of the command path: fixes a command's time and order,
/// and may make it durable first. It answers at once (`done`) or later, by
/// calling `Hub.complete(_:_:now:)` on the service thread.
public protocol CommandSequencer: AnyObject {
  func sequence(_ request: SequenceRequest) -> SequenceResult
  /// A session was created here (with its controller key's hash in key
  /// mode). `.loading` when its state lives elsewhere (a cluster): its
  /// viewers and commands then wait for `Hub.apply(.loaded(…), now:)`.
  func created(session: String, record: SessionRecord, keyHash: KeyHash?) -> SessionLoad
  /// The hub forgot a session: its durable facts may go too.
  func forgot(session: String)
  /// True when every session there is lives in the hub (one server, its
  /// store loaded at start): one it does not hold has no key yet, so no key
  /// presented for it can be right. False where sessions also live
  /// elsewhere (a cluster), and the hub must fetch one to know.
  var knowsEverySession: Bool { get }
  /// A command this sequencer answered `.pending` for was completed through
  /// `Hub.complete` (by a store, say), before the hub acts on it.
  func completed(_ ticket: Ticket, _ outcome: SequenceOutcome, now: Int64)
  /// A run elapsed or a wait timed out with no command (webhooks on): in
  /// `Hub.advance`, as a record durable only after its deadline is adopted,
  /// or while the server was down (`Hub.restore`). `record` is the running
  /// or waiting record it finished from, at `deadline`. The event is built
  /// by a sequencer that records it here, with `config`; one that records
  /// events elsewhere (a cluster's function) builds nothing.
  func finishedByItself(
    session: String, record: SessionRecord, at deadline: Int64, config: SessionConfig.Shared)
}

extension CommandSequencer {
  public var knowsEverySession: Bool { false }
  public func completed(_ ticket: Ticket, _ outcome: SequenceOutcome, now: Int64) {}
  public func finishedByItself(
    session: String, record: SessionRecord, at deadline: Int64, config: SessionConfig.Shared
  ) {}
}

/// Whether a session created here can be shown at once.
public enum SessionLoad: Equatable, Sendable {
  /// The fresh record is the session's state.
  case ready
  /// The state is being fetched; `Hub.apply(.loaded(…), now:)` follows on the service thread.
  case loading
}

public enum SequenceResult: Equatable, Sendable {
  case done(SequenceOutcome)
  /// The sequencer will call `Hub.complete` with this request's ticket.
  case pending
}
