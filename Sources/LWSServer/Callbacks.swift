import CLibWebSockets
import CountdownCore
import Observability

// The C entry points. Raw pointers end here: each callback recovers the
// server from the context, turns lws's arguments into Swift values, and
// calls one method of `CountdownServer`.

/// What each socket is, kept in lws's opaque user pointer of the wsi (0 when
/// new) rather than in per-session memory, which lws would allocate for every
/// connection.
private enum SocketTag {
  /// Positive values are a hub ConnectionID + 1; 0 is nothing yet.
  static let refused: Int32 = -1
  static let echo: Int32 = -2
  /// A plain HTTP answer whose body waits in `httpBodies`.
  static let httpBody: Int32 = -3
  /// An `/api/v1` transaction (`CountdownServer+API.swift`).
  static let api: Int32 = -4
}

private func server(of wsi: Wsi) -> CountdownServer {
  Unmanaged<CountdownServer>.fromOpaque(lws_context_user(lws_get_context(wsi.raw))!)
    .takeUnretainedValue()
}

private func tag(_ wsi: Wsi) -> Int32 {
  Int32(truncatingIfNeeded: Int(bitPattern: lws_get_opaque_user_data(wsi.raw)))
}

private func setTag(_ wsi: Wsi, _ value: Int32) {
  lws_set_opaque_user_data(wsi.raw, UnsafeMutableRawPointer(bitPattern: Int(value)))
}

// MARK: Request headers, read whole

/// The most of one header (or of all URL arguments) the server reads. lws
/// 4.1.6 holds every header of a request in 4 KiB, and its parser gives up
/// on a request past that; this cap is ours, so that a header the server
/// cannot use whole is refused rather than half read.
let headerByteCap = 2048

/// lws's answers about one header, turned into Swift in this one place. A
/// header that is present but cannot be read is an error, never nil: nil is
/// only a header that is not there.
private func headerBytes(
  _ wsi: Wsi, _ token: lws_token_indexes, _ name: String
) throws(HeaderError) -> [UInt8]? {
  // The total counts the ", " lws puts between repeated headers. Zero is
  // also a header that is present and empty: copying its first fragment
  // fails only when there is none.
  let total = Int(lws_hdr_total_length(wsi.raw, token))
  if total == 0 {
    var empty: CChar = 0
    return lws_hdr_copy_fragment(wsi.raw, &empty, 1, token, 0) < 0 ? nil : []
  }
  guard total <= headerByteCap else { throw HeaderError(header: name, problem: .tooLong(total)) }
  var buffer = [CChar](repeating: 0, count: total + 1)
  let copied = lws_hdr_copy(wsi.raw, &buffer, Int32(buffer.count), token)
  guard copied >= 0, Int(copied) <= total else {
    throw HeaderError(header: name, problem: .library(code: copied))
  }
  return buffer[..<Int(copied)].map { UInt8(bitPattern: $0) }
}

private func header(
  _ wsi: Wsi, _ token: lws_token_indexes, _ name: String
) throws(HeaderError) -> String? {
  try headerBytes(wsi, token, name).map { bytes throws(HeaderError) in
    try HeaderError.text(bytes, header: name)
  }
}

/// Every URL argument (`name=value`, as lws decoded it), each fragment read
/// at its own length: lws_get_urlarg_by_name stops at the first argument
/// longer than its buffer, so a long argument in front hid a `key` behind it.
private func urlArguments(
  _ wsi: Wsi,
  as text: ([UInt8], String) throws(HeaderError) -> String = HeaderError.text
) throws(HeaderError) -> [String] {
  let token = WSI_TOKEN_HTTP_URI_ARGS
  let total = Int(lws_hdr_total_length(wsi.raw, token))
  guard total > 0 else { return [] }
  guard total <= headerByteCap else {
    throw HeaderError(header: "query", problem: .tooLong(total))
  }
  var arguments: [String] = []
  var read = 0
  var index: Int32 = 0
  // The fragments' lengths add up to the total, less one separator each.
  while read + arguments.count - 1 < total {
    let length = Int(lws_hdr_fragment_length(wsi.raw, token, index))
    var buffer = [CChar](repeating: 0, count: length + 1)
    let copied = lws_hdr_copy_fragment(wsi.raw, &buffer, Int32(buffer.count), token, index)
    guard copied >= 0, Int(copied) == length else {
      throw HeaderError(header: "query", problem: .library(code: copied))
    }
    let bytes = buffer[..<length].map { UInt8(bitPattern: $0) }
    arguments.append(try text(bytes, "query"))
    read += length
    index += 1
  }
  return arguments
}

