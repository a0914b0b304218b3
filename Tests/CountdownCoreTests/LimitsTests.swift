import Testing

@testable import CountdownCore

@Suite struct LimitsTests {
  let t0: Int64 = 1_700_000_000_000
  let ping = Array(#"{"op":"ping","t":1}"#.utf8)

  /// A burst past 20 commands a second gets rate_limited; the bucket refills with time.
  @Test func tokenBucketLimitsCommands() {
    let hub = Hub(config: HubConfig(commandsPerSecond: 20))
    var viewer = FakeViewer(id: hub.join("s", now: t0))
    for _ in 0..<25 { hub.receive(ping, from: viewer.id, now: t0) }
    viewer.read(from: hub, now: t0)
    #expect(viewer.messages.filter { $0["type"] as? String == "pong" }.count == 20)
    #expect(viewer.messages.filter { $0["code"] as? String == "rate_limited" }.count == 5)
    hub.receive(ping, from: viewer.id, now: t0 + 100)  // 2 tokens back after 100 ms
    viewer.read(from: hub, now: t0 + 100)
    #expect(viewer.messages.last?["type"] as? String == "pong")
  }

  /// A client that floods without pause for 5 s is told to close with 1008; others carry on.
  @Test func sustainedFloodCloses() {
    let hub = Hub(config: HubConfig(commandsPerSecond: 20))
    let flooder = hub.join("s", now: t0)
    var bystander = FakeViewer(id: hub.join("s", now: t0))
    var outcome = ReceiveOutcome.handled
    var now = t0
    while now < t0 + 6000, outcome == .handled {
      outcome = hub.receive(ping, from: flooder, now: now)
      now += 10  // 100 commands a second
    }
    #expect(outcome == .close(CloseDirective(.policyViolation, "too many commands")))
    // The first 20 commands (200 ms) are within the bucket; 5 s of refusals follow.
    #expect(now - t0 >= 5200 && now - t0 <= 5300)
    bystander.read(from: hub, now: now)
    hub.receive(ping, from: bystander.id, now: now)
    bystander.read(from: hub, now: now)
    #expect(bystander.last("pong") != nil)
  }

  /// Bursts separated by quiet seconds never add up to a flood.
  @Test func burstsAreNotAFlood() {
    let hub = Hub(config: HubConfig(commandsPerSecond: 20))
    let viewer = hub.join("s", now: t0)
    for second in 0..<10 {
      for _ in 0..<30 {
        #expect(hub.receive(ping, from: viewer, now: t0 + Int64(second) * 2000) == .handled)
      }
    }
  }

  /// Past --max-sessions a new session id is refused; existing sessions still take viewers.
  @Test func sessionCap() {
    let hub = Hub(config: HubConfig(maxSessions: 2))
    _ = hub.join("a", now: t0)
    _ = hub.join("b", now: t0)
    #expect(hub.connect(session: "c", peer: "192.0.2.1", now: t0) == .refused(.tooManySessions))
    #expect(hub.sessionCount == 2)
    let rejoined = hub.connect(session: "a", peer: "192.0.2.1", now: t0)
    if case .joined = rejoined {} else { Issue.record("refused") }
  }

  /// In open mode anyone controls and snapshots say nothing of roles.
  @Test func openControl() {
    let hub = Hub(config: HubConfig())
    var viewer = FakeViewer(id: hub.join("s", now: t0))
    hub.receive(Array(#"{"op":"start"}"#.utf8), from: viewer.id, now: t0)
    viewer.read(from: hub, now: t0)
    #expect(viewer.messages.first?["role"] == nil)
    #expect(viewer.last("ack") != nil)
  }

  /// In key mode the creator gets a 128-bit key; others need it, or get forbidden.
  @Test func keyControl() throws {
    let hub = Hub(config: HubConfig(control: .key))
    var creator = FakeViewer(id: hub.join("s", now: t0))
    creator.read(from: hub, now: t0)
    let key = try #require(creator.messages.first?["key"] as? String)
    #expect(key.count == 32)
    #expect(creator.messages.first?["role"] as? String == "controller")

    // One digit off (a key that starts with "0" must not be "guessed" by the test itself).
    let wrong = (key.first == "0" ? "1" : "0") + key.dropFirst()
    var stranger = FakeViewer(id: hub.join("s", key: wrong, now: t0))
    var holder = FakeViewer(id: hub.join("s", key: key, now: t0))
    stranger.read(from: hub, now: t0)
    holder.read(from: hub, now: t0)
    #expect(stranger.messages.first?["role"] as? String == "viewer")
    #expect(stranger.messages.first?["key"] == nil)
    hub.receive(Array(#"{"op":"start","id":1}"#.utf8), from: stranger.id, now: t0)
    stranger.read(from: hub, now: t0)
    #expect(stranger.last("error")?["code"] as? String == "forbidden")
    #expect(hub.state(of: "s")?.state.phase == .idle)
    hub.receive(Array(#"{"op":"start","id":2}"#.utf8), from: holder.id, now: t0)
    holder.read(from: hub, now: t0)
    #expect(holder.last("ack")?["id"] as? Int == 2)
  }

  /// Keys differ every time and compare equal only to themselves, whatever the length.
  @Test func keyComparison() {
    let a = ControllerKey.generate()
    let b = ControllerKey.generate()
    #expect(a != b)
    #expect(a.hex.count == 32)
    #expect(a.hex.allSatisfy { $0.isHexDigit && !$0.isUppercase })
    // Keys are compared through their hashes, as the hub and the stores keep them.
    let held = KeyHash(of: a.hex)
    #expect(held.matches(a.hex))
    #expect(!held.matches(b.hex))
    #expect(!held.matches(String(a.hex.dropLast())))
    #expect(!held.matches(a.hex + "0"))
    #expect(!held.matches(""))
    #expect(ControllerKey(bits: 0xAB).hex == String(repeating: "0", count: 30) + "ab")
  }
}
