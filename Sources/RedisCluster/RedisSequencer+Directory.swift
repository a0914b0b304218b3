import CountdownCore

/// The cluster's reads for the HTTP API: the list of every commanded
/// session, from the index the command function keeps (a sorted set paged
/// by ZRANGEBYLEX), and a read of one session that this instance does not
/// hold. Both go on the commands connection, answer on the loop's thread,
/// and create nothing (`countdown_v2_peek` only drops index entries whose
/// session hash has expired).
extension RedisSequencer: SessionDirectory {
  public func listSessions(
    after: String?, limit: Int,
    completion: @escaping (Result<[DirectorySession], ErrorCode>) -> Void
  ) {
    guard SessionDirectoryLimits.isValid(after: after, limit: limit) else {
      completion(.failure(.badRequest))
      return
    }
    let range = [after.map { "(" + $0 } ?? "-", "+"]
    let sent = send(["ZRANGEBYLEX", Self.sessionsKey] + range + ["LIMIT", "0", String(limit)]) {
      [weak self] reply in
      guard let self, let ids = reply?.elements?.compactMap(\.text) else {
        completion(.failure(.unavailable))
        return
      }
      // Members are input too: one that is no session id is skipped.
      let sessions = ids.filter(SessionID.isValid)
      guard !sessions.isEmpty else {
        completion(.success([]))
        return
      }
      peek(sessions) { completion($0.map { $0.compactMap { $0 } }) }
    }
    if !sent { completion(.failure(.unavailable)) }
  }

  public func readSession(
    _ id: String, completion: @escaping (Result<DirectorySession?, ErrorCode>) -> Void
  ) {
    guard SessionID.isValid(id) else {
      completion(.failure(.badRequest))
      return
    }
    peek([id]) { completion($0.map { $0.first ?? nil }) }
  }

  /// One `countdown_v2_peek` for `sessions`: each one's summary, or nil
  /// when it has no hash (or a damaged one, logged).
  private func peek(
    _ sessions: [String], then done: @escaping (Result<[DirectorySession?], ErrorCode>) -> Void
  ) {
    var keys = [Self.sessionsKey, Self.positionKey]
    for session in sessions { keys += [Self.sessionKey(session), Self.viewerKey(session)] }
    let call =
      ["FCALL", Self.function("peek"), String(keys.count)] + keys + [settings.epoch] + sessions
    let sent = send(call) { reply in
      guard let rows = reply?.elements, rows.count == sessions.count else {
        done(.failure(.unavailable))
        return
      }
      done(.success(zip(sessions, rows).map(Self.summary)))
    }
    if !sent { done(.failure(.unavailable)) }
  }

  private static func summary(_ session: String, _ row: RedisReply) -> DirectorySession? {
    guard let parts = row.elements, parts.count == 2, let line = parts[0].text, !line.isEmpty,
      let message = RecordMessage.parse(line), message.session == session,
      let record = RecordDamage.accepted(message, from: "read")
    else { return nil }
    let viewers = parts[1].text.flatMap { Int($0) }.map { min(max($0, 0), Int(Int32.max)) } ?? 0
    return DirectorySession(id: session, record: record, viewers: viewers)
  }

  /// Sends on the commands connection when the cluster is live; the handler
  /// gets the reply, or nil for an error or a lost connection.
  private func send(_ arguments: [String], handler: @escaping (RedisReply?) -> Void) -> Bool {
    guard isConnected, let commands else { return false }
    return commands.send(arguments) { result in
      guard case .success(let reply) = result, case .array = reply else {
        handler(nil)
        return
      }
      handler(reply)
    }
  }
}