/// The one value of URL argument `name`; repeated, it is refused, since two
/// readers of the URL could each take a different one.
private func urlArgument(_ name: String, in arguments: [String]) throws(HeaderError) -> String? {
  let prefix = name + "="
  let values = arguments.filter { $0.hasPrefix(prefix) }.map { String($0.dropFirst(prefix.count)) }
  guard values.count <= 1 else { throw HeaderError(header: name, problem: .repeated) }
  return values.first
}

/// A seq as a client writes it: decimal digits only (`UInt64` alone would
/// take "+5" and "-0").
private func seqValue(_ text: String) -> UInt64? {
  guard !text.isEmpty, text.utf8.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") })
  else { return nil }
  return UInt64(text)
}

/// A header lws does not know by name (`name` lowercased, with its colon).
private func customHeader(_ wsi: Wsi, _ name: String) throws(HeaderError) -> String? {
  let length = Int(lws_hdr_custom_length(wsi.raw, name, Int32(name.utf8.count)))
  guard length >= 0 else { return nil }
  guard length <= headerByteCap else { throw HeaderError(header: name, problem: .tooLong(length)) }
  var buffer = [CChar](repeating: 0, count: length + 1)
  let copied = lws_hdr_custom_copy(
    wsi.raw, &buffer, Int32(buffer.count), name, Int32(name.utf8.count))
  guard copied >= 0, Int(copied) <= length else {
    throw HeaderError(header: name, problem: .library(code: copied))
  }
  return try HeaderError.text(buffer[..<Int(copied)].map { UInt8(bitPattern: $0) }, header: name)
}

private func peerAddress(_ wsi: Wsi) -> String {
  var buffer = [CChar](repeating: 0, count: 64)
  guard lws_get_peer_simple(wsi.raw, &buffer, buffer.count) != nil else { return "?" }
  let bytes = buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }
  return String(decoding: bytes, as: UTF8.self)
}

/// The request's facts, every header read whole. The peer is the client
/// behind a trusted proxy, when there is one.
private func readRequest(
  of wsi: Wsi, transport: Transport = .webSocket
) throws(HeaderError) -> UpgradeRequest {
  let (peer, tcpPeer) = try clientPeer(wsi)
  let arguments = try urlArguments(wsi)
  var since: UInt64?
  if let text = try urlArgument("since", in: arguments) {
    guard let number = seqValue(text) else {
      throw HeaderError(header: "since", problem: .notANumber)
    }
    since = number
  }
  if transport == .eventStream, let text = try customHeader(wsi, "last-event-id:") {
    // EventSource sends back the last `id:` it got; a client may also say `since`.
    guard let number = seqValue(text) else {
      throw HeaderError(header: "last-event-id", problem: .notANumber)
    }
    since = max(since ?? 0, number)
  }
  return UpgradeRequest(
    transport: transport,
    path: try header(wsi, WSI_TOKEN_GET_URI, "path") ?? "",
    origin: try header(wsi, WSI_TOKEN_ORIGIN, "origin"),
    host: try header(wsi, WSI_TOKEN_HOST, "host"), peer: peer,
    via: peer == tcpPeer ? nil : tcpPeer,
    version: try header(wsi, WSI_TOKEN_VERSION, "sec-websocket-version"),
    key: try header(wsi, WSI_TOKEN_KEY, "sec-websocket-key"),
    controllerKey: try urlArgument("key", in: arguments), since: since)
}

/// The client's address (behind a trusted proxy, the one it names), and the TCP peer's.
private func clientPeer(_ wsi: Wsi) throws(HeaderError) -> (String, String) {
  let server = server(of: wsi)
  let tcpPeer = peerAddress(wsi)
  guard !server.config.trustedProxies.ranges.isEmpty else { return (tcpPeer, tcpPeer) }
  let forwarded = try header(wsi, WSI_TOKEN_X_FORWARDED_FOR, "x-forwarded-for")
  let client = server.config.trustedProxies.resolve(peer: tcpPeer, forwardedFor: forwarded)
  if client.malformed { server.malformedForwardedFor(peer: tcpPeer) }
  return (client.address, tcpPeer)
}

