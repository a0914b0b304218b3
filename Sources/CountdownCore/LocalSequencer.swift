/// Sequences in memory, in order, at the service thread's clock; with a
/// store, a command that changes a session completes once it is durable.
///
/// A command with an idempotency key is looked up in `answers` (in memory,
/// loaded from the store at start), so the check never blocks; its answer
/// is remembered in the same store write as its record, and in `answers`
/// while the write is under way (taken out again if it fails), so the
/// limits count it. The hub runs one command per session at a
/// time, so a retry that arrives while the first is in flight waits, and
/// finds the first one's answer when its turn comes.
public final class LocalSequencer: CommandSequencer {
  private let store: (any SessionStore)?
  /// Remembered answers, by session and key.
  public private(set) var answers: IdempotencyCache
  /// Answers written with their command, until the write is durable.
  private var unconfirmed: [Ticket: IdempotencyEntry] = [:]

  public init(store: (any SessionStore)? = nil, answers: IdempotencyCache = IdempotencyCache()) {
    self.store = store
    self.answers = answers
  }

  public func sequence(_ request: SequenceRequest) -> SequenceResult {
    if let key = request.idempotencyKey {
      guard IdempotencyKey.isValid(key) else { return .done(.rejected(.badRequest)) }
      if let entry = answers.lookup(session: request.session, key: key, now: request.now) {
        // The same key for another command is a client's mistake, not a retry.
        guard entry.fingerprint == request.command.fingerprint else {
          return .done(.rejected(.badRequest))
        }
        return .done(.replayed(entry.answer))
      }
      // Checked before the rules: a key that cannot be remembered must not
      // apply, or its retry would apply again.
      guard answers.admits(session: request.session, address: request.address, now: request.now)
      else { return .done(.rejected(.rateLimited)) }
    }
    let outcome: SequenceOutcome
    switch request.current.applying(request.command, at: request.now) {
    case .failure(let code): outcome = .rejected(code)
    case .success(let record): outcome = .applied(record)
    }
    var keyHash = request.keyHash
    if case .rotateKey(let rotated) = request.command { keyHash = rotated }
    let events = store == nil ? [] : Self.events(of: request, outcome)
    if let key = request.idempotencyKey, let answer = IdempotentAnswer(outcome) {
      let entry = IdempotencyEntry(
        session: request.session, key: key, fingerprint: request.command.fingerprint,
        answer: answer, at: request.now,
        // A name no row could hold back would make the row damaged at the
        // next start, and its key forgotten: such a peer counts as unknown.
        address: IdempotencyEntry.isAddress(request.address) ? request.address : "")
      // Counted from now, so that writes in flight cannot pass the limits;
      // no lookup of this session runs before the write completes (the hub
      // runs one command per session at a time).
      answers.insert(entry, now: request.now)
      guard let store else { return .done(outcome) }
      unconfirmed[request.ticket] = entry
      store.write(.remember(entry, keyHash: keyHash, ticket: request.ticket, events: events))
      return .pending
    }
    guard case .applied(let record) = outcome, let store else { return .done(outcome) }
    store.write(
      .save(
        session: request.session, record: record, keyHash: keyHash, ticket: request.ticket,
        events: events))
    return .pending
  }

  /// The webhook events an applied command records with its record, when
  /// the hub records events. A deadline that passed before the command was
  /// sequenced, but before the hub's timer ran, finished the run first: its
  /// finish goes into the same write, since the command's record replaces
  /// the one that finished, and the hub's own finish then finds the row
  /// moved on and records nothing.
  static func events(of request: SequenceRequest, _ outcome: SequenceOutcome) -> [WebhookEvent] {
    guard let config = request.eventConfig, case .applied(let record) = outcome else { return [] }
    var events: [WebhookEvent] = []
    if let finish = WebhookEvent.finish(
      of: request.current, session: request.session, by: request.now, config: config)
    {
      events.append(finish)
    }
    if let type = WebhookEventType.of(request.command.op, result: record) {
      events.append(
        WebhookEvent(
          type, session: request.session, record: record, at: request.now, config: config))
    }
    return events
  }

  public func finishedByItself(
    session: String, record: SessionRecord, at deadline: Int64, config: SessionConfig.Shared
  ) {
    guard let store else { return }
    let event = WebhookEvent(
      .finished, session: session, record: record, at: deadline, config: config)
    store.write(.finish(session: session, record: record, event: event))
  }

  public func completed(_ ticket: Ticket, _ outcome: SequenceOutcome, now: Int64) {
    guard let entry = unconfirmed.removeValue(forKey: ticket) else { return }
    // A write that failed stored nothing: a retry must be applied anew.
    if case .unavailable = outcome { answers.remove(session: entry.session, key: entry.key) }
  }

  public func created(session: String, record: SessionRecord, keyHash: KeyHash?) -> SessionLoad {
    // An open-mode session has nothing durable until its first command.
    if let keyHash {
      store?.write(.save(session: session, record: record, keyHash: keyHash, ticket: nil))
    }
    return .ready
  }

  public var knowsEverySession: Bool { true }

  public func forgot(session: String) {
    // Its remembered answers stay for their day: a retry after the session
    // was forgotten must still not apply twice.
    store?.write(.delete(session: session))
  }
}
