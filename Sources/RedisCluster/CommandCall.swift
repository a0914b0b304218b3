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
    /// The rest of the caller's record: a run's options, a stopped finish's
    /// time over, the presenter message and the blackout.
    case overtime
    case warnAtSeconds
    case dangerAtSeconds
    case overMs
    case baseMessage
    case blackout
    /// A start's run options, as `options(of:)` gives them ('' for other ops).
    case overtimeOption
    case warnOption
    case dangerOption
    /// `IdempotencyLimits`, with KEYS 6-8 (the sets that count held keys):
    /// a new key past one is refused rate_limited.
    case idemPerSession
    case idemPerAddress
    case idemTotal

    /// The slot's place in what `arguments` returns.
    var index: Int { rawValue - 1 }
  }

  /// The whole FCALL, keys then arguments.
  static func argv(
    _ request: SequenceRequest, epoch: String, channel: String, deadline: Int64, nonce: String,
    events: Bool = false, limits: IdempotencyLimits = IdempotencyLimits()
  ) -> [String] {
    let idem = request.idempotencyKey.map { key in
      [
        RedisSequencer.idempotencyKey(request.session, key),
        RedisSequencer.heldKeysKey(session: request.session),
        RedisSequencer.heldKeysKey(address: request.address), RedisSequencer.heldKeysKey,
      ]
    }
    let keys =
      [
        RedisSequencer.sessionKey(request.session), RedisSequencer.epochKey,
        RedisSequencer.positionKey, RedisSequencer.sessionsKey,
      ] + (idem ?? []) + (events ? RedisSequencer.eventsKeys : [])

    return ["FCALL", RedisSequencer.function("command"), String(keys.count)] + keys
      + arguments(
        request.command, base: request.current.fields, session: request.session, epoch: epoch,
        channel: channel, deadline: deadline, nonce: nonce, presented: request.presentedKeyHash,
        byToken: request.authorisedByToken,
        fingerprint: request.idempotencyKey == nil ? "" : request.command.fingerprint,
        events: events, limits: request.idempotencyKey == nil ? nil : limits,
        // An unknown address counts against no address's limit.
        countsAddress: !request.address.isEmpty)
  }

  /// The ARGV alone, one value per slot in slot order. Every slot has its
  /// case below, so a slot added here cannot be left out.
  static func arguments(
    _ command: SessionCommand, base: SessionRecord.Fields, session: String, epoch: String,
    channel: String, deadline: Int64? = nil, nonce: String = "", presented: KeyHash? = nil,
    byToken: Bool = false, fingerprint: String = "", events: Bool = false,
    limits: IdempotencyLimits? = nil, countsAddress: Bool = true
  ) -> [String] {
    let operands = operands(of: command)
    let options = options(of: command)
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
      case .overtime: base.overtime ? "1" : "0"
      case .warnAtSeconds: base.warnAtSeconds.map(String.init) ?? "-"
      case .dangerAtSeconds: base.dangerAtSeconds.map(String.init) ?? "-"
      case .overMs: base.overMs.map(String.init) ?? "-"
      case .baseMessage: base.message ?? ""
      case .blackout: base.blackout ? "1" : "0"
      case .overtimeOption: options.overtime
      case .warnOption: options.warn
      case .dangerOption: options.danger
      case .idemPerSession: limits.map { String($0.perSession) } ?? ""
      case .idemPerAddress: limits.flatMap { countsAddress ? String($0.perAddress) : nil } ?? ""
      case .idemTotal: limits.map { String($0.total) } ?? ""
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
    // A message is free text, so it goes where labels go; '1' sets it, '' clears it
    // (an empty text is refused, as in `applying`, not taken for a clear).
    case .message(let text): (text == nil ? "" : "1", "", text ?? "")
    case .blackout(let on): (on ? "1" : "0", "", "")
    case .adjust(let seconds): (String(seconds), "", "")
    case .rotateKey(let hash): (hash.hex, "", "")
    case .wait(let label, let timeoutSeconds, let timeoutLabel):
      (timeoutSeconds.map(String.init) ?? "", timeoutLabel ?? "", label ?? "")
    case .done(let label), .fail(let label): ("", "", label ?? "")
    }
  }

  /// A start's run options as `RULES.start` takes them: overtime '1' or
  /// '0', the warning and danger seconds ('' for none); '' for other ops.
  static func options(of command: SessionCommand) -> (
    overtime: String, warn: String, danger: String
  ) {
    guard case .start(_, _, let options) = command else { return ("", "", "") }
    return (
      options.overtime ? "1" : "0", options.warnAtSeconds.map(String.init) ?? "",
      options.dangerAtSeconds.map(String.init) ?? ""
    )
  }
}
