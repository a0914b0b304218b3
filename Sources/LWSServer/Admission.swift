import CountdownCore
import Observability

/// What a WebSocket upgrade request is, decided before the handshake completes.
enum Admission: Equatable {
  case countdown(session: String)
  case echo
  /// Refuse with the HTTP status of this cause.
  case refuse(RefusalCause)
}

/// The facts of an upgrade request that admission depends on, read from lws.
struct UpgradeRequest {
  var path: String
  var origin: String?
  var host: String?
  var peer: String
  var version: String?
  var key: String?
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
  /// which may carry a controller key.
  func refused(_ cause: RefusalCause, _ request: UpgradeRequest) {
    network.refuse(cause)
    Logger.shared.info(
      "upgrade_refused",
      [
        "cause": LogValue(cause.rawValue), "status": LogValue(cause.status),
        "peer": LogValue(request.peer), "path": LogValue(request.path),
      ])
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

  /// The server's own origin is always allowed: the page it served, at the
  /// Host the browser used, when that Host is an IP address, `localhost` or
  /// the `--host` name. A domain name must be listed with `--allow-origin`,
  /// because a same-origin check on a name alone lets DNS rebinding through.
  /// Requests without Origin are not from a browser page and are allowed.
  func originAllowed(_ origin: String, host: String?) -> Bool {
    let origin = origin.lowercased()
    if let host = host?.lowercased(), origin == "http://\(host)" || origin == "https://\(host)",
      isLocalName(host)
    {
      return true
    }
    return config.allowedOrigins.contains { $0 == "*" || $0.lowercased() == origin }
  }

  /// A Host whose name cannot be a rebound DNS name.
  private func isLocalName(_ host: String) -> Bool {
    var name = Substring(host)
    if name.hasPrefix("[") {  // [v6]:port
      return name.contains("]")
    }
    if let colon = name.lastIndex(of: ":") { name = name[..<colon] }
    if name == "localhost" || name == config.host.lowercased() { return true }
    return !name.isEmpty && name.allSatisfy { $0.isNumber || $0 == "." }
  }
}
