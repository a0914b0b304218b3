import CountdownCore
import Libev
import Observability

/// Ordering: every command goes out as one call of the command function
/// (`countdown_v3_command`), and its reply completes the command's ticket.
/// A command whose reply was lost is looked up by its nonce
/// (`countdown_v3_resolve`) and answered applied, not applied, or unknown.
///
/// Runs on the loop's thread; its events (`.completed`) go to `emit`.
final class ClusterOrdering: ClusterPart {
  /// Where completions go (the hub), with Redis's time.
  var emit: (ClusterEvent, Int64) -> Void = { _, _ in }
  /// Another instance made a new epoch: this one's sessions are another history.
  var onEpochConflict: (String) -> Void = { _ in }
  /// A command applied with webhooks on: its event is in the stream now.
  var onEventsRecorded: () -> Void = {}
  /// Whether commands can be ordered now (the change feed is live).
  var isLive: () -> Bool = { false }

  private(set) var commandsSent = 0
  private(set) var commandsUnavailable = 0
  /// Commands whose reply was lost, resolved by reading the session back:
  /// found applied, found not applied, or not knowable.
  private(set) var lostRepliesApplied = 0
  private(set) var lostRepliesNotApplied = 0
  private(set) var lostRepliesUnknown = 0
  private(set) var damagedRecords = 0

  /// Each command carries a nonce that the function keeps with the session,
  /// so that a command whose reply was lost can be looked up.
  private var nextNonce: UInt64 = 0
  struct LostReply {
    var ticket: Ticket
    var session: String
    var nonce: String
    /// The revision the instance had when it sent the command.
    var base: UInt64
    /// The command's deadline on Redis's clock.
    var deadline: Int64
    /// When it was sent (monotonic ms).
    var sentAt: Int64
    /// Its `Idempotency-Key`, whose stored answer a lost reply resolves to.
    var idempotencyKey: String?
    /// Past this (monotonic ms) it is answered `outcome_unknown`.
    var giveUpAt: Int64 { sentAt + resolveWithinMs }
    var resolveWithinMs: Int64
  }
  /// Commands whose reply was lost, by nonce, until resolved.
  private var lostReplies: [String: LostReply] = [:]
  private lazy var lostReplyTimer = LoopTimer(loop: commands.loop) { [unowned self] in
    giveUpLostReplies()
  }

  /// Commands waiting for their lost reply to be looked up.
  var lostReplyCount: Int { lostReplies.count }

  func sequence(_ request: SequenceRequest) -> SequenceResult {
    guard isLive() else {
      commandsUnavailable += 1
      return .done(.unavailable(RedisSequencer.unreachable))
    }
    let deadline = redisDeadline()
    nextNonce += 1
    let lost = LostReply(
      ticket: request.ticket, session: request.session, nonce: "\(instance)-\(nextNonce)",
      base: request.current.revision, deadline: deadline, sentAt: monotonicMs(),
      idempotencyKey: request.idempotencyKey, resolveWithinMs: settings.resolveWithinMs)
    let arguments = CommandCall.argv(
      request, epoch: settings.epoch, channel: channel, deadline: deadline, nonce: lost.nonce,
      events: settings.recordsEvents, limits: settings.idempotencyLimits)
    let sent = commands.send(arguments) { [weak self] result in
      self?.commandAnswered(lost, result)
    }
    guard sent else {
      commandsUnavailable += 1
      return .done(.unavailable(RedisSequencer.unreachable))
    }
    commandsSent += 1
    return .pending
  }

  private func commandAnswered(_ sent: LostReply, _ result: Result<RedisReply, RedisError>) {
    let session = sent.session
    let outcome: SequenceOutcome
    switch result {
    case .success(let reply):
      let parts = reply.elements?.compactMap(\.text) ?? []
      switch (parts.first, parts.count) {
      case ("ok", 2), ("ok", 3):
        if parts.count == 3 {
          damagedRecords += 1
          RecordDamage.reset(session, parts[2])
        }
        guard let message = RecordMessage.parse(parts[1]), let record = accepted(message) else {
          outcome = .unavailable(RedisSequencer.unreachable)
          break
        }
        outcome = .applied(record)
        sessions.took(session, revision: record.revision)
        if settings.recordsEvents { onEventsRecorded() }
      case ("rejected", 2):
        outcome = .rejected(ErrorCode(rawValue: parts[1]) ?? .badRequest)
      case ("replayed", 3):
        outcome = replayed(parts[1], parts[2])
      case ("expired", 1):
        outcome = .unavailable(RedisSequencer.unreachable)
      case ("epoch", 2):
        outcome = .unavailable(RedisSequencer.unreachable)
        onEpochConflict(parts[1])
      default:
        outcome = .unavailable(RedisSequencer.unreachable)
      }
    case .failure(let error) where error.kind == .disconnected || error.kind == .timeout:
      // Sent, and the connection went before the reply: it may have applied.
      log.warn(
        "redis_reply_lost",
        ["session": LogValue(session), "error": LogValue(error.description)])
      replyLost(sent)
      return
    case .failure(let error):
      log.warn("redis_command_failed", ["error": LogValue(error.description)])
      outcome = .unavailable(RedisSequencer.unreachable)
    }
    if case .unavailable = outcome { commandsUnavailable += 1 }
    emit(.completed(sent.ticket, outcome), redisClock.nowMilliseconds())
  }

