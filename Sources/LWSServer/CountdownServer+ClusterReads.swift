import CountdownCore

/// The HTTP API's reads in a cluster: a session this instance does not
/// hold is read from Redis, and the list comes from the index the command
/// function keeps (`SessionDirectory`). Both answer later, on the service
/// thread, through the outbox as a command's answer does; a connection
/// that closed meanwhile gets nothing.
extension CountdownServer {
  /// `.wait` when the read went to the cluster; nil when it is answered
  /// here (no cluster, or a session this hub holds).
  func clusterRead(_ wsi: Wsi, _ session: String, _ request: APIRequest, peer: String)
    -> APIStep?
  {
    guard let directory = hub.directory,
      hub.snapshot(of: session, now: clock.nowMilliseconds()) == nil
    else { return nil }
    let id = park(wsi, session, request, peer: peer)
    directory.readSession(session) { [weak self] result in
      guard let self else { return }
      switch result {
      case .success(let found):
        let now = clock.nowMilliseconds()
        answer(
          id,
          APIResponse(status: 200, body: hub.snapshot(reading: found, session: session, now: now)))
      case .failure(let code):
        answer(id, APIResponse(answer: RequestAnswer(code: code, body: Self.refusal(code))))
      }
    }
    return .wait
  }

  /// `.wait` when the list went to the cluster's index; nil without a cluster.
  func clusterList(
    _ wsi: Wsi, after: String?, limit: Int, _ request: APIRequest, peer: String
  ) -> APIStep? {
    guard let directory = hub.directory else { return nil }
    let id = park(wsi, "", request, peer: peer)
    // One more than asked: whether there is a next page.
    directory.listSessions(after: after, limit: limit + 1) { [weak self] result in
      guard let self else { return }
      switch result {
      case .success(let sessions):
        let now = clock.nowMilliseconds()
        let page = sessions.map { $0.summary(now: now) }
        answer(id, APIResponse(status: 200, body: listBody(page: page, limit: limit)))
      case .failure(let code):
        answer(id, APIResponse(answer: RequestAnswer(code: code, body: Self.refusal(code))))
      }
    }
    return .wait
  }

  /// A controller key, in key mode, for a session this instance does not
  /// hold: opened in Redis, a session that exists nowhere would get a key
  /// nobody holds, so the cluster is read first and the hub refuses the key
  /// if it has no such session, as it does on one server. True when the
  /// command went to that read.
  func clusterKeyCheck(_ request: RequestID, _ body: [UInt8], _ call: APICall) -> Bool {
    guard hub.config.control == .key, case .key = call.authority, let directory = hub.directory,
      hub.snapshot(of: call.session, now: clock.nowMilliseconds()) == nil
    else { return false }
    directory.readSession(call.session) { [weak self] result in
      guard let self, api.waiting[request] != nil else { return }
      switch result {
      case .success(let found): sendCommand(request, body, call, existsNowhere: found == nil)
      case .failure(let code):
        answer(request, APIResponse(answer: RequestAnswer(code: code, body: Self.refusal(code))))
      }
    }
    return true
  }

  private static func refusal(_ code: ErrorCode) -> [UInt8] {
    let message =
      code == .unavailable ? "the cluster cannot be read right now; try again" : "bad request"
    return WireCodec.error(CommandError(code, message))
  }

  /// Holds the connection's place under a request id, so that the answer
  /// finds it, or finds it gone (`apiClosed`).
  private func park(_ wsi: Wsi, _ session: String, _ request: APIRequest, peer: String)
    -> RequestID
  {
    let id = api.nextRequest
    api.nextRequest += 1
    api.calls[wsi] = APICall(
      session: session, authority: .none, peer: peer, expected: 0,
      extraHeaders: apiHeaders(request.origin), request: id)
    api.waiting[id] = wsi
    return id
  }

  private func answer(_ id: RequestID, _ response: APIResponse) {
    guard let wsi = api.waiting.removeValue(forKey: id),
      let call = api.calls.removeValue(forKey: wsi)
    else { return }
    api.outbox[wsi] = response.bytes(extra: call.extraHeaders)
    requestWritable(wsi)
  }
}
