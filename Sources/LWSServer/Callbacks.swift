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
}

private func server(of wsi: OpaquePointer) -> CountdownServer {
  Unmanaged<CountdownServer>.fromOpaque(lws_context_user(lws_get_context(wsi))!)
    .takeUnretainedValue()
}

private func tag(_ wsi: OpaquePointer) -> Int32 {
  Int32(truncatingIfNeeded: Int(bitPattern: lws_get_opaque_user_data(wsi)))
}

private func setTag(_ wsi: OpaquePointer, _ value: Int32) {
  lws_set_opaque_user_data(wsi, UnsafeMutableRawPointer(bitPattern: Int(value)))
}

private func header(_ wsi: OpaquePointer, _ token: lws_token_indexes, limit: Int = 256) -> String? {
  var buffer = [CChar](repeating: 0, count: limit)
  let length = lws_hdr_copy(wsi, &buffer, Int32(buffer.count), token)
  guard length > 0 else { return nil }
  return String(decoding: buffer[0..<Int(length)].map { UInt8(bitPattern: $0) }, as: UTF8.self)
}

/// Room for any query argument an endpoint reads: lws holds a whole request's
/// headers in 4 KiB, so a longer one cannot arrive.
private let maxQueryArgument = 4096 + 16

private func urlArgument(_ wsi: OpaquePointer, _ name: String, limit: Int = 160) -> String? {
  var buffer = [CChar](repeating: 0, count: limit)
  // lws copies "name=value" into the buffer and points just past the "=".
  guard let value = lws_get_urlarg_by_name(wsi, name + "=", &buffer, Int32(buffer.count)) else {
    return nil
  }
  return String(cString: value)
}

private func peerAddress(_ wsi: OpaquePointer) -> String {
  var buffer = [CChar](repeating: 0, count: 64)
  guard lws_get_peer_simple(wsi, &buffer, buffer.count) != nil else { return "?" }
  let bytes = buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }
  return String(decoding: bytes, as: UTF8.self)
}

private func request(of wsi: OpaquePointer) -> UpgradeRequest {
  UpgradeRequest(
    path: header(wsi, WSI_TOKEN_GET_URI) ?? "", origin: header(wsi, WSI_TOKEN_ORIGIN),
    host: header(wsi, WSI_TOKEN_HOST), peer: peerAddress(wsi),
    version: header(wsi, WSI_TOKEN_VERSION), key: header(wsi, WSI_TOKEN_KEY))
}

private func close(_ wsi: OpaquePointer, code: CloseCode, reason: String) -> Int32 {
  server(of: wsi).closing(wsi, code: code, reason: reason)
  var bytes = Array(reason.utf8.prefix(120))
  lws_close_reason(wsi, lws_close_status(UInt32(code.rawValue)), &bytes, bytes.count)
  return -1
}

private func finish(_ wsi: OpaquePointer, _ outcome: WriteOutcome) -> Int32 {
  switch outcome {
  case .keepOpen: 0
  case .close(let code, let reason): close(wsi, code: code, reason: reason)
  case .fail: -1
  }
}

