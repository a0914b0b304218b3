import Foundation
import Testing

@testable import CountdownCore

/// Commands and reads from HTTP requests: the hub's second entry to the one command path.
@Suite struct RequestTests {
  let t0: Int64 = 1_700_000_000_000

  func bytes(_ json: String) -> [UInt8] { Array(json.utf8) }

  func answers(_ hub: Hub) -> [(RequestID, RequestAnswer)] {
    var all: [(RequestID, RequestAnswer)] = []
    hub.drainAnswers { all.append(($0, $1)) }
    return all
  }

  func object(_ body: [UInt8]) -> [String: Any] {
    (try? JSONSerialization.jsonObject(with: Data(body))) as? [String: Any] ?? [:]
  }

  /// A request's start is applied, fanned out to the session's viewers, and acked with seq and state.
  @Test func commandReachesViewersAndIsAcked() {
    let hub = Hub(config: HubConfig())
    var viewer = FakeViewer(id: hub.join("s", now: t0))
    viewer.read(from: hub, now: t0)
    hub.command(
      bytes(#"{"op":"start","seconds":30}"#), session: "s", authority: .none, peer: "10.0.0.1",
      request: 7, now: t0)
    let ready = answers(hub)
    #expect(ready.count == 1)
    #expect(ready.first?.0 == 7)
    #expect(ready.first?.1.code == nil)
    let ack = object(ready.first!.1.body)
    #expect(ack["type"] as? String == "ack")
    #expect((ack["state"] as? [String: Any])?["phase"] as? String == "running")
    viewer.read(from: hub, now: t0)
    #expect(viewer.state["phase"] as? String == "running")
    #expect((ack["seq"] as? NSNumber)?.uint64Value == viewer.seq)
  }

  /// The answer waits for the sequencer (a store's commit), and is keyed by the request's id.
  @Test func answerWaitsForTheSequencer() {
    let sequencer = HeldSequencer()
    let hub = Hub(config: HubConfig(), sequencer: sequencer)
    hub.command(
      bytes(#"{"op":"start","seconds":30}"#), session: "s", authority: .none, peer: "a",
      request: 1, now: t0)
    #expect(answers(hub).isEmpty)
    sequencer.release(hub, now: t0 + 5)
    let ready = answers(hub)
    #expect(ready.map(\.0) == [1])
    #expect(ready.first?.1.code == nil)
  }

  /// Bad JSON, a refused op, and a ping answer with the WebSocket's error objects and codes.
  @Test func refusalsCarryTheWebSocketsCodes() {
    let hub = Hub(config: HubConfig())
    hub.command(bytes("{"), session: "s", authority: .none, peer: "a", request: 1, now: t0)
    hub.command(
      bytes(#"{"op":"start","seconds":9223372036854775808}"#), session: "s", authority: .none,
      peer: "a", request: 2, now: t0)
    hub.command(
      bytes(#"{"op":"ping","t":1}"#), session: "s", authority: .none, peer: "a", request: 3, now: t0
    )
    hub.command(
      bytes(#"{"op":"pause"}"#), session: "s", authority: .none, peer: "a", request: 4, now: t0)
    let codes = answers(hub).map { $0.1.code }
    #expect(codes == [.badJSON, .badRequest, .badRequest, .notRunning])
  }

  /// A read creates nothing; a session nobody opened reads as idle.
  @Test func readCreatesNothing() {
    let hub = Hub(config: HubConfig())
    #expect(hub.snapshot(of: "nobody", now: t0) == nil)
    let idle = object(hub.idleSnapshot(of: "nobody", now: t0))
    #expect((idle["state"] as? [String: Any])?["phase"] as? String == "idle")
    #expect(hub.sessionCount == 0)
    #expect(hub.sessionPage(after: nil, limit: 10).isEmpty)
  }

  /// A session a command created with nobody watching is forgotten when idle, as a viewer's is.
  @Test func commandedSessionIsForgottenWhenIdle() {
    var config = HubConfig()
    config.session.idleExpiryMs = 1000
    let hub = Hub(config: config)
    hub.command(
      bytes(#"{"op":"start","seconds":1}"#), session: "s", authority: .none, peer: "a",
      request: 1, now: t0)
    #expect(hub.sessionCount == 1)
    hub.advance(now: t0 + 1000)
    #expect(hub.state(of: "s")?.state.phase == .finished)
    hub.advance(now: t0 + 2000)
    #expect(hub.sessionCount == 0)
    #expect(hub.sessionPage(after: nil, limit: 10).isEmpty)
  }

  /// Past the server's session cap, a command on a new session gets too_many_sessions.
  @Test func sessionCapHolds() {
    let hub = Hub(config: HubConfig(maxSessions: 1))
    hub.command(
      bytes(#"{"op":"cancel"}"#), session: "a", authority: .none, peer: "p", request: 1, now: t0)
    hub.command(
      bytes(#"{"op":"cancel"}"#), session: "b", authority: .none, peer: "p", request: 2, now: t0)
    #expect(answers(hub).map { $0.1.code } == [.notRunning, .tooManySessions])
    #expect(hub.sessionCount == 1)
  }

  /// The rate limit counts per address across requests, and per token across addresses.
  @Test func rateLimitIsPerAddressAndPerToken() {
    let hub = Hub(config: HubConfig(commandsPerSecond: 2))
    for request in 1...3 {
      hub.command(
        bytes(#"{"op":"cancel"}"#), session: "s", authority: .none, peer: "a",
        request: RequestID(request), now: t0)
    }
    #expect(answers(hub).map { $0.1.code == .rateLimited } == [false, false, true])
    for (request, peer) in [(4, "b"), (5, "c"), (6, "d")] {
      hub.command(
        bytes(#"{"op":"cancel"}"#), session: "s", authority: .token(0), peer: peer,
        request: RequestID(request), now: t0)
    }
    #expect(answers(hub).map { $0.1.code == .rateLimited } == [false, false, true])
    // A second on, the bucket has refilled.
    hub.command(
      bytes(#"{"op":"cancel"}"#), session: "s", authority: .none, peer: "a", request: 7,
      now: t0 + 1000)
    #expect(answers(hub).map { $0.1.code == .rateLimited } == [false])
  }

  /// In key mode: no credential is refused at once and creates nothing; the
  /// session's key works as a bearer; a wrong key is refused at dispatch; a token works anywhere.
  @Test func keyModeAuthority() {
    let hub = Hub(config: HubConfig(control: .key))
    hub.command(
      bytes(#"{"op":"cancel"}"#), session: "s", authority: .none, peer: "a", request: 1, now: t0)
    #expect(answers(hub).map { $0.1.code } == [.forbidden])
    #expect(hub.sessionCount == 0)
    var host = FakeViewer(id: hub.join("s", now: t0))
    host.read(from: hub, now: t0)
    let key = host.last("snapshot")?["key"] as! String
    hub.command(
      bytes(#"{"op":"start","seconds":5}"#), session: "s", authority: .key(key), peer: "a",
      request: 2, now: t0)
    hub.command(
      bytes(#"{"op":"pause"}"#), session: "s",
      authority: .key((key.first == "0" ? "1" : "0") + key.dropFirst()), peer: "a",
      request: 3, now: t0)
    hub.command(
      bytes(#"{"op":"pause"}"#), session: "s", authority: .token(0), peer: "a", request: 4, now: t0)
    #expect(answers(hub).map { $0.1.code } == [nil, .forbidden, nil])
  }

  /// In key mode on one server, a key presented for a session that does not exist is refused
  /// and creates nothing, so the session's first visitor still becomes its controller.
  @Test func keyForAMissingSessionCreatesNothing() {
    let hub = Hub(config: HubConfig(control: .key))
    for junk in ["0123456789abcdef", String(repeating: "f", count: 32), "", "\u{0}"] {
      hub.command(
        bytes(#"{"op":"start","seconds":5}"#), session: "s", authority: .key(junk), peer: "a",
        request: 1, now: t0)
    }
    #expect(answers(hub).map { $0.1.code } == Array(repeating: .forbidden, count: 4))
    #expect(hub.sessionCount == 0)
    var visitor = FakeViewer(id: hub.join("s", now: t0))
    visitor.read(from: hub, now: t0)
    #expect(visitor.last("snapshot")?["role"] as? String == "controller")
  }

  /// Where the sequencer cannot tell (a cluster), a caller that read the
  /// cluster and found no session has the key refused the same way; a key
  /// for a session that may be held elsewhere goes on to the sequencer.
  @Test func keyForASessionTheClusterLacksCreatesNothing() {
    let sequencer = HeldSequencer()
    #expect(!sequencer.knowsEverySession)
    let hub = Hub(config: HubConfig(control: .key), sequencer: sequencer)
    hub.command(
      bytes(#"{"op":"start","seconds":5}"#), session: "s", authority: .key("k"), peer: "a",
      request: 1, existsNowhere: true, now: t0)
    #expect(answers(hub).map { $0.1.code } == [.forbidden])
    #expect(hub.sessionCount == 0 && sequencer.held.isEmpty)
    hub.command(
      bytes(#"{"op":"start","seconds":5}"#), session: "s", authority: .key("k"), peer: "a",
      request: 2, now: t0)
    #expect(hub.sessionCount == 1)
  }

  /// A token's command tells the sequencer so (a cluster's function skips its key check then).
  @Test func tokenFlagReachesTheSequencer() {
    let sequencer = HeldSequencer()
    let hub = Hub(config: HubConfig(control: .key), sequencer: sequencer)
    hub.command(
      bytes(#"{"op":"cancel"}"#), session: "s", authority: .token(0), peer: "a", request: 1, now: t0
    )
    #expect(sequencer.held.map(\.authorisedByToken) == [true])
    // A bearer that is not the session's key never reaches the sequencer.
    hub.command(
      bytes(#"{"op":"cancel"}"#), session: "s", authority: .key("k"), peer: "a", request: 2, now: t0
    )
    sequencer.release(hub, now: t0)
    #expect(sequencer.held.isEmpty)
    #expect(answers(hub).map { $0.1.code } == [.notRunning, .forbidden])
  }

  /// rotate_key over HTTP answers the new key, which then works as a bearer.
  @Test func rotateKeyAnswersTheNewKey() {
    let hub = Hub(config: HubConfig(control: .key))
    hub.command(
      bytes(#"{"op":"rotate_key"}"#), session: "s", authority: .token(0), peer: "a", request: 1,
      now: t0)
    let ack = object(answers(hub).first!.1.body)
    let key = ack["key"] as! String
    hub.command(
      bytes(#"{"op":"start","seconds":5}"#), session: "s", authority: .key(key), peer: "a",
      request: 2, now: t0)
    #expect(answers(hub).map { $0.1.code } == [nil])
  }

  /// The list pages by id in order, and follows sessions as they come and go.
  @Test func listPagesInOrder() {
    let hub = Hub(config: HubConfig())
    var ids: [ConnectionID] = []
    for name in ["c", "a", "e", "b", "d"] { ids.append(hub.join(name, now: t0)) }
    #expect(hub.sessionPage(after: nil, limit: 2).map(\.id) == ["a", "b"])
    #expect(hub.sessionPage(after: "b", limit: 2).map(\.id) == ["c", "d"])
    #expect(hub.sessionPage(after: "bb", limit: 10).map(\.id) == ["c", "d", "e"])
    #expect(hub.sessionPage(after: "e", limit: 10).isEmpty)
    #expect(hub.sessionPage(after: nil, limit: 1).first?.viewers == 1)
  }
}

/// The ordered id index under the list endpoint.
@Suite struct SortedIDsTests {
  /// Thousands of inserts and removals in random order keep it equal to a sorted set, across chunk splits.
  @Test func matchesASortedSet() {
    // Handles are places in `names`, as the hub's are slots holding ids.
    var names: [String] = []
    var handles: [String: Int] = [:]
    var index = SortedIDs<Int>()
    var reference = Set<String>()
    var generator = SystemRandomNumberGenerator()
    for _ in 0..<5000 {
      let id = "s\(generator.next(upperBound: 3000 as UInt64))"
      let handle =
        handles[id]
        ?? {
          names.append(id)
          handles[id] = names.count - 1
          return names.count - 1
        }()
      if generator.next(upperBound: 3 as UInt64) == 0 {
        index.remove(handle, id: id) { names[$0] }
        reference.remove(id)
      } else {
        index.insert(handle, id: id) { names[$0] }
        reference.insert(id)
      }
    }
    let sorted = reference.sorted()
    #expect(index.count == sorted.count)
    #expect(index.page(after: nil, limit: .max) { names[$0] }.map { names[$0] } == sorted)
    let middle = sorted[sorted.count / 2]
    #expect(
      index.page(after: middle, limit: 700) { names[$0] }.map { names[$0] }
        == Array(sorted.drop { $0 <= middle }.prefix(700)))
    #expect(index.page(after: sorted.last!, limit: 10) { names[$0] }.isEmpty)
  }
}

/// The bounded table of HTTP rate buckets.
@Suite struct RequestLimitsTests {
  /// A full table drops the buckets idle a second (full again), and refuses when none is.
  @Test func tableStaysBounded() {
    var limits = RequestLimits()
    var taken = 0
    for index in 0..<RequestLimits.maxEntries where limits.take(["a:\(index)"], rate: 5, now: 0) {
      taken += 1
    }
    #expect(taken == RequestLimits.maxEntries)
    let whileFull = limits.take(["new"], rate: 5, now: 10)
    #expect(!whileFull)
    let aSecondOn = limits.take(["new"], rate: 5, now: 1000)
    #expect(aSecondOn)
    #expect(limits.count <= RequestLimits.maxEntries)
  }

  /// A flood of new addresses against a full table costs each request a
  /// few looks at the table, not a pass over it, and the table stays at its size.
  @Test func floodOfNewAddressesIsConstantWorkPerRequest() {
    var limits = RequestLimits(capacity: 1000)
    var taken = 0
    for index in 0..<1000 where limits.take(["a:\(index)"], rate: 5, now: 0) { taken += 1 }
    #expect(taken == 1000)
    let before = limits.visited
    var refused = 0
    for index in 0..<1000 where !limits.take(["b:\(index)"], rate: 5, now: 10) { refused += 1 }
    #expect(refused == 1000)
    #expect(limits.visited - before <= 1000 * (RequestLimits.dropsPerRequest + 1))
    #expect(limits.count == 1000)
    // Once the table's buckets sit idle a second, each new address takes an idle one's place.
    var later = 0
    for index in 0..<1001 where limits.take(["c:\(index)"], rate: 5, now: 2000) { later += 1 }
    #expect(later == 1000)
    #expect(limits.count == 1000)
  }

  /// A bucket in use keeps its place while idle ones go, oldest first.
  @Test func busyBucketOutlivesIdleOnes() {
    var limits = RequestLimits(capacity: 2)
    let first = [
      limits.take(["a"], rate: 1, now: 0), limits.take(["b"], rate: 1, now: 0),
      limits.take(["a"], rate: 1, now: 1500),
    ]
    #expect(first == [true, true, true])
    // b is idle, a was used just now: c takes b's place.
    let newcomer = limits.take(["c"], rate: 1, now: 1600)
    #expect(newcomer)
    // a's bucket is still the one it emptied: a second command within the second is refused.
    let again = limits.take(["a"], rate: 1, now: 1700)
    #expect(!again)
  }
}
