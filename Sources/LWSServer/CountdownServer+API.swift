import CountdownCore
import QRCode

/// One API transaction in progress on a connection: what its headers said,
/// then its body as it arrives, then (for a command) its request id.
struct APICall {
  var session: String
  var authority: RequestAuthority
  var peer: String
  var expected: Int
  var body: [UInt8] = []
  var extraHeaders: [(String, String)]
  var idempotencyKey: String?
  var request: RequestID?
  /// `POST /qr.svg`: the body is a QR code's text, not a command.
  var qrCode = false
}

/// The server's side of `/api/v1`: transactions by connection, commands
/// waiting for the hub's answer by request id, and answers waiting to be written.
struct APITable {
  var calls: [Wsi: APICall] = [:]
  var waiting: [RequestID: Wsi] = [:]
  var outbox: [Wsi: [UInt8]] = [:]
  var nextRequest: RequestID = 1
  /// The OpenAPI document, read from the public directory at start.
  var document: [UInt8]?
}

/// What the callback does next with an API request.
enum APIStep {
  /// The answer, the connection's last.
  case write([UInt8])
  /// A command's headers passed: read its body, then `apiBodyComplete`.
  case readBody
  /// The answer comes later (`flush` queues it, then WRITEABLE writes it).
  case wait
  /// `GET …/events`: the SSE stream opens, reading the request's headers
  /// itself (`openEventStream`), as a WebSocket upgrade's are read.
  case events
}

extension CountdownServer {
  static let openAPIFile = "openapi.json"
  static let openAPILimit = 1 << 20

  private var cors: CORSPolicy {
    CORSPolicy(allowed: config.allowedOrigins.map { $0.lowercased() })
  }

  /// Headers every API answer carries: lws's security headers and, for an
  /// allowed origin, CORS.
  func apiHeaders(_ origin: String?) -> [(String, String)] {
    cors.headers(origin: origin) + [
      ("content-security-policy", "default-src 'none'; frame-ancestors 'none'"),
      ("x-content-type-options", "nosniff"), ("x-frame-options", "deny"),
      ("referrer-policy", "no-referrer"),
    ]
  }

  /// A HEAD gets the GET's headers, its length included, without the body.
  private func write(_ response: APIResponse, _ request: APIRequest) -> APIStep {
    var bytes = response.bytes(extra: apiHeaders(request.origin))
    if request.method == .head { bytes.removeLast(response.body.count) }
    return .write(bytes)
  }

  /// A request's headers are in: route it, and answer what needs no body.
  func apiBegin(_ wsi: Wsi, _ request: APIRequest, peer: String) -> APIStep {
    func refuse(_ refusal: APIRefusal) -> APIStep { write(APIResponse(refusal), request) }
    switch APIRoute.of(request) {
    case .refuse(let refusal):
      return refuse(refusal)
    case .preflight(let methods):
      let headers = cors.preflightHeaders(origin: request.origin, methods: methods)
      return .write(
        APIResponse(status: 204, body: [], headers: headers).bytes(extra: apiHeaders(nil)))
    case .qrCode:
      let length: Int
      switch APICommandHeaders.length(request.contentLength, maxBytes: QRCode.maxTextBytes) {
      case .failure(.tooLarge): length = 0  // refused below, as a GET's long text is
      case .failure(let refusal): return refuse(refusal)
      case .success(let value): length = value
      }
      guard length > 0 else { return write(qrCodeResponse(QRCodeAnswers.refusal), request) }
      api.calls[wsi] = APICall(
        session: "", authority: .none, peer: peer, expected: length,
        extraHeaders: apiHeaders(request.origin), qrCode: true)
      return .readBody
    case .openAPI:
      guard let document = api.document else { return refuse(.notFound) }
      return write(APIResponse(status: 200, body: document), request)
    case .events:
      return .events
    case .read(let session):
      if request.method != .head, let step = clusterRead(wsi, session, request, peer: peer) {
        return step
      }
      return write(APIResponse(status: 200, body: read(session)), request)
    case .list(let after, let limit):
      switch APICommandHeaders.bearer(request.authorization) {
      case .failure(let refusal): return refuse(refusal)
      case .success(nil): return refuse(.unauthorized)
      case .success(let bearer?):
        guard config.apiTokens.match(bearer) != nil else {
          return refuse(.forbidden("the bearer token is not accepted"))
        }
      }
      if request.method != .head,
        let step = clusterList(wsi, after: after, limit: limit, request, peer: peer)
      {
        return step
      }
      return write(APIResponse(status: 200, body: listBody(after: after, limit: limit)), request)
    case .command(let session):
      guard APICommandHeaders.isJSON(request.contentType) else {
        return refuse(.unsupportedType)
      }
      let length: Int
      switch APICommandHeaders.length(request.contentLength, maxBytes: config.maxMessageBytes) {
      case .failure(let refusal): return refuse(refusal)
      case .success(let value): length = value
      }
      let bearer: String?
      switch APICommandHeaders.bearer(request.authorization) {
      case .failure(let refusal): return refuse(refusal)
      case .success(let value): bearer = value
      }
      let idempotencyKey: String?
      switch APICommandHeaders.idempotencyKey(request.idempotencyKey) {
      case .failure(let refusal): return refuse(refusal)
      case .success(let value): idempotencyKey = value
      }
      if let origin = request.origin, !originAllowed(origin, host: request.host) {
        return refuse(
          .forbidden(
            "commands are not accepted from the origin \(origin.prefix(Self.loggedOriginLength))"))
      }
      var authority = RequestAuthority.none
      if let bearer {
        if let line = config.apiTokens.match(bearer) {
          authority = .token(line)
        } else if hub.config.control == .key {
          authority = .key(bearer)
        } else {
          return refuse(.forbidden("the bearer token is not accepted"))
        }
      }
      api.calls[wsi] = APICall(
        session: session, authority: authority, peer: peer, expected: length,
        extraHeaders: apiHeaders(request.origin), idempotencyKey: idempotencyKey)
      if length == 0 { return apiBodyComplete(wsi) }
      return .readBody
    }
  }

