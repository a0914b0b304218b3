import CountdownCore

/// What a WebSocket upgrade request is, decided before the handshake completes.
enum Admission: Equatable {
  case countdown(session: String)
  case echo
  /// Refuse with this HTTP status.
  case refuse(status: UInt32)
}

/// The facts of an upgrade request that admission depends on, read from lws.
struct UpgradeRequest {
  var path: String
  var origin: String?
  var host: String?
  var peer: String
}

extension CountdownServer {
  /// Decides an upgrade: path, origin, then the connection caps. Pure Swift,
  /// so the rules read in one place.
  func admit(_ request: UpgradeRequest) -> Admission {
    let target: Admission
    if config.echoRoute && request.path == "/echo" {
      target = .echo
    } else if request.path.hasPrefix("/ws/"),
      case let id = String(request.path.dropFirst(4)), SessionID.isValid(id)
    {
      target = .countdown(session: id)
    } else {
      return .refuse(status: 404)
    }
    if let origin = request.origin, !originAllowed(origin, host: request.host) {
      return .refuse(status: 403)
    }
    if openSockets >= config.maxConnections { return .refuse(status: 503) }
    if connectionsByPeer[request.peer, default: 0] >= config.maxConnectionsPerIP {
      return .refuse(status: 429)
    }
    return target
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
