import Testing

@testable import LWSServer

@Suite struct AdmissionTests {
  static let key = "dGhlIHNhbXBsZSBub25jZQ=="

  func admission(max: Int = 3, perAddress: Int = 2, echo: Bool = false) -> Admission {
    var config = ServerConfig()
    config.maxConnections = max
    config.maxConnectionsPerIP = perAddress
    config.echoRoute = echo
    config.allowedOrigins = ["https://allowed.test"]
    return Admission(config: config)
  }

  func upgrade(_ path: String, peer: String = "10.0.0.1", origin: String? = nil) -> UpgradeRequest {
    UpgradeRequest(
      path: path, origin: origin, host: "127.0.0.1:8080", peer: peer, version: "13",
      key: Self.key)
  }

  func stream(_ path: String, peer: String = "10.0.0.1", origin: String? = nil) -> UpgradeRequest {
    UpgradeRequest(
      transport: .eventStream, path: path, origin: origin, host: "127.0.0.1:8080", peer: peer,
      version: nil, key: nil)
  }

  /// Both transports name a session the same way, and a bad id is refused
  /// (404) on either; the echo route exists only when configured.
  @Test func pathsOfBothTransports() {
    let open = admission()
    #expect(open.decide(upgrade("/ws/abc")) == .countdown(session: "abc"))
    #expect(open.decide(stream("/api/v1/sessions/abc/events")) == .countdown(session: "abc"))
    for bad in [
      "/api/v1/sessions//events", "/api/v1/sessions/a b/events", "/api/v1/sessions/abc",
      "/api/v1/sessions/events", "/api/v1/sessions/abc/events/", "/ws/abc",
      "/api/v1/sessions/" + String(repeating: "a", count: 4096) + "/events",
      "/api/v1/sessions/a\u{0}b/events",
    ] {
      #expect(open.decide(stream(bad)) == .refuse(.badSessionID), "\(bad.prefix(40))")
    }
    #expect(open.decide(upgrade("/ws/")) == .refuse(.badSessionID))
    #expect(open.decide(upgrade("/api/v1/sessions/abc/events")) == .refuse(.badSessionID))
    #expect(open.decide(upgrade("/echo")) == .refuse(.badSessionID))
    #expect(admission(echo: true).decide(upgrade("/echo")) == .echo)
    #expect(admission(echo: true).decide(stream("/echo")) == .refuse(.badSessionID))
  }

  /// The WebSocket's own checks (version, key) apply to it alone.
  @Test func handshakeChecksAreTheWebSocketsOnly() {
    let open = admission()
    var request = upgrade("/ws/abc")
    request.version = "8"
    #expect(open.decide(request) == .refuse(.badVersion))
    request.version = "13"
    for key in [nil, "", "short==", String(Self.key.dropLast()) + "x", "!" + Self.key.dropFirst()] {
      request.key = key
      #expect(open.decide(request) == .refuse(.badKey))
    }
    #expect(open.decide(stream("/api/v1/sessions/abc/events")) == .countdown(session: "abc"))
  }

  /// A foreign Origin is refused on both transports; a listed one and none pass.
  @Test func originOnBothTransports() {
    let open = admission()
    for request in [
      upgrade("/ws/abc", origin: "https://evil.test"),
      stream("/api/v1/sessions/abc/events", origin: "https://evil.test"),
    ] {
      #expect(open.decide(request) == .refuse(.origin))
    }
    #expect(
      open.decide(stream("/api/v1/sessions/abc/events", origin: "https://allowed.test"))
        == .countdown(session: "abc"))
    #expect(
      open.decide(stream("/api/v1/sessions/abc/events", origin: "http://127.0.0.1:8080"))
        == .countdown(session: "abc"))
  }

  /// Two addresses of one IPv6 /64 share one per-address budget; another
  /// /64 has its own, and so has a server told to count by /128.
  @Test func ipv6CountsByPrefix() {
    var budget = admission(max: 10, perAddress: 2)
    _ = budget.admitted(peer: "2001:db8:1:2::1")
    _ = budget.admitted(peer: "2001:db8:1:2:ffff:ffff:ffff:ffff")
    #expect(budget.count(of: "2001:db8:1:2::77") == 2)
    #expect(budget.decide(upgrade("/ws/abc", peer: "2001:db8:1:2::3")) == .refuse(.perIP))
    #expect(
      budget.decide(upgrade("/ws/abc", peer: "2001:db8:1:3::1")) == .countdown(session: "abc"))
    var config = ServerConfig()
    config.maxConnectionsPerIP = 1
    config.ipv6Prefix = 128
    var exact = Admission(config: config)
    _ = exact.admitted(peer: "2001:db8::1")
    #expect(exact.decide(upgrade("/ws/abc", peer: "2001:db8::2")) == .countdown(session: "abc"))
    #expect(exact.decide(upgrade("/ws/abc", peer: "2001:db8::1")) == .refuse(.perIP))
  }

  /// WebSockets and event streams share one budget, in all and per address,
  /// and a released connection gives its place back.
  @Test func oneBudgetForBothTransports() {
    var budget = admission(max: 3, perAddress: 2)
    let first = budget.admitted(peer: "10.0.0.1")
    _ = budget.admitted(peer: "10.0.0.1")
    #expect(budget.count(of: "10.0.0.1") == 2)
    #expect(budget.decide(stream("/api/v1/sessions/abc/events")) == .refuse(.perIP))
    #expect(budget.decide(upgrade("/ws/abc")) == .refuse(.perIP))
    #expect(budget.decide(upgrade("/ws/abc", peer: "10.0.0.2")) == .countdown(session: "abc"))
    _ = budget.admitted(peer: "10.0.0.2")
    #expect(budget.open == 3)
    #expect(
      budget.decide(stream("/api/v1/sessions/abc/events", peer: "10.0.0.3")) == .refuse(.totalCap))
    #expect(budget.decide(upgrade("/ws/abc", peer: "10.0.0.3")) == .refuse(.totalCap))
    budget.released(first)
    #expect(budget.open == 2 && budget.count(of: "10.0.0.1") == 1)
    #expect(budget.decide(stream("/api/v1/sessions/abc/events")) == .countdown(session: "abc"))
    #expect(RefusalCause.totalCap.status == 503 && RefusalCause.perIP.status == 429)
  }

  /// A drain refuses every new connection until the next run, even under the caps.
  @Test func drainRefusesBothUntilRestart() {
    var budget = admission()
    budget.beginDrain()
    #expect(budget.draining)
    #expect(budget.decide(upgrade("/ws/abc")) == .refuse(.draining))
    #expect(budget.decide(stream("/api/v1/sessions/abc/events")) == .refuse(.draining))
    budget.restart()
    #expect(budget.decide(stream("/api/v1/sessions/abc/events")) == .countdown(session: "abc"))
  }
}
