import CountdownCore

/// How a command becomes the argv of one `countdown_v3_command` call: the
/// one place that knows the function's argument layout. countdown.lua reads
/// the same slots through its `ARG` table, and FunctionLayoutTests fail when
/// the two differ.
enum CommandCall {
  /// The function's ARGV, by slot number (Lua counts from 1). The case names
  /// are the `ARG` table's keys.
  enum Slot: Int, CaseIterable {
    case epoch = 1
    case channel
    case session
    case op
    /// The command's operands, as `operands(of:)` gives them.
    case first
    case second
    case label
    /// The caller's record: the base when Redis has lost the session's hash.
    case phase
    case duration
    case endsAt
    case remainingMs
    case revision
    case baseLabel
    /// The latest Redis time (ms) at which the caller still waits ('' for none).
    case deadline
    /// The command's nonce, which `resolve` looks up after a lost reply ('' for none).
    case nonce
    /// The hash of the key the commanding connection holds ('' in open mode).
    case presented
    /// The rest of the caller's record: a wait's times and labels, a finished one's outcome.
    case startedAt
    case timeoutAt
    case outcome
    case baseWaitLabel
    /// '1' for a command authorised by an API token, which passes the key
    /// check without a key ('' otherwise).
    case byToken
    /// `SessionCommand.fingerprint`, kept with an idempotency key's answer.
    case fingerprint
    /// '1' when webhooks are on: the change is recorded in the events stream
    /// in the same call, and KEYS end with `RedisSequencer.eventsKeys`.
    case events

    /// The slot's place in what `arguments` returns.
    var index: Int { rawValue - 1 }
  }

  /// The whole FCALL, keys then arguments.
  static func argv(
    _ request: SequenceRequest, epoch: String, channel: String, deadline: Int64, nonce: String,
    events: Bool = false
  ) -> [String] {
    let idem = request.idempotencyKey.map { RedisSequencer.idempotencyKey(request.session, $0) }
    let keys =
      [
        RedisSequencer.sessionKey(request.session), RedisSequencer.epochKey,
        RedisSequencer.positionKey, RedisSequencer.sessionsKey,
      ] + (idem.map { [$0] } ?? []) + (events ? RedisSequencer.eventsKeys : [])
    return ["FCALL", RedisSequencer.function("command"), String(keys.count)] + keys
      + arguments(
        request.command, base: request.current.fields, session: request.session, epoch: epoch,
        channel: channel, deadline: deadline, nonce: nonce, presented: request.presentedKeyHash,
        byToken: request.authorisedByToken,
        fingerprint: request.idempotencyKey == nil ? "" : request.command.fingerprint,
        events: events)
  }

  /// The ARGV alone, one value per slot in slot order. Every slot has its
  /// case below, so a slot added here cannot be left out.
  static func arguments(
    _ command: SessionCommand, base: SessionRecord.Fields, session: String, epoch: String,
    channel: String, deadline: Int64? = nil, nonce: String = "", presented: KeyHash? = nil,
    byToken: Bool = false, fingerprint: String = "", events: Bool = false
  ) -> [String] {
    let operands = operands(of: command)
    return Slot.allCases.map { slot in
      switch slot {
      case .epoch: epoch
      case .channel: channel
      case .session: session
      case .op: command.op.rawValue
      case .first: operands.first
      case .second: operands.second
      case .label: operands.label
      case .phase: base.phase.rawValue
      case .duration: String(base.duration)
      // `-` stands for an absent time, as in a record line.
      case .endsAt: base.endsAt.map(String.init) ?? "-"
      case .remainingMs: base.remainingMs.map(String.init) ?? "-"
      case .revision: String(base.revision)
      case .baseLabel: base.finishedLabel ?? ""
      case .deadline: deadline.map(String.init) ?? ""
      case .nonce: nonce
      case .presented: presented?.hex ?? ""
      case .startedAt: base.startedAt.map(String.init) ?? "-"
      case .timeoutAt: base.timeoutAt.map(String.init) ?? "-"
      case .outcome: base.outcome?.rawValue ?? ""
      case .baseWaitLabel: base.waitLabel ?? ""
      case .byToken: byToken ? "1" : ""
      case .fingerprint: fingerprint
      case .events: events ? "1" : ""
      }
    }
  }

  /// A command's operands as the function's rules (`RULES` in countdown.lua) take them.
  static func operands(of command: SessionCommand) -> (first: String, second: String, label: String)
  {
    switch command {
    case .start(.seconds(let seconds), let label, _): ("seconds", String(seconds), label ?? "")
    case .start(.until(let deadline), let label, _): ("until", String(deadline), label ?? "")
    case .cancel, .pause, .resume, .stop: ("", "", "")
    // A message is free text, so it goes where labels go; '' is none.
    case .message(let text): ("", "", text ?? "")
    case .blackout(let on): (on ? "1" : "0", "", "")
    case .adjust(let seconds): (String(seconds), "", "")
    case .rotateKey(let hash): (hash.hex, "", "")
    case .wait(let label, let timeoutSeconds, let timeoutLabel):
      (timeoutSeconds.map(String.init) ?? "", timeoutLabel ?? "", label ?? "")
    case .done(let label), .fail(let label): ("", "", label ?? "")
    }
  }
}