/// The method and path of a request, from whichever method's token lws filled.
/// OPTIONS, PUT, PATCH and DELETE exist as tokens because Debian builds lws
/// 4.1.6 with LWS_WITH_HTTP_UNCOMMON_HEADERS (lws_config.h). A path that is
/// not text is decoded lossily: it still routes, and under the API prefix
/// the API refuses it in its own shape.
private func methodAndPath(_ wsi: Wsi) -> (APIRequest.Method, String)? {
  for (token, method) in [
    (WSI_TOKEN_GET_URI, APIRequest.Method.get), (WSI_TOKEN_HEAD_URI, .head),
    (WSI_TOKEN_POST_URI, .post), (WSI_TOKEN_OPTIONS_URI, .options),
    (WSI_TOKEN_PUT_URI, .put), (WSI_TOKEN_PATCH_URI, .patch), (WSI_TOKEN_DELETE_URI, .delete),
  ] where lws_hdr_total_length(wsi.raw, token) > 0 {
    return (try? headerBytes(wsi, token, "path")).flatMap {
      $0.map { (method, String(decoding: $0, as: UTF8.self)) }
    }
  }
  return nil
}

private func isAPIPath(_ path: String) -> Bool {
  path == APIRequest.prefix || path.hasPrefix(APIRequest.prefix + "/")
}

/// `POST /qr.svg`: a code whose text must stay out of the URL, its body read
/// as an API command's is.
private func isQRCodePost(_ request: (APIRequest.Method, String)) -> Bool {
  request == (.post, QRCodeAnswers.path)
}

/// An `/api/v1` request's headers, every one read whole.
private func readAPIRequest(
  _ wsi: Wsi, method: APIRequest.Method, path: String
) throws(HeaderError) -> APIRequest {
  APIRequest(
    method: method, path: path, query: try urlArguments(wsi),
    contentType: try header(wsi, WSI_TOKEN_HTTP_CONTENT_TYPE, "content-type"),
    contentLength: try header(wsi, WSI_TOKEN_HTTP_CONTENT_LENGTH, "content-length"),
    authorization: try header(wsi, WSI_TOKEN_HTTP_AUTHORIZATION, "authorization"),
    origin: try header(wsi, WSI_TOKEN_ORIGIN, "origin"),
    host: try header(wsi, WSI_TOKEN_HOST, "host"),
    idempotencyKey: try customHeader(wsi, "idempotency-key:"))
}

/// Does what the API asks: an answer ends its connection, once written.
private func perform(_ wsi: Wsi, _ step: APIStep) -> Int32 {
  switch step {
  case .readBody, .wait:
    return 0
  case .events:
    // Admission reads the request again, as it does an upgrade's.
    return openEventStream(wsi)
  case .write(let bytes):
    setTag(wsi, 0)
    return server(of: wsi).send(bytes, to: wsi, as: LWS_WRITE_HTTP_FINAL) ? 1 : -1
  }
}

/// LWS_CALLBACK_HTTP for `/api/v1`.
private func beginAPI(_ wsi: Wsi, method: APIRequest.Method, path: String) -> Int32 {
  let server = server(of: wsi)
  let request: APIRequest
  let peer: String
  do throws(HeaderError) {
    request = try readAPIRequest(wsi, method: method, path: path)
    peer = try clientPeer(wsi).0
  } catch {
    server.unreadable(error, peer: peerAddress(wsi))
    let refusal =
      error.header == "origin"
      ? APIRefusal.forbidden("the Origin header could not be read")
      : .badHeader("the \(error.header) header could not be read")
    return perform(wsi, .write(APIResponse(refusal).bytes(extra: [])))
  }
  setTag(wsi, SocketTag.api)
  return perform(wsi, server.apiBegin(wsi, request, peer: peer))
}

private func close(_ wsi: Wsi, _ directive: CloseDirective) -> Int32 {
  server(of: wsi).closing(wsi, code: directive.code, reason: directive.reason)
  var bytes = Array(directive.reason.utf8.prefix(120))
  lws_close_reason(wsi.raw, lws_close_status(UInt32(directive.code.rawValue)), &bytes, bytes.count)
  return -1
}

