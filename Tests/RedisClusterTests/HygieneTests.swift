import CountdownCore
import Foundation
import Testing

@testable import RedisCluster

/// What sessions leave in Redis: nothing lasting for a viewer who only
/// watches, and nothing at all once every instance forgot them.
extension SequencerTests {
  /// Every key in Redis with its TTL in ms (-1: none).
  func keysWithTTL(_ client: BlockingRedis) throws -> [String: Int64] {
    var found: [String: Int64] = [:]
    for key in try client.command(["KEYS", "*"]).elements?.compactMap(\.text) ?? [] {
      if case .integer(let ttl) = try client.command(["PTTL", key]) { found[key] = ttl }
    }
    return found
  }

  /// Moves a hub's clock on by hours, a step at a time (the run finishes,
  /// then the finished session expires), so it forgets what nobody watches.
  func expire(_ hub: Hub) {
    for hours in 1...3 { hub.advance(now: now() + Int64(hours) * 3_600_000) }
  }

  /// Keys every cluster keeps once, whatever its sessions: not a viewer's.
  static let sharedKeys: Set<String> = [RedisSequencer.epochKey, RedisSequencer.instancesKey]

  /// A viewer who only watches (open mode) leaves keys that all expire
  /// within a few minutes; only a command makes a session last.
  @Test func viewOnlyJoinLeavesOnlyShortLivedKeys() throws {
    let client = try redis.blocking()
    let a = Instance(redis, loop: loop, epoch: epoch)
    waitFor(loop, "connected") { a.sequencer.isConnected }
    var viewer = Viewer(a.hub, "watch")
    waitFor(loop, "the snapshot and the viewer count in Redis") {
      viewer.read(a.hub)
      let counted = try? client.command(["EXISTS", RedisSequencer.viewerKey("watch")])
      return viewer.hasSnapshot && counted == .integer(1)
    }
    let left = try keysWithTTL(client).filter { !Self.sharedKeys.contains($0.key) }
    #expect(!left.isEmpty)
    for (key, ttl) in left {
      #expect(ttl > 0 && ttl <= 180_000, "\(key) lives \(ttl) ms")
    }
    // While the session is open, the heartbeats renew what it keeps.
    let counts = RedisSequencer.viewerKey("watch")
    let index = RedisSequencer.sessionIndexKey(a.sequencer.instance)
    // Past the first heartbeats (the first resends every count, which renews too).
    for _ in 0..<2 {
      let score = try client.command(["ZSCORE", RedisSequencer.instancesKey, a.sequencer.instance])
      waitFor(loop, "a heartbeat") {
        a.hub.advance(now: now())
        let next = try? client.command([
          "ZSCORE", RedisSequencer.instancesKey, a.sequencer.instance,
        ])
        return next != score
      }
    }
    try client.command(["PEXPIRE", counts, "5000"])
    try client.command(["PEXPIRE", index, "5000"])
    waitFor(loop, "the viewer hash and the index renewed") {
      a.hub.advance(now: now())
      let ttls = [counts, index].map { try? client.command(["PTTL", $0]) }
      return ttls.allSatisfy { if case .integer(let ttl)? = $0 { ttl > 60_000 } else { false } }
    }
    viewer.send(a.hub, #"{"op":"start","seconds":60,"id":1}"#)
    waitFor(loop, "the start's ack") {
      viewer.read(a.hub)
      return viewer.reply(1) != nil
    }
    let hash = try keysWithTTL(client)[RedisSequencer.sessionKey("watch")] ?? 0
    #expect(hash > 86_400_000, "a commanded session's hash lives \(hash) ms")
  }

  /// Once every instance that had a session open forgot it, its keys are
  /// gone; while one still has it open, they stay.
  @Test func forgottenSessionsKeysAreDeleted() throws {
    let client = try redis.blocking()
    let a = Instance(redis, loop: loop, epoch: epoch)
    let b = Instance(redis, loop: loop, epoch: epoch)
    waitFor(loop, "connected") { a.sequencer.isConnected && b.sequencer.isConnected }
    var va = Viewer(a.hub, "gone")
    var vb = Viewer(b.hub, "gone")
    waitFor(loop, "both snapshots and both counts") {
      va.read(a.hub)
      vb.read(b.hub)
      let fields = try? client.command(["HLEN", RedisSequencer.viewerKey("gone")])
      return va.hasSnapshot && vb.hasSnapshot && fields == .integer(4)
    }
    va.send(a.hub, #"{"op":"start","seconds":60,"id":1}"#)
    va.send(a.hub, #"{"op":"cancel","id":2}"#)
    waitFor(loop, "the acks") {
      va.read(a.hub)
      return va.reply(2) != nil
    }
    #expect(try client.command(["EXISTS", RedisSequencer.sessionKey("gone")]) == .integer(1))
    // Both viewers leave, and A forgets the session.
    a.hub.disconnect(va.id, now: now())
    b.hub.disconnect(vb.id, now: now())
    expire(a.hub)
    #expect(a.hub.stats.sessionsForgotten == 1)
    // B still has it open: A's forget leaves the keys.
    waitFor(loop, "A's field gone from the viewer hash") {
      let field = try? client.command([
        "HEXISTS", RedisSequencer.viewerKey("gone"), a.sequencer.instance,
      ])
      return field == .integer(0)
    }
    #expect(try client.command(["EXISTS", RedisSequencer.sessionKey("gone")]) == .integer(1))
    expire(b.hub)
    #expect(b.hub.stats.sessionsForgotten == 1)
    waitFor(loop, "the session's keys gone") {
      let left = try? client.command([
        "EXISTS", RedisSequencer.sessionKey("gone"), RedisSequencer.viewerKey("gone"),
      ])
      return left == .integer(0)
    }
    let members = try client.command([
      "SISMEMBER", RedisSequencer.sessionIndexKey(b.sequencer.instance), "gone",
    ])
    #expect(members == .integer(0))
  }

  /// The library's name and every function's carry the version the
  /// sequencer calls, and loading it leaves another release's library be.
  @Test func libraryIsVersionedAndLivesBesideAnOldOne() throws {
    let client = try redis.blocking()
    let source = FunctionLibrary.source
    #expect(source.hasPrefix("#!lua name=\(RedisSequencer.library)\n"))
    let registered = source.split(separator: "\n").filter {
      $0.hasPrefix("redis.register_function(")
    }
    #expect(registered.count == 12)
    for line in registered {
      #expect(line.hasPrefix("redis.register_function('\(RedisSequencer.library)_"), "\(line)")
    }
    let old = """
      #!lua name=countdown
      redis.register_function('countdown_command', function(keys, args) return 'old' end)
      """
    try client.command(["FUNCTION", "LOAD", "REPLACE", old])
    _ = try RedisSequencer.prepare(redis.address, proposedEpoch: epoch)
    #expect(try client.command(["FCALL", "countdown_command", "0"]).text == "old")
    let libraries = try client.command(["FUNCTION", "LIST"]).elements ?? []
    #expect(libraries.count == 2)
  }
}
