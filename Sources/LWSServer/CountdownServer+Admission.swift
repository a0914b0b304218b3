import CountdownCore
import Observability

/// What a WebSocket upgrade request is, decided before the handshake completes.
enum Admission: Equatable {
  case countdown(session: String)
  case echo
  /// Refuse with the HTTP status of this cause.
  case refuse(RefusalCause)
}

extension CountdownServer {
  /// Decides an upgrade: path, origin, then the connection caps. Pure Swift,
  /// so the rules read in one place.
  func admit(_ request: UpgradeRequest) -> Admission {
    // RFC 6455 4.2.1: lws 4.1.6 answers any version as 13, and takes any key.
    guard request.version?.trimmingPrefix(" ") == "13" else { return .refuse(.badVersion) }
    guard let key = request.key, Self.isWebSocketKey(key) else { return .refuse(.badKey) }
    if draining { return .refuse(.draining) }
    let target: Admission
    if config.echoRoute && request.path == "/echo" {
      target = .echo
    } else if request.path.hasPrefix("/ws/"),
      case let id = String(request.path.dropFirst(4)), SessionID.isValid(id)
    {
      target = .countdown(session: id)
    } else {
      return .refuse(.badSessionID)
    }
    if let origin = request.origin, !originAllowed(origin, host: request.host) {
      return .refuse(.origin)
    }
    if openSockets >= config.maxConnections { return .refuse(.totalCap) }
    if peerCounts.count(of: request.peer) >= config.maxConnectionsPerIP {
      return .refuse(.perIP)
    }
    return target
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

  /// A Sec-WebSocket-Key is 16 bytes in base64: 22 digits, then "==".
  static func isWebSocketKey(_ key: String) -> Bool {
    let bytes = Array(key.utf8)
    guard bytes.count == 24, bytes[22] == UInt8(ascii: "="), bytes[23] == UInt8(ascii: "=")
    else { return false }
    return bytes[..<22].allSatisfy { byte in
      switch byte {
      case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
        UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "+"), UInt8(ascii: "/"):
        true
      default: false
      }
    }
  }

  /// Whether a page of `origin` may open a WebSocket; see `OriginPolicy`.
  func originAllowed(_ origin: String, host: String?) -> Bool {
    originPolicy.allows(origin: origin, host: host)
  }
}