private func finish(_ wsi: Wsi, _ outcome: WriteOutcome) -> Int32 {
  switch outcome {
  case .keepOpen: 0
  case .close(let directive): close(wsi, directive)
  case .fail: -1
  }
}

/// The countdown.v1 WebSocket protocol (and, as the vhost default, plain HTTP).
func countdownCallback(
  _ raw: OpaquePointer?, _ reason: lws_callback_reasons, _ user: UnsafeMutableRawPointer?,
  _ input: UnsafeMutableRawPointer?, _ length: Int
) -> Int32 {
  guard let raw else { return 0 }
  let wsi = Wsi(raw: raw)
  switch reason {
  case LWS_CALLBACK_ESTABLISHED:
    let server = server(of: wsi)
    // Read before, at the upgrade's confirmation, so this cannot fail.
    guard let request = try? readRequest(of: wsi) else { return -1 }
    switch server.admit(request) {
    case .countdown(let session):
      if let id = server.opened(
        wsi, session: session, key: request.controllerKey, since: request.since,
        peer: request.peer)
      {
        setTag(wsi, id + 1)
      } else {
        setTag(wsi, SocketTag.refused)
      }
    case .echo:
      server.echoOpened(wsi, peer: request.peer)
      setTag(wsi, SocketTag.echo)
    case .refuse(let cause):
      // The state changed since the upgrade was confirmed (a cap was reached).
      server.refused(cause, request)
      return -1
    }

  case LWS_CALLBACK_RECEIVE:
    let server = server(of: wsi)
    let chunk = UnsafeRawBufferPointer(start: input, count: length)
    let binary = lws_frame_is_binary(wsi.raw) != 0
    let isLast = lws_is_final_fragment(wsi.raw) != 0 && lws_remaining_packet_payload(wsi.raw) == 0
    let outcome: ChunkOutcome
    switch tag(wsi) {
    case SocketTag.echo:
      outcome = server.echoReceived(
        wsi, chunk, binary: binary, isFirst: lws_is_first_fragment(wsi.raw) != 0, isLast: isLast)
    case let value where value > 0:
      if binary {
        return close(wsi, CloseDirective(.unsupportedData, "binary frames are not accepted"))
      }
      outcome = server.received(
        chunk, from: value - 1, announcedRemaining: lws_remaining_packet_payload(wsi.raw),
        isLast: isLast)
    default:
      return 0  // a refused join: ignore what it says while it is being closed
    }
    if case .close(let directive) = outcome { return close(wsi, directive) }

  case LWS_CALLBACK_SERVER_WRITEABLE:
    // lws 4.1.6 still offers WRITEABLE after it queued its own Close (for a
    // protocol error) while it waits for the reply; RFC 6455 allows no data
    // after a Close, so write nothing once one is pending.
    if lws_get_close_length(wsi.raw) != 0 { return 0 }
    let server = server(of: wsi)
    switch tag(wsi) {
    case SocketTag.echo: return finish(wsi, server.echoWritable(wsi))
    case SocketTag.refused: return finish(wsi, server.writableRefused(wsi))
    case let value where value > 0: return finish(wsi, server.writable(wsi, connection: value - 1))
    default: return 0
    }

  case LWS_CALLBACK_RECEIVE_PONG:
    if tag(wsi) > 0 { server(of: wsi).heard(tag(wsi) - 1) }

  case LWS_CALLBACK_EVENT_WAIT_CANCELLED:
    // Broadcast to every protocol; handled here, in ours, once per wake-up.
    server(of: wsi).serviceWoken()

  case LWS_CALLBACK_WS_PEER_INITIATED_CLOSE:
    // A 1-byte close payload is malformed (a status code takes two); lws would
    // echo it back. Drop the connection instead.
    if length == 1 { return -1 }
    let payload = UnsafeRawBufferPointer(start: input, count: length)
    let code = length >= 2 ? UInt16(payload[0]) << 8 | UInt16(payload[1]) : 1005
    server(of: wsi).peerClosing(wsi, code: code)
    return 0

  case LWS_CALLBACK_CLOSED:
    let server = server(of: wsi)
    if tag(wsi) != 0 { server.countClosed(wsi, lwsSentClose: lws_get_close_length(wsi.raw) != 0) }
    switch tag(wsi) {
    case SocketTag.echo: server.echoClosed(wsi)
    case SocketTag.refused: server.closedRefused(wsi)
    case let value where value > 0: server.closed(value - 1)
    default: break
    }
    setTag(wsi, 0)

  default:
    // Being the vhost's default protocol (so clients naming no subprotocol
    // reach us), we also receive every plain HTTP connection's events.
    return httpCallback(raw, reason, user, input, length)
  }
  return 0
}

