import CountdownCore

/// How an event-stream request was answered.
enum EventStreamOpening: Equatable {
  /// A hub viewer now: the stream's headers go out, then its events.
  case opened(ConnectionID)
  /// Refused with this status, these extra header lines and, when set, this body.
  case refused(status: UInt32, headers: String, answer: HTTPAnswer?)
}

extension HTTPAnswer: Equatable {
  static func == (lhs: HTTPAnswer, rhs: HTTPAnswer) -> Bool {
    lhs.status == rhs.status && lhs.type == rhs.type && lhs.body == rhs.body
      && lhs.cacheControl == rhs.cacheControl
  }
}

extension CountdownServer {
  /// `GET /api/v1/sessions/{id}/events`: a viewer on Server-Sent Events. It
  /// goes through the WebSocket's admission (caps, Origin, drain) and joins
  /// the hub as a viewer like any other, so it counts in `viewers`, gets the
  /// same slow-reader merging and is closed on drain and shutdown; the
  /// fan-out frames its snapshot and patches as events. It never controls,
  /// even in key mode: it cannot send a command, so it is never shown a key.
  func openEventStream(_ wsi: Wsi, _ request: UpgradeRequest) -> EventStreamOpening {
    let session: String
    switch admit(request) {
    case .countdown(let id):
      session = id
    case .echo:
      return refuse(.badSessionID, request)
    case .refuse(let cause):
      return refuse(cause, request)
    }
    let peerID = admission.admitted(peer: request.peer)
    switch join(
      wsi, .eventStream, session: session, key: nil, since: request.since, peer: request.peer,
      peerID)
    {
    case .joined(let id):
      network.accepted += 1
      return .opened(id)
    case .refused(let code):
      releasePeer(peerID)
      refusedByHub(code, peer: request.peer)
      return .refused(
        status: RefusalCause.sessionCap.status, headers: Self.retryAfter,
        answer: HTTPAnswer(
          status: RefusalCause.sessionCap.status, type: "application/json",
          body: hub.refusalFrame(code)))
    }
  }

  private func refuse(_ cause: RefusalCause, _ request: UpgradeRequest) -> EventStreamOpening {
    refused(cause, request)
    // A cap or a drain passes: say when to come back (EventSource itself
    // gives up on any status but 200, but curl loops and proxies read it).
    let retry = cause.status == 503 || cause.status == 429
    // An error object, as every answer under /api/v1 is (the OpenAPI document's).
    let error: CommandError
    switch cause {
    case .origin: error = CommandError(.forbidden, "streams are not opened for this origin")
    case .perIP: error = CommandError(.rateLimited, "too many connections from this address")
    case .totalCap, .draining, .sessionCap:
      error = CommandError(.unavailable, "the server cannot take another stream now")
    case .badSessionID: error = CommandError(.badRequest, "not a session id")
    case .badVersion, .badKey, .badHeader: error = CommandError(.badRequest, "a malformed request")
    }
    return .refused(
      status: cause.status, headers: retry ? Self.retryAfter : "",
      answer: HTTPAnswer(
        status: cause.status, type: "application/json", body: WireCodec.error(error)))
  }

  private static let retryAfter = "retry-after: 5\r\n"

  /// The extra response headers of an accepted stream: CORS for an allowed
  /// foreign page (a page of the server's own origin needs none), and no
  /// buffering by proxies that would otherwise hold events back.
  func eventStreamHeaders(origin: String?) -> [(name: String, value: String)] {
    var headers = [("cache-control:", "no-cache"), ("x-accel-buffering:", "no")]
    if let origin {
      headers += [("access-control-allow-origin:", origin), ("vary:", "Origin")]
    }
    return headers
  }
}
