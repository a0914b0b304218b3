extension Hub {
  /// The answer to a command sent with an idempotency key, first time and
  /// replayed alike: a pure function of what the sequencer remembered, so a
  /// retry gets the same bytes after a restart and on another instance.
  /// Nil for an outcome that is not remembered (`unavailable`, `forbidden`,
  /// …): that one is answered as any command's error is.
  func keyedAnswer(_ outcome: SequenceOutcome, id: CommandID?) -> [UInt8]? {
    IdempotentAnswer(outcome).map { requestAnswer($0, id: id) }
  }

  /// `{"type":"ack","id":…,"seq":N,"state":{…}}` for an applied command
  /// (`id` is the retry's own, as the command's body gave it): `seq` is
  /// the session's seq as the command applied (any later snapshot's is at
  /// least that), `state` the session as the command left it at its time,
  /// as its record makes it (viewers are not remembered: 0, not stale). A
  /// refused command gets the error object.
  public func requestAnswer(_ answer: IdempotentAnswer, id: CommandID? = nil) -> [UInt8] {
    switch answer {
    case .applied(let record):
      var machine = SessionStateMachine(config: sessionConfig, now: record.updatedAt)
      _ = machine.adopt(record, now: record.updatedAt)
      return WireCodec.ack(id: id, seq: record.seq, state: machine.published)
    case .rejected(let code):
      return WireCodec.error(CommandError(code, Self.explain(code), id: id))
    }
  }

  /// A command with an idempotency key from a viewer connection, past the
  /// gate: what the HTTP request path does with its requester, for the
  /// hub's own tests of replays. Its answer is replied on the connection.
  func submit(
    _ command: SessionCommand, idempotencyKey: String?, from id: ConnectionID, now: Int64
  ) {
    let handle = ConnectionHandle(id)
    guard connections.contains(handle) else { return }
    submit(
      PendingCommand(
        session: connections[handle].session, connection: handle,
        serial: connections[handle].serial, id: nil, command: command,
        presented: presentedKeys[id], address: connectionAddresses[Int(id)],
        idempotencyKey: idempotencyKey), now: now)
  }
}