/// A POST of the origin check, with no body to wait for.
private func isOriginCheck(_ wsi: Wsi) -> Bool {
  guard (try? header(wsi, WSI_TOKEN_POST_URI, "path")) == CountdownServer.originCheckPath
  else { return false }
  let length = (try? header(wsi, WSI_TOKEN_HTTP_CONTENT_LENGTH, "content-length")) ?? nil
  return length == nil || length == "0"
}

/// Refuses an upgrade with an HTTP status before any WebSocket exists.
private func confirmUpgrade(_ wsi: Wsi) -> Int32 {
  let server = server(of: wsi)
  if let metrics = server.metricsVhost, lws_get_vhost(wsi.raw).map(Vhost.init) == metrics {
    return respond(wsi, status: 404)
  }
  let request: UpgradeRequest
  do throws(HeaderError) {
    request = try readRequest(of: wsi)
  } catch {
    server.unreadable(error, peer: peerAddress(wsi))
    return respond(wsi, status: error.cause.status)
  }
  guard case .refuse(let cause) = server.admit(request) else { return 0 }
  server.refused(cause, request)
  // RFC 6455 4.4: name the version the server speaks.
  let headers = cause == .badVersion ? "sec-websocket-version: 13\r\n" : ""
  return respond(wsi, status: cause.status, headers: headers)
}

/// Answers with a short plain-text status and ends the transaction.
/// Written by hand: during an upgrade lws's own status helper answers
/// "HTTP/1.0", which WebSocket clients reject as a malformed response.
private func respond(
  _ wsi: Wsi, status: UInt32, headers: String = "", answer: HTTPAnswer? = nil
) -> Int32 {
  let response = plainResponse(status: status, headers: headers, answer: answer)
  return server(of: wsi).send(response, to: wsi, as: LWS_WRITE_HTTP_FINAL) ? 1 : -1
}

/// A short plain-text status (or `answer`), whole, the connection's last.
private func plainResponse(status: UInt32, headers: String = "", answer: HTTPAnswer? = nil)
  -> [UInt8]
{
  let reason = APIResponse.reasons[status] ?? "Refused"
  let body = answer?.body ?? Array("\(status) \(reason)\n".utf8)
  return Array(
    ("HTTP/1.1 \(status) \(reason)\r\ncontent-type: \(answer?.type ?? "text/plain")\r\n"
      + "\(securityHeaders)\(headers)"
      + "content-length: \(body.count)\r\nconnection: close\r\n\r\n").utf8) + body
}

/// The headers lws's security option adds to its own answers, for ours too.
private let securityHeaders =
  "content-security-policy: default-src 'none'\r\nx-content-type-options: nosniff\r\n"
  + "x-frame-options: deny\r\nreferrer-policy: no-referrer\r\n"

