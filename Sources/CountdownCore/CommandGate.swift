/// The first step of the command path, per connection: rate-limit, decode,
/// authorise. What comes out is a typed command for the sequencer, a ping to
/// answer, or a refusal; nothing here touches a session.
struct CommandGate {
  enum Outcome: Equatable {
    case command(SessionCommand, id: CommandID?)
    case ping(t: String)
    /// A controller key presented after the handshake: the hub decides it
    /// against the session's key.
    case auth(key: String, id: CommandID?)
    /// A controller asks for a new key; the hub makes it.
    case rotateKey(id: CommandID?)
    /// Answer with this error; `op` names the command for metrics, when known.
    case refuse(CommandError, op: String?)
    /// A sustained flood: close the connection.
    case close(CloseDirective)
  }

  // One per viewer, so the limits come from the hub's config, and whether the
  // viewer controls from its connection, at each call rather than being
  // copied into every connection.
  private var bucket: TokenBucket

  init(config: HubConfig, now: Int64) {
    bucket = TokenBucket(rate: config.commandsPerSecond, now: now)
  }

  mutating func admit(
    _ text: [UInt8], isController: Bool, config: HubConfig, now: Int64
  ) -> Outcome {
    let rate = config.commandsPerSecond
    guard bucket.take(rate: rate, now: now) else {
      if let since = bucket.floodingSince, now - since >= config.floodCloseAfterMs {
        return .close(CloseDirective(.policyViolation, "too many commands"))
      }
      return .refuse(
        CommandError(.rateLimited, "more than \(Int(rate)) commands a second"), op: nil)
    }
    let message: ClientMessage
    switch WireCodec.decode(text, defaultSeconds: config.session.defaultSeconds) {
    case .failure(let error): return .refuse(error, op: nil)
    case .success(let decoded): message = decoded
    }
    func forbidden(_ op: SessionCommand.Op) -> Outcome {
      .refuse(CommandError(.forbidden, Hub.explain(.forbidden), id: message.id), op: op.rawValue)
    }
    switch message.request {
    case .ping(let t): return .ping(t: t)
    case .auth(let key): return .auth(key: key, id: message.id)
    case .rotateKey:
      guard config.control == .key else {
        return .refuse(
          CommandError(
            .badRequest, "rotate_key needs a server started with --control key", id: message.id),
          op: SessionCommand.Op.rotateKey.rawValue)
      }
      guard isController else { return forbidden(.rotateKey) }
      return .rotateKey(id: message.id)
    case .command(let command):
      guard isController else { return forbidden(command.op) }
      return .command(command, id: message.id)
    }
  }
}
