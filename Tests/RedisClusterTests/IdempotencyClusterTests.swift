import Foundation
import Libev
import Testing

@testable import CountdownCore
@testable import RedisCluster

/// Idempotency-Key, the session index and reads that create nothing, on two
/// instances (hub + RedisSequencer) against a real redis-server.
@Suite(.serialized) struct IdempotencyClusterTests {
  let redis: RedisProcess
  let loop = LibevLoop()
  let epoch: String

  init() throws {
    redis = try RedisProcess()
    epoch = try RedisSequencer.prepare(redis.address, proposedEpoch: Hub.randomEpoch())
  }

  func connected(_ instances: Instance...) {
    waitFor(loop, "the connections and the subscription") {
      instances.allSatisfy(\.sequencer.isConnected)
    }
  }

  /// A viewer of `session` on `instance`, once it has its snapshot.
  func viewer(_ instance: Instance, _ session: String) -> ConnectionID {
    var viewer = Viewer(instance.hub, session)
    waitFor(loop, "the snapshot of \(session)") {
      viewer.read(instance.hub)
      return viewer.hasSnapshot
    }
    return viewer.id
  }

  /// Sends a keyed command from `id` and waits for its answer's bytes.
  func answer(
    _ instance: Instance, _ id: ConnectionID, _ command: SessionCommand, key: String?,
    sourceLocation: SourceLocation = #_sourceLocation
  ) -> String? {
    instance.hub.submit(command, idempotencyKey: key, from: id, now: now())
    var found: String?
    waitFor(loop, "the answer", sourceLocation: sourceLocation) {
      while let frame = instance.hub.nextFrame(for: id, now: now()) {
        let text = String(decoding: frame, as: UTF8.self)
        if text.hasPrefix(#"{"type":"ack""#) || text.hasPrefix(#"{"type":"error""#) { found = text }
      }
      return found != nil
    }
    return found
  }

  /// Sends a keyed HTTP command to `instance` from `peer` and waits for its answer.
  func request(
    _ instance: Instance, _ body: String, _ session: String, key: String, peer: String,
    sourceLocation: SourceLocation = #_sourceLocation
  ) -> RequestAnswer? {
    instance.hub.command(
      Array(body.utf8), session: session, authority: .none, peer: peer, request: 1,
      idempotencyKey: key, now: now())
    var found: RequestAnswer?
    waitFor(loop, "the answer", sourceLocation: sourceLocation) {
      instance.hub.drainAnswers { found = $1 }
      return found != nil
    }
    return found
  }

  /// An answer's code, "ack", or "key_refused" for the rate_limited of a
  /// new key past the limits (which names them).
  func outcome(_ answer: RequestAnswer?) -> String {
    guard let answer else { return "none" }
    if answer.code == .rateLimited,
      String(decoding: answer.body, as: UTF8.self).contains("Idempotency-Key")
    {
      return "key_refused"
    }
    return answer.code?.rawValue ?? "ack"
  }

  /// How many keys Redis holds whose names start with `prefix`.
  func keys(_ prefix: String) throws -> Int {
    try redis.blocking().command(["KEYS", prefix + "*"]).elements?.count ?? -1
  }

  /// New keys past a session's limit (and past an address's, on other
  /// sessions) are refused rate_limited on either instance and stored
  /// nowhere, so Redis's keys stay bounded; another session's earlier key,
  /// from another address, still replays and applies once.
  @Test func newKeysPastTheLimitsAreRefused() throws {
    let limits = IdempotencyLimits(perSession: 5, perAddress: 8, total: 1000)
    // A rate that never binds, so every rate_limited here is a key refused.
    let a = Instance(
      redis, loop: loop, epoch: epoch, idempotencyLimits: limits, commandsPerSecond: 100_000)
    let b = Instance(
      redis, loop: loop, epoch: epoch, idempotencyLimits: limits, commandsPerSecond: 100_000)
    connected(a, b)
    let theirs = try #require(
      request(b, #"{"op":"start","seconds":600}"#, "other", key: "theirs", peer: "192.0.2.9"))
    #expect(theirs.code == nil)
    var codes: [String] = []
    for n in 0..<40 {
      let instance = n.isMultiple(of: 2) ? a : b
      let answer = request(
        instance, #"{"op":"cancel"}"#, "flood", key: "k\(n)", peer: "2001:db8::/64")
      codes.append(outcome(answer))
    }
    #expect(codes.prefix(5).allSatisfy { $0 == "not_running" }, "\(codes)")
    #expect(codes.dropFirst(5).allSatisfy { $0 == "key_refused" }, "\(codes)")
    // The same address on other sessions: 3 more keys reach its 8.
    var elsewhere: [String] = []
    for n in 0..<10 {
      let answer = request(a, #"{"op":"cancel"}"#, "flood\(n)", key: "e", peer: "2001:db8::/64")
      elsewhere.append(outcome(answer))
    }
    #expect(
      elsewhere == Array(repeating: "not_running", count: 3)
        + Array(repeating: "key_refused", count: 7))
    #expect(try keys("countdown:idem:") == 9)
    let held = try redis.blocking()
    #expect(
      try held.command(["ZCARD", RedisSequencer.heldKeysKey(session: "flood")]) == .integer(5))
    #expect(
      try held.command(["ZCARD", RedisSequencer.heldKeysKey(address: "2001:db8::/64")])
        == .integer(8))
    #expect(try held.command(["ZCARD", RedisSequencer.heldKeysKey]) == .integer(9))
    // A retry of a held key is answered as before; the other session's replays.
    #expect(
      request(b, #"{"op":"cancel"}"#, "flood", key: "k2", peer: "2001:db8::/64")?.code
        == .notRunning)
    let replay = request(
      a, #"{"op":"start","seconds":600}"#, "other", key: "theirs", peer: "192.0.2.9")
    #expect(replay == theirs)
    #expect(try revision("other") == "1")
  }

  func revision(_ session: String) throws -> String? {
    try redis.blocking().command(["HGET", RedisSequencer.sessionKey(session), "revision"]).text
  }

  /// A keyed start on A, retried on B, gets A's answer byte for byte and applies once.
  @Test func replayAcrossInstances() throws {
    let a = Instance(redis, loop: loop, epoch: epoch)
    let b = Instance(redis, loop: loop, epoch: epoch)
    connected(a, b)
    let onA = viewer(a, "s")
    let onB = viewer(b, "s")
    let start = SessionCommand.start(.seconds(120), finishedLabel: "Fini")
    let first = try #require(answer(a, onA, start, key: "deploy-42"))
    #expect(first.hasPrefix(#"{"type":"ack","id":null,"seq":"#))
    #expect(first.contains(#""phase":"running""#))
    let retry = answer(b, onB, start, key: "deploy-42")
    #expect(retry == first)
    #expect(try revision("s") == "1")
    // Once more on A, and the same key for another command is refused.
    #expect(answer(a, onA, start, key: "deploy-42") == first)
    let other = answer(b, onB, .start(.seconds(5), finishedLabel: nil), key: "deploy-42")
    #expect(other?.contains(#""code":"bad_request""#) == true)
    #expect(try revision("s") == "1")
    let ttl = try redis.blocking().command([
      "PTTL", RedisSequencer.idempotencyKey("s", "deploy-42"),
    ])
    guard case .integer(let left) = ttl else {
      Issue.record("no TTL: \(ttl)")
      return
    }
    #expect(left > IdempotencyKey.keepMs - 60_000 && left <= IdempotencyKey.keepMs)
  }

  /// The same keyed start sent on both instances at once applies once, and both get the same bytes.
  @Test func simultaneousRetriesApplyOnce() throws {
    let a = Instance(redis, loop: loop, epoch: epoch)
    let b = Instance(redis, loop: loop, epoch: epoch)
    connected(a, b)
    for round in 0..<20 {
      let session = "race-\(round)"
      let onA = viewer(a, session)
      let onB = viewer(b, session)
      let start = SessionCommand.start(.seconds(30), finishedLabel: nil)
      a.hub.submit(start, idempotencyKey: "k", from: onA, now: now())
      b.hub.submit(start, idempotencyKey: "k", from: onB, now: now())
      var answers: [Int: String] = [:]
      waitFor(loop, "both answers of round \(round)") {
        for (index, (instance, id)) in [(a, onA), (b, onB)].enumerated() {
          while let frame = instance.hub.nextFrame(for: id, now: now()) {
            let text = String(decoding: frame, as: UTF8.self)
            if text.hasPrefix(#"{"type":"ack""#) || text.hasPrefix(#"{"type":"error""#) {
              answers[index] = text
            }
          }
        }
        return answers.count == 2
      }
      #expect(answers[0] == answers[1], "round \(round)")
      #expect(answers[0]?.hasPrefix(#"{"type":"ack""#) == true)
      #expect(try revision(session) == "1")
    }
  }

  /// A rules refusal is remembered: after a start elsewhere, the retried cancel is still not_running.
  @Test func refusalIsRememberedAcrossInstances() throws {
    let a = Instance(redis, loop: loop, epoch: epoch)
    let b = Instance(redis, loop: loop, epoch: epoch)
    connected(a, b)
    let onA = viewer(a, "t")
    let onB = viewer(b, "t")
    let first = try #require(answer(a, onA, .cancel, key: "c"))
    #expect(first.contains(#""code":"not_running""#))
    #expect(
      answer(b, onB, .start(.seconds(60), finishedLabel: nil), key: nil)?.contains("ack") == true)
    #expect(answer(b, onB, .cancel, key: "c") == first)
    #expect(try revision("t") == "1")
  }

  /// Every commanded session is in the index; a list pages it in id order with phase and viewers; bad bounds are bad_request.
  @Test func listPagesTheIndex() throws {
    let a = Instance(redis, loop: loop, epoch: epoch)
    connected(a)
    let ids = ["l-1", "l-2", "l-3"]
    for id in ids {
      let viewer = viewer(a, id)
      #expect(
        answer(a, viewer, .start(.seconds(60), finishedLabel: nil), key: nil)?.contains("ack")
          == true)
    }
    _ = viewer(a, "watched-only")
    func list(after: String?, limit: Int) -> Result<[DirectorySession], ErrorCode>? {
      var result: Result<[DirectorySession], ErrorCode>?
      a.sequencer.listSessions(after: after, limit: limit) { result = $0 }
      waitFor(loop, "the list") { result != nil }
      return result
    }
    let page = try #require(try list(after: nil, limit: 2)?.get())
    #expect(page.map(\.id) == ["l-1", "l-2"])
    #expect(page.allSatisfy { $0.record.phase == .running && $0.record.endsAt != nil })
    let rest = try #require(try list(after: "l-2", limit: 1000)?.get())
    #expect(rest.map(\.id) == ["l-3"])
    for (after, limit) in [
      (nil, 0), (nil, 1002), (nil, -1), (nil, Int.max), ("bad/id", 10), ("", 10),
    ] {
      #expect(list(after: after, limit: limit).map { (try? $0.get()) == nil } == true)
    }
    // A session whose keys went leaves the index: by forget, or by expiry (found by the next list).
    let blocking = try redis.blocking()
    try blocking.command(["DEL", RedisSequencer.sessionKey("l-1")])
    #expect(try list(after: nil, limit: 10)?.get().map(\.id) == ["l-2", "l-3"])
    #expect(try blocking.command(["ZSCORE", RedisSequencer.sessionsKey, "l-1"]) == .null)
    #expect(try blocking.command(["ZCARD", RedisSequencer.sessionsKey]) == .integer(2))
  }