/// Plain HTTP: lws serves the files itself; `/healthz` and misses reach us.
func httpCallback(
  _ raw: OpaquePointer?, _ reason: lws_callback_reasons, _ user: UnsafeMutableRawPointer?,
  _ input: UnsafeMutableRawPointer?, _ length: Int
) -> Int32 {
  guard let raw else { return 0 }
  let wsi = Wsi(raw: raw)
  switch reason {
  case LWS_CALLBACK_HTTP_CONFIRM_UPGRADE:
    return confirmUpgrade(wsi)

  case LWS_CALLBACK_FILTER_HTTP_CONNECTION:
    // One request per connection. lws 4.1.6 mishandles a request that
    // arrives behind another in the same read: it keeps it in the
    // connection's buffer list, and lws_service_do_ripe_rxflow
    // (lib/core-net/service.c:513-550) hands it back to a connection that
    // cannot take it (lib/roles/h1/ops-h1.c:393-399, for one, consumes
    // nothing while a file is still being sent), so the service thread
    // spins and a pipelined body is misread. Closing after every answer
    // drops whatever follows it unread, which RFC 9112 9.3.2 allows.
    guard cds_http_close_after_transaction(wsi.raw) == 0 else { return -1 }
    let server = server(of: wsi)
    let api =
      methodAndPath(wsi).map({ isAPIPath($0.1) || isQRCodePost($0) }) == true
      && lws_get_vhost(wsi.raw).map(Vhost.init) != server.metricsVhost
    // Non-zero makes lws close the connection once the answer is written.
    func refuse(_ refusal: APIRefusal) -> Int32 {
      api
        ? perform(wsi, .write(APIResponse(refusal).bytes(extra: server.apiHeaders(nil))))
        : respond(
          wsi, status: refusal.status,
          headers: refusal.headers.map { "\($0.0): \($0.1)\r\n" }.joined())
    }
    // A decoded NUL ("%00") would make lws cut the path short and serve
    // something else than was asked for.
    if let input, strnlen(input.assumingMemoryBound(to: CChar.self), length) != length {
      return refuse(.badQuery("the path has a NUL byte"))
    }
    // RFC 9112 6.3: a length beside a transfer coding is how a request is
    // smuggled past a proxy that frames it the other way; lws would frame
    // it by the length.
    if lws_hdr_total_length(wsi.raw, WSI_TOKEN_HTTP_TRANSFER_ENCODING) > 0,
      lws_hdr_total_length(wsi.raw, WSI_TOKEN_HTTP_CONTENT_LENGTH) > 0
    {
      return refuse(.badHeader("Transfer-Encoding and Content-Length may not come together"))
    }
    // The API routes every method itself. Everything else is read-only: lws
    // would otherwise serve a file for a POST. The one exception is the
    // origin check, a POST without a body, since that is what makes a
    // browser send its Origin.
    guard
      api || lws_hdr_total_length(wsi.raw, WSI_TOKEN_GET_URI) > 0
        || lws_hdr_total_length(wsi.raw, WSI_TOKEN_HEAD_URI) > 0 || isOriginCheck(wsi)
    else {
      return refuse(.methodNotAllowed(allow: "GET, HEAD"))
    }
    return 0

  case LWS_CALLBACK_HTTP:
    // `input` is the path below an endpoint's mount, or a path no mount or
    // file matched: only the mount itself exists.
    let rest = input.map { String(cString: $0.assumingMemoryBound(to: CChar.self)) } ?? ""
    let server = server(of: wsi)
    if let (method, path) = methodAndPath(wsi), isAPIPath(path) || isQRCodePost((method, path)),
      lws_get_vhost(wsi.raw).map(Vhost.init) != server.metricsVhost
    {
      return beginAPI(wsi, method: method, path: path)
    }
    let path =
      (try? header(wsi, WSI_TOKEN_GET_URI, "path") ?? header(wsi, WSI_TOKEN_HEAD_URI, "path")
        ?? header(wsi, WSI_TOKEN_POST_URI, "path")) ?? nil
    if path == CountdownServer.originCheckPath,
      lws_get_vhost(wsi.raw).map(Vhost.init) != server.metricsVhost
    {
      // Answered at once and closed: after a POST lws ends the transaction
      // itself, before a WRITEABLE could carry the body.
      let answer = server.originCheck(
        origin: Result { () throws(HeaderError) in try header(wsi, WSI_TOKEN_ORIGIN, "origin") },
        host: try? header(wsi, WSI_TOKEN_HOST, "host"))
      return respond(wsi, status: answer.status, answer: answer)
    }
    // Any other POST is not ours; it is answered at once for the same
    // reason, since a body written later would never leave.
    if lws_hdr_total_length(wsi.raw, WSI_TOKEN_POST_URI) > 0 { return respond(wsi, status: 404) }
    // An endpoint's argument that cannot be read is as good as absent: the
    // endpoint answers 400 for a missing one.
    let found =
      rest.isEmpty || rest == "/"
      ? server.answer(
        path ?? "",
        argument: { name in
          (try? urlArguments(wsi, as: HeaderError.utf8Text)).flatMap {
            try? urlArgument(name, in: $0)
          }
        }, peer: { (try? clientPeer(wsi).0) ?? peerAddress(wsi) }) : nil
    guard let answer = found ?? server.notFoundAnswer else {
      lws_return_http_status(wsi.raw, UInt32(HTTP_STATUS_NOT_FOUND.rawValue), nil)
      return lws_http_transaction_completed(wsi.raw) != 0 ? -1 : 0
    }
    setTag(wsi, SocketTag.httpBody)
    server.httpBodies[wsi] = answer.body
    return writeHeaders(
      wsi, status: answer.status, type: answer.type, length: answer.body.count,
      cacheControl: answer.cacheControl, retryAfter: answer.retryAfter) ? 0 : -1

  case LWS_CALLBACK_HTTP_BODY:
    guard tag(wsi) == SocketTag.api else { break }
    let chunk = UnsafeRawBufferPointer(start: input, count: length)
    return server(of: wsi).apiBody(wsi, chunk).map { perform(wsi, $0) } ?? 0

  case LWS_CALLBACK_HTTP_BODY_COMPLETION:
    guard tag(wsi) == SocketTag.api else { break }
    return perform(wsi, server(of: wsi).apiBodyComplete(wsi))

  case LWS_CALLBACK_HTTP_WRITEABLE:
    if tag(wsi) == SocketTag.api, let bytes = server(of: wsi).apiWritable(wsi) {
      return perform(wsi, .write(bytes))
    }
    if tag(wsi) > 0 {
      // An event stream: anything but keeping it open ends the connection.
      let outcome = server(of: wsi).writable(wsi, connection: tag(wsi) - 1)
      return outcome == .keepOpen ? 0 : -1
    }
    guard tag(wsi) == SocketTag.httpBody else { break }
    setTag(wsi, 0)
    let server = server(of: wsi)
    let body = server.httpBodies.removeValue(forKey: wsi) ?? []
    guard server.send(body, to: wsi, as: LWS_WRITE_HTTP_FINAL) else { return -1 }
    return lws_http_transaction_completed(wsi.raw) != 0 ? -1 : 0

  // A request lws's parser gave up on, handed over raw (UnparsedRequest):
  // its first read decides the answer, and the answer ends the connection.
  case LWS_CALLBACK_RAW_ADOPT:
    return 0

  case LWS_CALLBACK_RAW_RX:
    guard tag(wsi) == 0, let input else { return 0 }
    let server = server(of: wsi)
    let request = UnparsedRequest(UnsafeRawBufferPointer(start: input, count: length))
    server.httpBodies[wsi] =
      request.api
      ? APIResponse(status: request.status, body: WireCodec.error(request.error)).bytes(
        extra: server.apiHeaders(nil))
      : plainResponse(status: request.status)
    setTag(wsi, SocketTag.httpBody)
    lws_callback_on_writable(wsi.raw)
    return 0

  case LWS_CALLBACK_RAW_WRITEABLE:
    guard tag(wsi) == SocketTag.httpBody else { return -1 }
    setTag(wsi, 0)
    let server = server(of: wsi)
    _ = server.send(server.httpBodies.removeValue(forKey: wsi) ?? [], to: wsi, as: LWS_WRITE_HTTP)
    return -1

  case LWS_CALLBACK_RAW_CLOSE:
    if tag(wsi) == SocketTag.httpBody { server(of: wsi).httpBodies[wsi] = nil }
    setTag(wsi, 0)
    return 0

  case LWS_CALLBACK_CLOSED_HTTP:
    if tag(wsi) == SocketTag.httpBody { server(of: wsi).httpBodies[wsi] = nil }
    if tag(wsi) == SocketTag.api { server(of: wsi).apiClosed(wsi) }
    if tag(wsi) > 0 {
      server(of: wsi).closed(tag(wsi) - 1)
      setTag(wsi, 0)
    }

  default:
    break
  }
  return lws_callback_http_dummy(wsi.raw, reason, user, input, length)
}

