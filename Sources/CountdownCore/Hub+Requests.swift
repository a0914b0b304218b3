/// A command or read from an HTTP request rather than a viewer's connection.
/// It goes through the same decoding (`WireCodec.decode`), authorisation at
/// dispatch, sequencer and fan-out as a viewer's command; only its rate
/// limit (per address and per token, since each request may come on a new
/// connection) and where its answer goes differ.

/// The server's number for one HTTP request waiting for its answer.
public typealias RequestID = UInt64

/// What an HTTP request presented as `Authorization: Bearer …`.
public enum RequestAuthority: Equatable, Sendable {
  /// One of `--api-token-file`'s tokens (by its line): any command on any session.
  case token(Int)
  /// Some other bearer: in key mode, it may be the session's controller key,
  /// checked at dispatch as a viewer's `?key=` is.
  case key(String)
  /// Nothing: enough in open mode only.
  case none
}

/// The answer to an HTTP command: the body is the WebSocket's ack (with the
/// state) or error object; `code` is nil for an ack.
public struct RequestAnswer: Equatable, Sendable {
  public var code: ErrorCode?
  public var body: [UInt8]

  public init(code: ErrorCode?, body: [UInt8]) {
    self.code = code
    self.body = body
  }
}

/// One line of the paged session list.
public struct SessionSummary: Equatable, Sendable {
  public var id: String
  public var phase: Phase
  public var viewers: Int
  public var endsAt: Int64?
}

extension Hub {
  /// An HTTP command on `session` (the caller checked `SessionID.isValid`).
  /// Its answer is queued for `drainAnswers` under `request`, at once for a
  /// refusal, or when the sequencer has made the command durable or ordered.
  /// A session nobody has open is created as a first join would create it.
  /// `idempotencyKey` is the request's validated `Idempotency-Key`, carried
  /// with the command (what the sequencers do with it is Idempotency's part).
  /// `existsNowhere`: the caller read the cluster and found no such session,
  /// which a sequencer that does not know every session cannot tell.
  public func command(
    _ body: [UInt8], session id: String, authority: RequestAuthority, peer: String,
    request: RequestID, idempotencyKey: String? = nil, existsNowhere: Bool = false, now: Int64
  ) {
    func refuse(_ code: ErrorCode, _ message: String? = nil, id: CommandID? = nil, op: String?) {
      if let op { stats.countCommand(op, result: code.rawValue) }
      let error = CommandError(code, message ?? Self.explain(code), id: id)
      requestAnswers.append((request, RequestAnswer(code: code, body: WireCodec.error(error))))
    }
    var limits = ["a:" + peer]
    if case .token(let line) = authority { limits.append("t:\(line)") }
    guard requestLimits.take(limits, rate: config.commandsPerSecond, now: now) else {
      return refuse(
        .rateLimited, "more than \(Int(config.commandsPerSecond)) commands a second", op: nil)
    }
    let message: ClientMessage
    switch WireCodec.decode(body, defaultSeconds: config.session.defaultSeconds) {
    case .failure(let error):
      return refuse(error.code, error.message, id: error.id, op: nil)
    case .success(let decoded): message = decoded
    }
    let command: SessionCommand
    var newKey: String?
    switch message.request {
    case .ping, .auth:
      return refuse(
        .badRequest, "ping and auth are WebSocket messages; send a key as Authorization: Bearer",
        id: message.id, op: nil)
    case .rotateKey:
      guard config.control == .key else {
        return refuse(
          .badRequest, "rotate_key needs a server started with --control key", id: message.id,
          op: SessionCommand.Op.rotateKey.rawValue)
      }
      let key = ControllerKey.generate().hex
      newKey = key
      command = .rotateKey(KeyHash(of: key))
    case .command(let decoded):
      command = decoded
    }
    // Without a token or a key there is nothing to authorise in key mode:
    // refused before a session is made for it.
    if config.control == .key, authority == .none {
      return refuse(.forbidden, id: message.id, op: command.op.rawValue)
    }
    // Nor is there for a key presented for a session that does not exist:
    // made for the request, it would get a key nobody holds, and its first
    // visitor would join it as a mere viewer.
    if config.control == .key, case .key = authority, sessionIndex[id] == nil,
      sequencer.knowsEverySession || existsNowhere
    {
      return refuse(.forbidden, id: message.id, op: command.op.rawValue)
    }
    let address = addresses.hold(peer)
    defer { addresses.release(address) }
    let handle: SessionHandle
    if let existing = sessionIndex[id] {
      handle = existing
    } else {
      guard let created = createSession(id, from: address, now: now) else {
        return refuse(.tooManySessions, id: message.id, op: command.op.rawValue)
      }
      handle = created.handle
      // Nobody watches it: it is forgotten when idle, as a viewer's would be.
      transition(handle) { $0.viewersChanged(to: 0, now: now) }
    }
    var presented: KeyHash?
    if case .key(let key) = authority { presented = KeyHash(of: key) }
    var byToken = false
    if case .token = authority { byToken = true }
    submit(
      PendingCommand(
        session: handle, connection: ConnectionHandle(-1), serial: 0, id: message.id,
        command: command, presented: presented, newKey: newKey, address: address,
        request: request, byToken: byToken, idempotencyKey: idempotencyKey),
      now: now)
  }

  /// Hands over every answer ready since the last call, in order.
  public func drainAnswers(_ each: (RequestID, RequestAnswer) -> Void) {
    guard !requestAnswers.isEmpty else { return }
    let ready = requestAnswers
    requestAnswers = []
    for (request, answer) in ready { each(request, answer) }
  }

  /// The snapshot object a viewer's first frame carries, without a role:
  /// nil for a session this hub does not hold (which reads as idle here, or
  /// from the cluster), and nothing is created for it.
  public func snapshot(of id: String, now: Int64) -> [UInt8]? {
    guard let handle = sessionIndex[id], !sessions[handle].loading else { return nil }
    let machine = sessions[handle].machine
    return WireCodec.snapshot(
      session: id, epoch: epoch, seq: machine.seq, serverTime: now, state: machine.published)
  }

  /// A session nobody has opened, as it would be shown: idle, at seq 0.
  public func idleSnapshot(of id: String, now: Int64) -> [UInt8] {
    let machine = SessionStateMachine(config: sessionConfig, now: now)
    return WireCodec.snapshot(
      session: id, epoch: epoch, seq: machine.seq, serverTime: now, state: machine.published)
  }

  /// At most `limit` live sessions here, ordered by id, each after `after`.
  public func sessionPage(after: String?, limit: Int) -> [SessionSummary] {
    sortedIDs.page(after: after, limit: limit) { sessions[$0].id }.map { handle in
      let session = sessions[handle]
      let state = session.machine.published
      return SessionSummary(
        id: session.id, phase: state.phase, viewers: state.viewers, endsAt: state.endsAt)
    }
  }
}
