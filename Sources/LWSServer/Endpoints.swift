import CountdownCore
import Observability

/// An HTTP answer the server writes itself.
struct HTTPAnswer {
  var status: UInt32
  var type: String
  var body: [UInt8]
}

extension CountdownServer {
  /// The answer for one of the server's own endpoints, or nil for a 404.
  /// Only mounted paths get here, so `/metrics` is answered only where the
  /// configuration mounted it.
  func answer(_ path: String) -> HTTPAnswer? {
    switch path {
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
