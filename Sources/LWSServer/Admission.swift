import CountdownCore

/// What a request to open a viewer's connection is, decided before the
/// server answers it: a WebSocket upgrade or an event stream.
enum AdmissionDecision: Equatable {
  case countdown(session: String)
  case echo
  /// Refuse with the HTTP status of this cause.
  case refuse(RefusalCause)
}

/// Who may open a connection, and how many are open: the path, the Origin,
/// the total and per-address caps, and whether a drain has begun. A value,
/// so the rules read (and are tested) in one place; it knows nothing of
/// sockets. Every long-lived connection counts, whatever its transport
/// (WebSocket or event stream), so both share one budget.
struct Admission {
  var maxConnections: Int
  var maxPerAddress: Int
  var echoRoute: Bool
  let originPolicy: OriginPolicy
  /// Open connections of every kind.
  private(set) var open = 0
  private var peers = PeerCounts()
  /// Connections count against their client's budget, an IPv6 prefix.
  let budget: AddressBudget
  /// Set from SIGTERM on: new connections are refused.
  private(set) var draining = false

  init(config: ServerConfig) {
    maxConnections = config.maxConnections
    maxPerAddress = config.maxConnectionsPerIP
    echoRoute = config.echoRoute
    budget = AddressBudget(ipv6Prefix: config.ipv6Prefix)
    originPolicy = OriginPolicy(allowed: config.allowedOrigins, listenHost: config.host)
  }

  /// Decides a request: its transport's own checks, draining, path, origin,
  /// then the caps.
  func decide(_ request: UpgradeRequest) -> AdmissionDecision {
    let target: AdmissionDecision
    switch request.transport {
    case .webSocket:
      // RFC 6455 4.2.1: lws 4.1.6 answers any version as 13, and takes any key.
      guard request.version?.trimmingPrefix(" ") == "13" else { return .refuse(.badVersion) }
      guard let key = request.key, Self.isWebSocketKey(key) else { return .refuse(.badKey) }
      if draining { return .refuse(.draining) }
      if echoRoute && request.path == "/echo" {
        target = .echo
      } else if let id = Self.session(in: request.path, prefix: "/ws/", suffix: "") {
        target = .countdown(session: id)
      } else {
        return .refuse(.badSessionID)
      }
    case .eventStream:
      if draining { return .refuse(.draining) }
      guard let id = Self.session(in: request.path, prefix: Self.eventsPrefix, suffix: "/events")
      else { return .refuse(.badSessionID) }
      target = .countdown(session: id)
    }
    if let origin = request.origin, !originPolicy.allows(origin: origin, host: request.host) {
      return .refuse(.origin)
    }
    if open >= maxConnections { return .refuse(.totalCap) }
    if count(of: request.peer) >= maxPerAddress { return .refuse(.perIP) }
    return target
  }

  /// A connection from `peer` opened: it counts until `released`.
  mutating func admitted(peer: String) -> PeerID {
    open += 1
    return peers.add(budget.key(peer))
  }

  mutating func released(_ peer: PeerID) {
    open -= 1
    peers.release(peer)
  }

  /// Open connections from `peer`'s budget (its IPv6 prefix).
  func count(of peer: String) -> Int { peers.count(of: budget.key(peer)) }

  mutating func beginDrain() { draining = true }

  /// A new `run`: a drain of the last one is over.
  mutating func restart() { draining = false }

  static let eventsPrefix = APIRequest.prefix + "/sessions/"

  /// The session id of `path` when it is `prefix` + a valid id + `suffix`.
  static func session(in path: String, prefix: String, suffix: String) -> String? {
    guard path.hasPrefix(prefix), path.hasSuffix(suffix),
      path.utf8.count >= prefix.utf8.count + suffix.utf8.count
    else { return nil }
    let id = String(path.dropFirst(prefix.count).dropLast(suffix.count))
    return SessionID.isValid(id) ? id : nil
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
}
