import CountdownCore
import Observability
import QRCode

/// An HTTP answer the server writes itself.
struct HTTPAnswer {
  var status: UInt32
  var type: String
  var body: [UInt8]
  /// Sent as `cache-control` when set.
  var cacheControl: String? = nil
}

extension CountdownServer {
  /// The answer for one of the server's own endpoints, or nil for a 404.
  /// Only mounted paths get here, so `/metrics` is answered only where the
  /// configuration mounted it.
  /// `argument` reads a decoded query argument by name (nil when absent or
  /// longer than the request could hold).
  func answer(_ path: String, argument: (String) -> String? = { _ in nil }) -> HTTPAnswer? {
    switch path {
    case "/qr.svg":
      return qrCodes.answer(argument("text"))
    case "/healthz":
      return HTTPAnswer(status: 200, type: "application/json", body: Self.healthBody)
    case "/readyz":
      let waiting = unmetReadiness()
      if waiting.isEmpty {
        return HTTPAnswer(status: 200, type: "application/json", body: Self.readyBody)
      }
      let names = waiting.map { "\"\($0)\"" }.joined(separator: ",")
      let body = #"{"status":"not_ready","waiting":["# + names + "]}"
      return HTTPAnswer(status: 503, type: "application/json", body: Array(body.utf8))
    case "/metrics":
      return HTTPAnswer(
        status: 200, type: "text/plain; version=0.0.4; charset=utf-8", body: metrics.render())
    default:
      return nil
    }
  }

  /// Where a page asks whether its origin may open a WebSocket. A browser
  /// tells a page nothing about a refused upgrade, so a page that cannot
  /// connect asks here, by POST (a browser sends Origin on every POST), and
  /// can then say what the operator must do.
  static let originCheckPath = "/origin-check"

  /// `{"allowed":…,"origin":…,"hint":…}` for the request's Origin and Host.
  func originCheck(origin: Result<String?, HeaderError>, host: String?) -> HTTPAnswer {
    var json = JSONWriter()
    json.raw("{\"allowed\":")
    switch origin {
    case .success(let origin?):
      let allowed = originAllowed(origin, host: host)
      json.bool(allowed)
      json.raw(",\"origin\":")
      json.string(String(origin.prefix(Self.loggedOriginLength)))
      if !allowed {
        json.raw(",\"hint\":")
        json.string(
          "start the server with --allow-origin \(origin.prefix(Self.loggedOriginLength))")
      }
    case .success(nil):
      json.bool(true)
      json.raw(",\"origin\":null")
    case .failure:
      json.bool(false)
      json.raw(",\"origin\":null,\"hint\":\"the Origin header could not be read\"")
    }
    json.raw("}")
    return HTTPAnswer(status: 200, type: "application/json", body: json.bytes)
  }

  /// A path that is neither a file nor an endpoint: the page's own "not
  /// found" page (both languages, the page's style, the same CSP as every
  /// answer), or lws's bare one when the directory has no 404.html.
  var notFoundAnswer: HTTPAnswer? {
    notFoundPage.map { HTTPAnswer(status: 404, type: "text/html; charset=utf-8", body: $0) }
  }

  private static let healthBody = Array(#"{"status":"ok"}"#.utf8)
  private static let readyBody = Array(#"{"status":"ready"}"#.utf8)

  // MARK: Close codes, for countdown_connections_closed_total

  /// The server is closing `wsi` with `code`; the first code on a connection counts.
  func closing(_ wsi: OpaquePointer, code: CloseCode, reason: String) {
    guard closeCodes[wsi] == nil else { return }
    closeCodes[wsi] = NetworkStats.label(forCode: code.rawValue)
    switch code {
    case .policyViolation:
      Logger.shared.warn(
        "flood_closed", ["code": LogValue(code.rawValue), "reason": LogValue(reason)])
    case .goingAway: break
    default:
      Logger.shared.info(
        "connection_closed", ["code": LogValue(code.rawValue), "reason": LogValue(reason)])
    }
  }

  func peerClosing(_ wsi: OpaquePointer, code: UInt16) {
    if closeCodes[wsi] == nil { closeCodes[wsi] = NetworkStats.label(forCode: code) }
  }

  func countClosed(_ wsi: OpaquePointer, lwsSentClose: Bool) {
    let code = closeCodes.removeValue(forKey: wsi) ?? (lwsSentClose ? "unknown" : "1006")
    network.closed[code, default: 0] += 1
  }
}

/// The Share panel's QR codes (GET /qr.svg?text=…). A code takes a few
/// milliseconds of the service thread to draw, and a page asks for the same
/// one or two links again and again (each viewer's Share panel, each reload),
/// so the last few are kept. The image depends on the text alone, so
/// browsers and proxies may keep it too.
struct QRCodeAnswers {
  private var recent: [(text: String, answer: HTTPAnswer)] = []
  static let kept = 32

  mutating func answer(_ text: String?) -> HTTPAnswer {
    guard let text else { return Self.refusal }
    if let hit = recent.firstIndex(where: { $0.text == text }) { return recent[hit].answer }
    guard let svg = QRCode.svg(for: Array(text.utf8)) else { return Self.refusal }
    let answer = HTTPAnswer(
      status: 200, type: "image/svg+xml", body: svg,
      cacheControl: "public, max-age=86400, immutable")
    if recent.count == Self.kept { recent.removeFirst() }
    recent.append((text, answer))
    return answer
  }

  private static let refusal = HTTPAnswer(
    status: 400, type: "text/plain; charset=utf-8",
    body: Array("400 Bad Request: text must be 1 to \(QRCode.maxTextBytes) bytes\n".utf8))
}
