import CountdownCore
import Observability

extension CountdownServer {
  /// Decides a request to open a viewer's connection (see `Admission`).
  func admit(_ request: UpgradeRequest) -> AdmissionDecision {
    admission.decide(request)
  }

  /// Counts and logs a refused upgrade. The path is logged without its query,
  /// which may carry a controller key. A foreign origin is a page that will
  /// not work until an operator acts, so it is a warning, at most one a
  /// second: any page may provoke it.
  func refused(_ cause: RefusalCause, _ request: UpgradeRequest) {
    network.refuse(cause)
    var fields: [(String, LogValue)] = [
      ("cause", LogValue(cause.rawValue)), ("status", LogValue(cause.status)),
      ("peer", LogValue(request.peer)),
    ]
    if let via = request.via { fields.append(("via", LogValue(via))) }
    fields.append(("path", LogValue(request.path)))
    guard cause == .origin else { return Logger.shared.info("upgrade_refused", fields: fields) }
    guard let suppressed = originLogThrottle.admit(now: clock.nowMilliseconds()) else { return }
    let origin = request.origin.map { String($0.prefix(Self.loggedOriginLength)) } ?? ""
    fields += [
      ("origin", LogValue(origin)),
      ("host", LogValue(String((request.host ?? "").prefix(Self.loggedOriginLength)))),
      ("hint", LogValue("to allow it, start the server with --allow-origin \(origin)")),
      ("suppressed", LogValue(suppressed)),
    ]
    Logger.shared.log(.warn, "upgrade_refused", fields: fields)
  }

  /// A join the hub refused just after admission (`too_many_sessions`).
  func refusedByHub(_ code: ErrorCode, peer: String) {
    network.refuse(.sessionCap)
    Logger.shared.info(
      "upgrade_refused",
      [
        "cause": LogValue(RefusalCause.sessionCap.rawValue), "code": LogValue(code.rawValue),
        "peer": LogValue(peer),
      ])
  }

  /// Origins and hosts are logged (and echoed by the origin check) this far:
  /// any page may send 2 KB of one, while the longest real one, a 253-byte
  /// DNS name with its scheme and port, fits.
  static let loggedOriginLength = 300

  /// A request whose headers could not be read whole, refused before admission.
  func unreadable(_ error: HeaderError, peer: String) {
    network.refuse(error.cause)
    guard let suppressed = headerLogThrottle.admit(now: clock.nowMilliseconds()) else { return }
    Logger.shared.log(
      .warn, "upgrade_refused",
      fields: [
        ("cause", LogValue(error.cause.rawValue)), ("status", LogValue(error.cause.status)),
        ("peer", LogValue(peer)), ("header", LogValue(error.header)),
        ("problem", LogValue(String(describing: error.problem))),
        ("suppressed", LogValue(suppressed)),
      ])
  }

  /// A trusted proxy's X-Forwarded-For held something that is not an
  /// address: the connection counts as the proxy's own.
  func malformedForwardedFor(peer: String) {
    guard let suppressed = forwardedLogThrottle.admit(now: clock.nowMilliseconds()) else { return }
    Logger.shared.warn(
      "forwarded_for_malformed", ["peer": LogValue(peer), "suppressed": LogValue(suppressed)])
  }

  /// Whether a page of `origin` may open a WebSocket; see `OriginPolicy`.
  func originAllowed(_ origin: String, host: String?) -> Bool {
    admission.originPolicy.allows(origin: origin, host: host)
  }
}
