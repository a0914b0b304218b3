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
  /// The client's address: the TCP peer, or whom a trusted proxy forwarded for.
  var peer: String
  /// The TCP peer, when it is a trusted proxy that forwarded for `peer`.
  var via: String? = nil
  var version: String?
  /// Sec-WebSocket-Key.
  var key: String?
  /// The `key` URL argument: a controller key.
  var controllerKey: String? = nil
  /// The `since` URL argument: the last seq the client saw.
  var since: UInt64? = nil
}

/// A header that is there but cannot be read whole: the upgrade is refused,
/// so that an unreadable header is never taken for an absent one.
struct HeaderError: Error, Equatable {
  enum Problem: Equatable {
    case tooLong(Int)
    /// An lws call failed with this code.
    case library(code: Int32)
    /// Bytes outside printable ASCII: a NUL, a control character, or UTF-8
    /// where RFC 6454 and RFC 9110 call for ASCII.
    case notText
    case repeated
    case notANumber
  }

  var header: String
  var problem: Problem

  /// An origin the server cannot read is not one it allows (403); anything
  /// else is a malformed request (400).
  var cause: RefusalCause { header == "origin" ? .origin : .badHeader }

  /// `bytes` as text, when every byte is printable ASCII.
  static func text(_ bytes: [UInt8], header: String) throws(HeaderError) -> String {
    guard bytes.allSatisfy({ (0x20...0x7e).contains($0) }) else {
      throw HeaderError(header: header, problem: .notText)
    }
    return String(decoding: bytes, as: UTF8.self)
  }

  /// `bytes` as text, when they are UTF-8 with no control character: what an
  /// endpoint's argument (a QR code's text) may hold, once lws decoded it.
  static func utf8Text(_ bytes: [UInt8], header: String) throws(HeaderError) -> String {
    guard !bytes.contains(where: { $0 < 0x20 || $0 == 0x7f }),
      let text = String(validating: bytes, as: UTF8.self)
    else { throw HeaderError(header: header, problem: .notText) }
    return text
  }
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

/// At most one log line per interval; lines held back meanwhile are counted,
/// and the count goes out with the next line.
struct LogThrottle {
  let intervalMs: Int64
  private var lastAt: Int64?
  private var held = 0

  init(intervalMs: Int64 = 1000) { self.intervalMs = intervalMs }

  /// nil: hold this line back. Otherwise log it, with how many were held back.
  mutating func admit(now: Int64) -> Int? {
    if let lastAt, now - lastAt < intervalMs, now >= lastAt {
      held += 1
      return nil
    }
    lastAt = now
    defer { held = 0 }
    return held
  }
}

/// Which pages may open a WebSocket. Pure, so the rule reads, and is tested,
/// in one place.
///
/// The server's own origin is always allowed: an `Origin` whose host and port
/// are the request's `Host`. On a loopback `--host` that holds only when the
/// Host is an IP address, `localhost` or the `--host` name: a page on a
/// domain name that rebinds to 127.0.0.1 would otherwise pass for the
/// server's own, and a loopback server is often a developer's, reachable by
/// any page the browser opens. Elsewhere the name the page was served under
/// is the server's own. Others must be listed (`--allow-origin`; `*` is any).
/// Requests without `Origin` are not from a browser page and are allowed.
struct OriginPolicy: Sendable {
  /// Lowercased origins of `--allow-origin`.
  var allowed: [String]
  var listenHost: String
  var listenIsLoopback: Bool

  init(allowed: [String], listenHost: String) {
    self.allowed = allowed.map { $0.lowercased() }
    self.listenHost = listenHost.lowercased()
    listenIsLoopback = ServerConfig.isLoopback(listenHost)
  }

  func allows(origin: String, host: String?) -> Bool {
    let origin = origin.lowercased()
    if allowed.contains(where: { $0 == "*" || $0 == origin }) { return true }
    guard let host, let page = Origin(origin), let asked = Authority(host.lowercased()),
      page.authority.host == asked.host,
      (page.authority.port ?? page.defaultPort) == (asked.port ?? page.defaultPort)
    else { return false }
    return !listenIsLoopback || isLocalName(asked.host)
  }

  /// A host name that cannot be a rebound DNS name.
  private func isLocalName(_ name: String) -> Bool {
    name.hasPrefix("[") || name == "localhost" || name == listenHost
      || IPAddress(name) != nil
  }
}

/// `host[:port]`, as in a Host header or an origin: a bracketed IPv6
/// address or a name, and an optional decimal port.
struct Authority: Equatable {
  var host: String
  var port: Int?

  init?(_ text: some StringProtocol) {
    var name = Substring(text)
    var portText: Substring?
    if name.hasPrefix("[") {
      guard let close = name.firstIndex(of: "]") else { return nil }
      let rest = name[name.index(after: close)...]
      guard rest.isEmpty || rest.first == ":" else { return nil }
      guard IPAddress(name[name.index(after: name.startIndex)..<close]) != nil else { return nil }
      if !rest.isEmpty { portText = rest.dropFirst() }
      name = name[...close]
    } else if let colon = name.firstIndex(of: ":") {
      portText = name[name.index(after: colon)...]
      name = name[..<colon]
    }
    // RFC 3986 reg-name characters, without percent-encoding or userinfo.
    guard !name.isEmpty,
      name.hasPrefix("[")
        || name.utf8.allSatisfy({
          (0x61...0x7a).contains($0) || (0x41...0x5a).contains($0) || (0x30...0x39).contains($0)
            || $0 == UInt8(ascii: ".") || $0 == UInt8(ascii: "-") || $0 == UInt8(ascii: "_")
        })
    else { return nil }
    if let portText {
      guard (1...5).contains(portText.count),
        portText.utf8.allSatisfy({ (0x30...0x39).contains($0) }),
        let port = Int(portText), port <= 65_535
      else { return nil }
      self.port = port
    }
    host = String(name)
  }
}

/// A serialised origin (RFC 6454 6.1): `http` or `https`, `://`, an authority.
struct Origin: Equatable {
  var secure: Bool
  var authority: Authority

  init?(_ text: String) {
    let secure: Bool
    let rest: Substring
    if text.hasPrefix("http://") {
      (secure, rest) = (false, text.dropFirst(7))
    } else if text.hasPrefix("https://") {
      (secure, rest) = (true, text.dropFirst(8))
    } else {
      return nil
    }
    guard let authority = Authority(rest) else { return nil }
    self.secure = secure
    self.authority = authority
  }

  var defaultPort: Int { secure ? 443 : 80 }
}
