import CountdownCore

extension CountdownServer {
  /// The answer for one of the server's own endpoints, or nil for a 404.
  /// Only mounted paths get here, so `/metrics` is answered only where the
  /// configuration mounted it.
  /// `argument` reads a decoded query argument by name (nil when absent or
  /// longer than the request could hold); `peer` the client's address.
  func answer(
    _ path: String, argument: (String) -> String? = { _ in nil }, peer: () -> String = { "" }
  ) -> HTTPAnswer? {
    switch path {
    case QRCodeAnswers.path:
      return qrCodes.answer(
        argument("text").map { Array($0.utf8) }, shared: true, peer: admission.budget.key(peer()),
        now: clock.nowMilliseconds())
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
}