  /// Forgetting a session whose run is over removes it from the index with its hash.
  @Test func forgetRemovesFromTheIndex() throws {
    let a = Instance(redis, loop: loop, epoch: epoch)
    connected(a)
    let onA = viewer(a, "f")
    #expect(
      answer(a, onA, .start(.seconds(60), finishedLabel: nil), key: nil)?.contains("ack") == true)
    #expect(answer(a, onA, .cancel, key: nil)?.contains("ack") == true)
    a.hub.disconnect(onA, now: now())
    let blocking = try redis.blocking()
    #expect(try blocking.command(["ZSCORE", RedisSequencer.sessionsKey, "f"]) != .null)
    a.sequencer.forgot(session: "f")
    waitFor(loop, "the index entry to go") {
      (try? blocking.command(["ZSCORE", RedisSequencer.sessionsKey, "f"])) == .null
    }
    #expect(try blocking.command(["EXISTS", RedisSequencer.sessionKey("f")]) == .integer(0))
  }

  /// An instance that does not hold a session reads it from Redis; a session nobody opened reads as nil and leaves no key.
  @Test func readOfASessionNotHeldCreatesNothing() throws {
    let a = Instance(redis, loop: loop, epoch: epoch)
    let b = Instance(redis, loop: loop, epoch: epoch)
    connected(a, b)
    let onA = viewer(a, "held-by-a")
    #expect(
      answer(a, onA, .start(.seconds(300), finishedLabel: nil), key: nil)?.contains("ack") == true)
    func read(_ id: String) -> Result<DirectorySession?, ErrorCode>? {
      var result: Result<DirectorySession?, ErrorCode>?
      b.sequencer.readSession(id) { result = $0 }
      waitFor(loop, "the read") { result != nil }
      return result
    }
    let summary = try #require(try read("held-by-a")?.get())
    #expect(summary.record.phase == .running)
    #expect(summary.record.endsAt == a.hub.record(of: "held-by-a")?.endsAt)
    #expect(b.hub.record(of: "held-by-a") == nil)
    let snapshot = String(
      decoding: b.hub.snapshot(reading: summary, session: "held-by-a", now: now()), as: UTF8.self)
    #expect(
      snapshot.hasPrefix(#"{"type":"snapshot","session":"held-by-a","epoch":"\#(epoch)","seq":"#))
    #expect(snapshot.contains(#""phase":"running""#))
    let keysBefore = try redis.blocking().command(["DBSIZE"])
    #expect(try read("nobody")?.get() == .some(nil))
    #expect(try redis.blocking().command(["DBSIZE"]) == keysBefore)
    #expect(
      try redis.blocking().command(["EXISTS", RedisSequencer.sessionKey("nobody")]) == .integer(0))
    #expect(read("no/such").map { (try? $0.get()) == nil } == true)
    let idle = String(
      decoding: b.hub.snapshot(reading: nil, session: "nobody", now: now()), as: UTF8.self)
    #expect(idle.contains(#""phase":"idle""#))
  }
}