  /// A chunk of a command's body: refused once past what was announced or allowed.
  func apiBody(_ wsi: Wsi, _ chunk: UnsafeRawBufferPointer) -> APIStep? {
    guard var call = api.calls[wsi] else { return nil }
    guard call.body.count + chunk.count <= min(call.expected, config.maxMessageBytes) else {
      let headers = call.extraHeaders
      api.calls[wsi] = nil
      return .write(APIResponse(.tooLarge).bytes(extra: headers))
    }
    api.calls[wsi] = nil  // no second copy of the body while it is appended to
    call.body.append(contentsOf: chunk)
    api.calls[wsi] = call
    return nil
  }

  /// The body is whole: the command goes to the hub. The answer is written
  /// at once when the hub has it at once, else when it comes.
  func apiBodyComplete(_ wsi: Wsi) -> APIStep {
    guard var call = api.calls[wsi], call.request == nil else { return .wait }
    if call.qrCode {
      api.calls[wsi] = nil
      let answer = qrCodes.answer(
        call.body, shared: false, peer: admission.budget.key(call.peer),
        now: clock.nowMilliseconds())
      return .write(qrCodeResponse(answer).bytes(extra: call.extraHeaders, type: answer.type))
    }
    let request = api.nextRequest
    api.nextRequest += 1
    call.request = request
    let body = call.body
    call.body = []
    api.calls[wsi] = call
    api.waiting[request] = wsi
    if clusterKeyCheck(request, body, call) { return .wait }
    sendCommand(request, body, call, existsNowhere: false)
    if let bytes = api.outbox.removeValue(forKey: wsi) { return .write(bytes) }
    return .wait
  }

  func sendCommand(_ request: RequestID, _ body: [UInt8], _ call: APICall, existsNowhere: Bool) {
    hub.command(
      body, session: call.session, authority: call.authority,
      peer: admission.budget.key(call.peer), request: request,
      idempotencyKey: call.idempotencyKey, existsNowhere: existsNowhere,
      now: clock.nowMilliseconds())
    flush()
  }

  /// A QR code's answer in the API's framing, which says `no-store`.
  private func qrCodeResponse(_ answer: HTTPAnswer) -> APIResponse {
    APIResponse(
      status: answer.status, body: answer.body,
      headers: answer.retryAfter.map { [("retry-after", String($0))] } ?? [])
  }

  /// After every hub call (`flush`): answers the hub has ready go to their
  /// connections' outboxes, each written when its connection is writable.
  /// An answer whose connection has gone is dropped.
  func deliverAPIAnswers() {
    hub.drainAnswers { request, answer in
      guard let wsi = api.waiting.removeValue(forKey: request),
        let call = api.calls.removeValue(forKey: wsi)
      else { return }
      api.outbox[wsi] = APIResponse(answer: answer).bytes(extra: call.extraHeaders)
      requestWritable(wsi)
    }
  }

  /// The answer waiting for a connection that is now writable.
  func apiWritable(_ wsi: Wsi) -> [UInt8]? {
    api.outbox.removeValue(forKey: wsi)
  }

  func apiClosed(_ wsi: Wsi) {
    if let call = api.calls.removeValue(forKey: wsi), let request = call.request {
      api.waiting[request] = nil
    }
    api.outbox[wsi] = nil
  }

  /// The snapshot of a session, or, for one this instance does not hold,
  /// the idle state it reads as: nothing is created for a read. In a
  /// cluster, a session held elsewhere is read from Redis here (helper I's
  /// seam: a session that is not in the hub goes to the cluster's reader).
  func read(_ session: String) -> [UInt8] {
    let now = clock.nowMilliseconds()
    return hub.snapshot(of: session, now: now) ?? hub.idleSnapshot(of: session, now: now)
  }

  /// `{"sessions":[…],"next":…}`: `next` is the `after` of the next page,
  /// null on the last. In a cluster the index the command function keeps
  /// answers instead (helper I's seam).
  func listBody(after: String?, limit: Int) -> [UInt8] {
    listBody(page: hub.sessionPage(after: after, limit: limit + 1), limit: limit)
  }

  /// The list from a page of up to `limit + 1` sessions (the last one only
  /// says that a next page exists).
  func listBody(page: [SessionSummary], limit: Int) -> [UInt8] {
    var json = JSONWriter()
    json.raw("{\"sessions\":[")
    for (index, summary) in page.prefix(limit).enumerated() {
      if index > 0 { json.raw(",") }
      json.raw("{\"id\":")
      json.string(summary.id)
      json.raw(",\"phase\":")
      json.string(summary.phase.rawValue)
      json.raw(",\"viewers\":")
      json.integer(summary.viewers)
      json.raw(",\"endsAt\":")
      if let endsAt = summary.endsAt { json.integer(endsAt) } else { json.raw("null") }
      json.raw("}")
    }
    json.raw("],\"next\":")
    if page.count > limit, let last = page.prefix(limit).last {
      json.string(last.id)
    } else {
      json.raw("null")
    }
    json.raw("}")
    return json.bytes
  }
}
