import CLibWebSockets
import CountdownCore

// The C entry points. Raw pointers end here: each callback recovers the
// server from the context, turns lws's arguments into Swift values, and
// calls one method of `CountdownServer`.

/// The per-connection memory lws allocates (zeroed): our ConnectionID + 1, so 0 means none.
private typealias ConnectionSlot = Int32

private func server(of wsi: OpaquePointer) -> CountdownServer {
  Unmanaged<CountdownServer>.fromOpaque(lws_context_user(lws_get_context(wsi))!)
    .takeUnretainedValue()
}

private func connection(in user: UnsafeMutableRawPointer?) -> ConnectionID? {
  guard let stored = user?.load(as: ConnectionSlot.self), stored > 0 else { return nil }
  return stored - 1
}

/// The session named by `/ws/<session>`, if the path is that and the id is valid.
private func sessionID(of wsi: OpaquePointer) -> String? {
  var buffer = [CChar](repeating: 0, count: 128)
  let length = lws_hdr_copy(wsi, &buffer, Int32(buffer.count), WSI_TOKEN_GET_URI)
  guard length > 0 else { return nil }
  let path = buffer[0..<Int(length)].map { UInt8(bitPattern: $0) }
  let prefix = Array("/ws/".utf8)
  guard path.starts(with: prefix) else { return nil }
  let id = path[prefix.count...]
  guard SessionID.isValid(id) else { return nil }
  return String(decoding: id, as: UTF8.self)
}

private func close(_ wsi: OpaquePointer, _ status: lws_close_status, _ reason: String) -> Int32 {
  var bytes = Array(reason.utf8)
  lws_close_reason(wsi, status, &bytes, bytes.count)
  return -1
}

/// The countdown.v1 WebSocket protocol.
func countdownCallback(
  _ wsi: OpaquePointer?, _ reason: lws_callback_reasons, _ user: UnsafeMutableRawPointer?,
  _ input: UnsafeMutableRawPointer?, _ length: Int
) -> Int32 {
  guard let wsi else { return 0 }
  switch reason {
  case LWS_CALLBACK_FILTER_PROTOCOL_CONNECTION:
    // Refuse a bad session id before the upgrade completes.
    return sessionID(of: wsi) == nil ? -1 : 0

  case LWS_CALLBACK_ESTABLISHED:
    guard let session = sessionID(of: wsi), let user else { return -1 }
    let id = server(of: wsi).opened(wsi, session: session)
    user.storeBytes(of: id + 1, as: ConnectionSlot.self)

  case LWS_CALLBACK_RECEIVE:
    guard let id = connection(in: user) else { return -1 }
    if lws_frame_is_binary(wsi) != 0 {
      return close(wsi, LWS_CLOSE_STATUS_UNACCEPTABLE_OPCODE, "binary frames are not accepted")
    }
    let chunk = UnsafeRawBufferPointer(start: input, count: length)
    let isLast = lws_is_final_fragment(wsi) != 0 && lws_remaining_packet_payload(wsi) == 0
    let outcome = server(of: wsi).received(
      chunk, from: id, announcedRemaining: lws_remaining_packet_payload(wsi), isLast: isLast)
    if outcome == .tooLarge {
      return close(wsi, LWS_CLOSE_STATUS_MESSAGE_TOO_LARGE, "message too large")
    }

  case LWS_CALLBACK_SERVER_WRITEABLE:
    guard let id = connection(in: user) else { return 0 }
    return server(of: wsi).writable(wsi, connection: id) ? 0 : -1

  case LWS_CALLBACK_CLOSED:
    guard let id = connection(in: user) else { return 0 }
    user?.storeBytes(of: 0, as: ConnectionSlot.self)
    server(of: wsi).closed(id)

  default:
    // Being the vhost's default protocol (so clients naming no subprotocol
    // reach us), we also receive every plain HTTP connection's events.
    return httpCallback(wsi, reason, user, input, length)
  }
  return 0
}

/// Plain HTTP: lws serves the files itself; only `/healthz` reaches us.
func httpCallback(
  _ wsi: OpaquePointer?, _ reason: lws_callback_reasons, _ user: UnsafeMutableRawPointer?,
  _ input: UnsafeMutableRawPointer?, _ length: Int
) -> Int32 {
  guard let wsi else { return 0 }
  switch reason {
  case LWS_CALLBACK_HTTP:
    // `input` is the path below the /healthz mount: only the mount itself exists.
    let rest = input.map { String(cString: $0.assumingMemoryBound(to: CChar.self)) } ?? ""
    guard rest.isEmpty || rest == "/" else {
      lws_return_http_status(wsi, UInt32(HTTP_STATUS_NOT_FOUND.rawValue), nil)
      return lws_http_transaction_completed(wsi) != 0 ? -1 : 0
    }
    user?.storeBytes(of: 1, as: ConnectionSlot.self)
    return writeHealthHeaders(wsi) ? 0 : -1

  case LWS_CALLBACK_HTTP_WRITEABLE:
    guard user?.load(as: ConnectionSlot.self) == 1 else { break }
    user?.storeBytes(of: 0, as: ConnectionSlot.self)
    var body = Array(healthBody)
    let pre = cds_lws_pre()
    var framed = [UInt8](repeating: 0, count: pre) + body
    let written = framed.withUnsafeMutableBufferPointer { buffer in
      lws_write(wsi, buffer.baseAddress! + pre, body.count, LWS_WRITE_HTTP_FINAL)
    }
    body.removeAll()
    guard written >= 0 else { return -1 }
    return lws_http_transaction_completed(wsi) != 0 ? -1 : 0

  default:
    break
  }
  return lws_callback_http_dummy(wsi, reason, user, input, length)
}

private let healthBody = #"{"status":"ok"}"#.utf8

private func writeHealthHeaders(_ wsi: OpaquePointer) -> Bool {
  let pre = cds_lws_pre()
  var buffer = [UInt8](repeating: 0, count: pre + 1024)
  return buffer.withUnsafeMutableBufferPointer { memory in
    let start = memory.baseAddress! + pre
    let end = memory.baseAddress! + memory.count - 1
    var cursor: UnsafeMutablePointer<UInt8>? = start
    guard
      lws_add_http_common_headers(
        wsi, UInt32(HTTP_STATUS_OK.rawValue), "application/json",
        lws_filepos_t(healthBody.count), &cursor, end) == 0,
      lws_finalize_write_http_header(wsi, start, &cursor, end) == 0
    else { return false }
    lws_callback_on_writable(wsi)
    return true
  }
}