/// An event stream: admitted and joined, its headers written, and the HTTP
/// transaction left open for as long as the client stays. What
/// LWS_CALLBACK_HTTP returns for `GET /api/v1/sessions/{id}/events`: the one
/// call an HTTP router makes for that route.
func openEventStream(_ wsi: Wsi) -> Int32 {
  let server = server(of: wsi)
  let request: UpgradeRequest
  do throws(HeaderError) {
    request = try readRequest(of: wsi, transport: .eventStream)
  } catch {
    server.unreadable(error, peer: peerAddress(wsi))
    return respond(wsi, status: error.cause.status)
  }
  switch server.openEventStream(wsi, request) {
  case .refused(let status, let headers, let answer):
    return respond(wsi, status: status, headers: headers, answer: answer)
  case .opened(let id):
    // From here CLOSED_HTTP releases the viewer, whatever happens next.
    setTag(wsi, id + 1)
    let pre = cds_lws_pre()
    // Room for the security headers and an echoed Origin of up to
    // `headerByteCap` bytes (any origin passes with `--allow-origin '*'`).
    var buffer = [UInt8](repeating: 0, count: pre + 1024 + headerByteCap)
    let written = buffer.withUnsafeMutableBufferPointer { memory in
      let start = memory.baseAddress! + pre
      let end = memory.baseAddress! + memory.count - 1
      var cursor: UnsafeMutablePointer<UInt8>? = start
      // No length: the body is the stream, until either side closes. The
      // vhost's headers already say `connection: close`.
      guard
        lws_add_http_header_status(wsi.raw, 200, &cursor, end) == 0,
        addHeader(wsi, "content-type:", "text/event-stream", &cursor, end)
      else { return false }
      for (name, value) in server.eventStreamHeaders(origin: request.origin) {
        guard addHeader(wsi, name, value, &cursor, end) else { return false }
      }
      return lws_finalize_write_http_header(wsi.raw, start, &cursor, end) == 0
    }
    guard written else { return -1 }
    // What lws_http_mark_sse does, without its h2 step, which lws 4.1.6
    // logs as an error on every HTTP/1 stream: the request's headers (4 KiB)
    // go back to lws's pool, and no lws timeout ends the transaction.
    lws_http_headers_detach(wsi.raw)
    lws_set_timeout(wsi.raw, NO_PENDING_TIMEOUT, 0)
    return 0
  }
}