/// The countdown.v1 WebSocket protocol (and, as the vhost default, plain HTTP).
func countdownCallback(
  _ wsi: OpaquePointer?, _ reason: lws_callback_reasons, _ user: UnsafeMutableRawPointer?,
  _ input: UnsafeMutableRawPointer?, _ length: Int
) -> Int32 {
  guard let wsi else { return 0 }
  switch reason {
  case LWS_CALLBACK_ESTABLISHED:
    let server = server(of: wsi)
    let request = request(of: wsi)
    switch server.admit(request) {
    case .countdown(let session):
      if let id = server.opened(
        wsi, session: session, key: urlArgument(wsi, "key"),
        since: urlArgument(wsi, "since").flatMap { UInt64($0) }, peer: request.peer)
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
    let binary = lws_frame_is_binary(wsi) != 0
    let isLast = lws_is_final_fragment(wsi) != 0 && lws_remaining_packet_payload(wsi) == 0
    let outcome: ChunkOutcome
    switch tag(wsi) {
    case SocketTag.echo:
      outcome = server.echoReceived(
        wsi, chunk, binary: binary, isFirst: lws_is_first_fragment(wsi) != 0, isLast: isLast)
    case let value where value > 0:
      if binary {
        return close(wsi, code: .unsupportedData, reason: "binary frames are not accepted")
      }
      outcome = server.received(
        chunk, from: value - 1, announcedRemaining: lws_remaining_packet_payload(wsi),
        isLast: isLast)
    default:
      return 0  // a refused join: ignore what it says while it is being closed
    }
    if case .close(let code, let text) = outcome { return close(wsi, code: code, reason: text) }

  case LWS_CALLBACK_SERVER_WRITEABLE:
    // lws 4.1.6 still offers WRITEABLE after it queued its own Close (for a
    // protocol error) while it waits for the reply; RFC 6455 allows no data
    // after a Close, so write nothing once one is pending.
    if lws_get_close_length(wsi) != 0 { return 0 }
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
    if tag(wsi) != 0 { server.countClosed(wsi, lwsSentClose: lws_get_close_length(wsi) != 0) }
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
    return httpCallback(wsi, reason, user, input, length)
  }
  return 0
}

/// Refuses an upgrade with an HTTP status before any WebSocket exists.
private func confirmUpgrade(_ wsi: OpaquePointer) -> Int32 {
  let server = server(of: wsi)
  if let metrics = server.metricsVhost, lws_get_vhost(wsi) == metrics {
    return respond(wsi, status: 404)
  }
  let request = request(of: wsi)
  guard case .refuse(let cause) = server.admit(request) else { return 0 }
  server.refused(cause, request)
  // RFC 6455 4.4: name the version the server speaks.
  let headers = cause == .badVersion ? "sec-websocket-version: 13\r\n" : ""
  return respond(wsi, status: cause.status, headers: headers)
}

/// Answers with a short plain-text status and ends the transaction.
/// Written by hand: during an upgrade lws's own status helper answers
/// "HTTP/1.0", which WebSocket clients reject as a malformed response.
private func respond(_ wsi: OpaquePointer, status: UInt32, headers: String = "") -> Int32 {
  let reason = refusalReasons[status] ?? "Refused"
  let body = "\(status) \(reason)\n"
  let response = Array(
    ("HTTP/1.1 \(status) \(reason)\r\ncontent-type: text/plain\r\n\(securityHeaders)\(headers)"
      + "content-length: \(body.utf8.count)\r\nconnection: close\r\n\r\n\(body)").utf8)
  return server(of: wsi).send(response, to: wsi, as: LWS_WRITE_HTTP_FINAL) ? 1 : -1
}

/// The headers lws's security option adds to its own answers, for ours too.
private let securityHeaders =
  "content-security-policy: default-src 'none'\r\nx-content-type-options: nosniff\r\n"
  + "x-frame-options: deny\r\nreferrer-policy: no-referrer\r\n"

private let refusalReasons: [UInt32: String] = [
  400: "Bad Request", 403: "Forbidden", 404: "Not Found", 405: "Method Not Allowed",
  426: "Upgrade Required", 429: "Too Many Requests",
  503: "Service Unavailable",
]

/// Plain HTTP: lws serves the files itself; `/healthz` and misses reach us.
func httpCallback(
  _ wsi: OpaquePointer?, _ reason: lws_callback_reasons, _ user: UnsafeMutableRawPointer?,
  _ input: UnsafeMutableRawPointer?, _ length: Int
) -> Int32 {
  guard let wsi else { return 0 }
  switch reason {
  case LWS_CALLBACK_HTTP_CONFIRM_UPGRADE:
    return confirmUpgrade(wsi)

  case LWS_CALLBACK_FILTER_HTTP_CONNECTION:
    // A decoded NUL ("%00") would make lws cut the path short and serve
    // something else than was asked for.
    if let input, strnlen(input.assumingMemoryBound(to: CChar.self), length) != length {
      return respond(wsi, status: 400)
    }
    // Everything here is read-only: lws would otherwise serve a file for a POST.
    guard
      lws_hdr_total_length(wsi, WSI_TOKEN_GET_URI) > 0
        || lws_hdr_total_length(wsi, WSI_TOKEN_HEAD_URI) > 0
    else {
      // Non-zero makes lws close the connection once the answer is written.
      return respond(wsi, status: 405, headers: "allow: GET, HEAD\r\n")
    }
    return 0

  case LWS_CALLBACK_HTTP:
    // `input` is the path below an endpoint's mount, or a path no mount or
    // file matched: only the mount itself exists.
    let rest = input.map { String(cString: $0.assumingMemoryBound(to: CChar.self)) } ?? ""
    let found =
      rest.isEmpty || rest == "/"
      ? server(of: wsi).answer(
        header(wsi, WSI_TOKEN_GET_URI) ?? header(wsi, WSI_TOKEN_HEAD_URI) ?? "",
        argument: { urlArgument(wsi, $0, limit: maxQueryArgument) }) : nil
    guard let answer = found ?? server(of: wsi).notFoundAnswer else {
      lws_return_http_status(wsi, UInt32(HTTP_STATUS_NOT_FOUND.rawValue), nil)
      return lws_http_transaction_completed(wsi) != 0 ? -1 : 0
    }
    setTag(wsi, SocketTag.httpBody)
    server(of: wsi).httpBodies[wsi] = answer.body
    return writeHeaders(
      wsi, status: answer.status, type: answer.type, length: answer.body.count,
      cacheControl: answer.cacheControl) ? 0 : -1

  case LWS_CALLBACK_HTTP_WRITEABLE:
    guard tag(wsi) == SocketTag.httpBody else { break }
    setTag(wsi, 0)
    let server = server(of: wsi)
    let body = server.httpBodies.removeValue(forKey: wsi) ?? []
    guard server.send(body, to: wsi, as: LWS_WRITE_HTTP_FINAL) else { return -1 }
    return lws_http_transaction_completed(wsi) != 0 ? -1 : 0

  case LWS_CALLBACK_CLOSED_HTTP:
    if tag(wsi) == SocketTag.httpBody { server(of: wsi).httpBodies[wsi] = nil }

  default:
    break
  }
  return lws_callback_http_dummy(wsi, reason, user, input, length)
}

private func writeHeaders(
  _ wsi: OpaquePointer, status: UInt32, type: String, length: Int, cacheControl: String? = nil
) -> Bool {
  let pre = cds_lws_pre()
  var buffer = [UInt8](repeating: 0, count: pre + 1024)
  return buffer.withUnsafeMutableBufferPointer { memory in
    let start = memory.baseAddress! + pre
    let end = memory.baseAddress! + memory.count - 1
    var cursor: UnsafeMutablePointer<UInt8>? = start
    guard
      lws_add_http_common_headers(
        wsi, status, type, lws_filepos_t(length), &cursor, end) == 0,
      addHeader(wsi, "cache-control:", cacheControl, &cursor, end),
      lws_finalize_write_http_header(wsi, start, &cursor, end) == 0
    else { return false }
    lws_callback_on_writable(wsi)
    return true
  }
}

/// Adds `name: value` when there is a value; false when it does not fit.
private func addHeader(
  _ wsi: OpaquePointer, _ name: String, _ value: String?,
  _ cursor: inout UnsafeMutablePointer<UInt8>?, _ end: UnsafeMutablePointer<UInt8>
) -> Bool {
  guard let value else { return true }
  var bytes = Array(value.utf8)
  return lws_add_http_header_by_name(wsi, name, &bytes, Int32(bytes.count), &cursor, end) == 0
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