  /// A first answer from an idempotency hash, which is input: a line that
  /// does not parse, or a code that is never remembered, is unavailable.
  private func replayed(_ kind: String, _ payload: String) -> SequenceOutcome {
    switch kind {
    case "ok":
      guard let message = RecordMessage.parse(payload), let record = accepted(message) else {
        return .unavailable(RedisSequencer.unreachable)
      }
      return .replayed(.applied(record))
    case "rejected":
      guard let code = ErrorCode(rawValue: payload), IdempotentAnswer.remembers(code) else {
        return .unavailable(RedisSequencer.unreachable)
      }
      return .replayed(.rejected(code))
    default:
      return .unavailable(RedisSequencer.unreachable)
    }
  }

  private func accepted(_ message: RecordMessage) -> SessionRecord? {
    guard let record = RecordDamage.accepted(message, from: "reply") else {
      damagedRecords += 1
      return nil
    }
    return record
  }

  // MARK: Lost replies

  /// Every lost reply is resolved on the next connection, before the
  /// reconcile; one whose connection does not come back in time (by
  /// `resolveWithinMs` after the send) is answered `outcome_unknown`.
  /// Meanwhile its session's later commands wait.
  private func replyLost(_ lost: LostReply) {
    let first = lostReplies.isEmpty
    lostReplies[lost.nonce] = lost
    if first { lostReplyTimer.schedule(afterMs: lost.giveUpAt - monotonicMs()) }
    if isLive() { resolve(lost) }
  }

  /// The commands connection answers again: look up every lost reply.
  func resolveLostReplies() {
    for lost in lostReplies.values { resolve(lost) }
  }

  private func resolve(_ lost: LostReply) {
    let idem = lost.idempotencyKey.map { RedisSequencer.idempotencyKey(lost.session, $0) }
    let arguments =
      [
        "FCALL", RedisSequencer.function("resolve"), idem == nil ? "3" : "4",
        RedisSequencer.sessionKey(lost.session), RedisSequencer.epochKey,
        RedisSequencer.positionKey,
      ] + (idem.map { [$0] } ?? []) + [
        settings.epoch, lost.session, lost.nonce, String(lost.base), String(lost.deadline),
      ]
    commands.send(arguments) { [weak self] result in
      guard let self, lostReplies[lost.nonce] != nil else { return }
      let parts: [String]
      switch result {
      case .success(let reply): parts = reply.elements?.compactMap(\.text) ?? []
      // The connection went again: the next one asks again.
      case .failure(let error) where error.kind == .disconnected || error.kind == .timeout: return
      case .failure: parts = []
      }
      let outcome: SequenceOutcome
      let record = parts.count == 2 ? try? RecordMessage.parse(parts[1])?.record.get() : nil
      switch (parts.first, parts.count, record) {
      case ("applied", 2, let record?):
        lostRepliesApplied += 1
        outcome = .applied(record)
        sessions.took(lost.session, revision: record.revision)
      case ("absent", 1, _):
        lostRepliesNotApplied += 1
        commandsUnavailable += 1
        outcome = .unavailable(RedisSequencer.unreachable)
      default:
        lostRepliesUnknown += 1
        outcome = .rejected(.outcomeUnknown)
      }
      finishLost(lost, outcome)
    }
  }

  private func finishLost(_ lost: LostReply, _ outcome: SequenceOutcome) {
    lostReplies[lost.nonce] = nil
    log.info(
      "redis_reply_resolved",
      [
        "session": LogValue(lost.session),
        "outcome": LogValue(
          {
            switch outcome {
            case .applied, .replayed: "applied"
            case .unavailable: "not_applied"
            case .rejected: "unknown"
            }
          }()),
      ])
    emit(.completed(lost.ticket, outcome), redisClock.nowMilliseconds())
  }

  private func giveUpLostReplies() {
    let now = monotonicMs()
    for lost in lostReplies.values where lost.giveUpAt <= now {
      lostRepliesUnknown += 1
      finishLost(lost, .rejected(.outcomeUnknown))
    }
    if let next = lostReplies.values.map(\.giveUpAt).min() {
      lostReplyTimer.schedule(afterMs: next - now)
    }
  }

  /// The Redis time after which a command must not be applied: half the
  /// timeout on, so that the offset's error (within a round trip) cannot
  /// let Redis apply a command after this instance answered unavailable.
  private func redisDeadline() -> Int64 {
    redisClock.nowMilliseconds() + settings.timeoutMs / 2
  }
}