private func writeHeaders(
  _ wsi: Wsi, status: UInt32, type: String, length: Int, cacheControl: String? = nil,
  retryAfter: Int? = nil
) -> Bool {
  let pre = cds_lws_pre()
  var buffer = [UInt8](repeating: 0, count: pre + 1024)
  return buffer.withUnsafeMutableBufferPointer { memory in
    let start = memory.baseAddress! + pre
    let end = memory.baseAddress! + memory.count - 1
    var cursor: UnsafeMutablePointer<UInt8>? = start
    guard
      lws_add_http_common_headers(
        wsi.raw, status, type, lws_filepos_t(length), &cursor, end) == 0,
      addHeader(wsi, "cache-control:", cacheControl, &cursor, end),
      addHeader(wsi, "retry-after:", retryAfter.map(String.init), &cursor, end),
      lws_finalize_write_http_header(wsi.raw, start, &cursor, end) == 0
    else { return false }
    lws_callback_on_writable(wsi.raw)
    return true
  }
}

/// Adds `name: value` when there is a value; false when it does not fit.
private func addHeader(
  _ wsi: Wsi, _ name: String, _ value: String?,
  _ cursor: inout UnsafeMutablePointer<UInt8>?, _ end: UnsafeMutablePointer<UInt8>
) -> Bool {
  guard let value else { return true }
  var bytes = Array(value.utf8)
  return lws_add_http_header_by_name(wsi.raw, name, &bytes, Int32(bytes.count), &cursor, end) == 0
}

// MARK: libwebsockets' own log lines

/// Sends lws's log lines through the server's logger, at the mapped level,
/// with lws enabling only the levels the logger would print. lws's notices
/// are routine (one for each HTTP answer that took two writes), so they map
/// to debug with its info lines.
func routeLibraryLog(to logger: Logger) {
  let mask: Int32 =
    switch logger.level {
    case .error: LLL_ERR
    case .warn: LLL_ERR | LLL_WARN
    case .info: LLL_ERR | LLL_WARN
    case .debug: (1 << LLL_COUNT) - 1
    }
  lws_set_log_level(mask, emitLibraryLine)
}

private func emitLibraryLine(_ level: Int32, _ line: UnsafePointer<CChar>?) {
  guard let line else { return }
  var text = String(cString: line)
  while text.last?.isNewline == true { text.removeLast() }
  let mapped: LogLevel =
    switch level {
    case LLL_ERR: .error
    case LLL_WARN: .warn
    default: .debug
    }
  Logger.shared.log(mapped, "lws", fields: [("msg", .string(text))])
}
