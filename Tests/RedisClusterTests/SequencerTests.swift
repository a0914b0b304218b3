import CountdownCore
import Foundation
import Libev
import Testing

@testable import RedisCluster

/// Two instances (hub + RedisSequencer) on one loop and thread, against a
/// real redis-server.
@Suite(.serialized) struct SequencerTests {
  let redis: RedisProcess
  let loop = LibevLoop()
  let epoch: String

  init() throws {
    redis = try RedisProcess()
    epoch = try RedisSequencer.prepare(redis.address, proposedEpoch: Hub.randomEpoch())
  }

  func connected(_ instances: Instance...) {
    waitFor(loop, "both connections and the subscription") {
      instances.allSatisfy(\.sequencer.isConnected)
    }
  }

  /// A viewer of `session` on each instance, once both have their snapshots.
  func joined(_ a: Instance, _ b: Instance, _ session: String) -> (Viewer, Viewer) {
    var va = Viewer(a.hub, session)
    var vb = Viewer(b.hub, session)
    waitFor(loop, "both snapshots of \(session)") {
      va.read(a.hub)
      vb.read(b.hub)
      return va.hasSnapshot && vb.hasSnapshot
    }
    return (va, vb)
  }

  /// A viewer and the instance's hub it watches through.
  typealias Watching = (viewer: Viewer, hub: Hub)

  /// Advances the viewers' hubs, reads each viewer on its own hub, and tells
  /// whether every one shows `count` viewers.
  func allShow(_ count: Int, _ viewers: inout [Watching]) -> Bool {
    for hub in viewers.map(\.hub) { hub.advance(now: now()) }
    for index in viewers.indices { viewers[index].viewer.read(viewers[index].hub) }
    return viewers.allSatisfy { $0.viewer.state["viewers"] as? Int == count }
  }

  /// A start on A reaches B's viewer with the same deadline, and B's seq is not below A's.
  @Test func commandOnOneInstanceIsSeenOnAnother() {
    let a = Instance(redis, loop: loop, epoch: epoch)
    let b = Instance(redis, loop: loop, epoch: epoch)
    connected(a, b)
    var (va, vb) = joined(a, b, "s")
    va.send(a.hub, #"{"op":"start","seconds":60,"id":1}"#)
    waitFor(loop, "the ack on A and the run on B") {
      va.read(a.hub)
      vb.read(b.hub)
      return va.reply(1) != nil && vb.state["phase"] as? String == "running"
    }
    #expect(va.reply(1)?["type"] as? String == "ack")
    #expect(va.state["endsAt"] as? Int64 != nil)
    #expect(vb.state["endsAt"] as? Int64 == va.state["endsAt"] as? Int64)
    // A viewer moving from A to B carries on: same epoch, seq not lower.
    var moved = Viewer(b.hub, "s")
    waitFor(loop, "the moved viewer's snapshot") {
      moved.read(b.hub)
      return moved.hasSnapshot
    }
    #expect(moved.messages.first?["epoch"] as? String == a.hub.epoch)
    #expect(moved.seq >= va.seq)
  }

  /// 100 rounds of two simultaneous starts on two instances: one ack, one busy each.
  @Test func racingStartsGiveOneAck() {
    let a = Instance(redis, loop: loop, epoch: epoch)
    let b = Instance(redis, loop: loop, epoch: epoch)
    connected(a, b)
    var acks = 0
    for round in 0..<100 {
      var (va, vb) = joined(a, b, "race-\(round)")
      va.send(a.hub, #"{"op":"start","seconds":30,"id":1}"#)
      vb.send(b.hub, #"{"op":"start","seconds":30,"id":1}"#)
      waitFor(loop, "round \(round)'s answers") {
        va.read(a.hub)
        vb.read(b.hub)
        return va.reply(1) != nil && vb.reply(1) != nil
      }
      let answers = [va.reply(1), vb.reply(1)].map { $0?["type"] as? String }
      let codes = [va.reply(1), vb.reply(1)].compactMap { $0?["code"] as? String }
      if answers.filter({ $0 == "ack" }).count == 1 && codes == ["busy"] { acks += 1 }
    }
    #expect(acks == 100)
  }

  /// Redis stops: commands are unavailable; it returns: both instances
  /// reconnect, resubscribe, and catch up on what they missed.
  @Test func outageThenReconcile() throws {
    let a = Instance(redis, loop: loop, epoch: epoch, timeoutMs: 500)
    let b = Instance(redis, loop: loop, epoch: epoch, timeoutMs: 500)
    connected(a, b)
    var (va, vb) = joined(a, b, "s")
    redis.stop()
    waitFor(loop, "both instances to notice") {
      !a.sequencer.isConnected && !b.sequencer.isConnected
    }
    va.send(a.hub, #"{"op":"start","seconds":60,"id":1}"#)
    va.read(a.hub)
    #expect(va.reply(1)?["code"] as? String == "unavailable")
    try redis.start()
    connected(a, b)
    // Redis came back empty: the library and the epoch come back from the instances.
    va.send(a.hub, #"{"op":"start","seconds":60,"id":2}"#)
    waitFor(loop, "the start after the outage") {
      va.read(a.hub)
      vb.read(b.hub)
      return va.reply(2) != nil && vb.state["phase"] as? String == "running"
    }
    #expect(va.reply(2)?["type"] as? String == "ack")
    #expect(vb.state["endsAt"] as? Int64 == va.state["endsAt"] as? Int64)
    #expect(try redis.blocking().command(["GET", "countdown:epoch"]).text == epoch)
  }

  /// A change B never heard (its subscriber was gone) is found by the
  /// re-read after B resubscribes.
  @Test func missedChangeIsReadAfterResubscribing() throws {
    let a = Instance(redis, loop: loop, epoch: epoch)
    let b = Instance(redis, loop: loop, epoch: epoch)
    connected(a, b)
    var (va, vb) = joined(a, b, "s")
    // Kill B's connections from Redis's side; A's command lands before B is back.
    let client = try redis.blocking()
    try client.command(["CLIENT", "KILL", "TYPE", "pubsub"])
    va.send(a.hub, #"{"op":"start","seconds":60,"id":1}"#)
    waitFor(loop, "B running after its reconnect") {
      va.read(a.hub)
      vb.read(b.hub)
      return vb.state["phase"] as? String == "running"
    }
    #expect(vb.state["endsAt"] as? Int64 == va.state["endsAt"] as? Int64)
  }

  /// In key mode, two instances creating the same session at once settle on one key.
  @Test func keyRaceSettlesOnOneController() {
    let a = Instance(redis, loop: loop, epoch: epoch, control: .key)
    let b = Instance(redis, loop: loop, epoch: epoch, control: .key)
    connected(a, b)
    let (va, vb) = joined(a, b, "k")
    let roles = [va, vb].compactMap { $0.messages.first?["role"] as? String }
    #expect(roles.sorted() == ["controller", "viewer"])
    // The winner's key works on the other instance.
    let winner = va.messages.first?["role"] as? String == "controller" ? va : vb
    let key = winner.messages.first?["key"] as? String
    var other = Viewer(winner.id == va.id ? b.hub : a.hub, "k", key: key)
    let otherHub = winner.id == va.id ? b.hub : a.hub
    waitFor(loop, "the key holder's snapshot elsewhere") {
      other.read(otherHub)
      return other.hasSnapshot
    }
    #expect(other.messages.first?["role"] as? String == "controller")
  }

  /// The periodic check (the channel's position, a PING on the subscribed
  /// connection) keeps a healthy link up, and finds a change whose message
  /// never arrived.
  @Test func periodicCheckFindsALostMessage() throws {
    let a = Instance(redis, loop: loop, epoch: epoch, timeoutMs: 300, checkIntervalMs: 50)
    connected(a)
    var va = Viewer(a.hub, "s")
    waitFor(loop, "the snapshot") {
      va.read(a.hub)
      return va.hasSnapshot
    }
    // A change made behind the channel's back: written and counted, never published.
    let client = try redis.blocking()
    let ends = now() + 90_000
    try client.command([
      "HSET", "countdown:s:s", "phase", "running", "duration", "90", "endsAt", String(ends),
      "revision", "1", "updatedAt", String(now()),
    ])
    try client.command(["INCR", "countdown:pos"])
    waitFor(loop, "the check to find it") {
      va.read(a.hub)
      return va.state["phase"] as? String == "running"
    }
    #expect(va.state["endsAt"] as? Int64 == ends)
    #expect(a.sequencer.stats.reconnects == 0)
  }

  /// Viewer counts move A's seq on between commands; a viewer moving to B,
  /// which had the session open all along, resumes with ?since= and gets a
  /// seq not lower.
  @Test func movedViewerSeqNeverGoesBack() {
    let a = Instance(redis, loop: loop, epoch: epoch)
    let b = Instance(redis, loop: loop, epoch: epoch)
    connected(a, b)
    var (va, vb) = joined(a, b, "s")
    va.send(a.hub, #"{"op":"start","seconds":60,"id":1}"#)
    waitFor(loop, "the run on both") {
      va.read(a.hub)
      vb.read(b.hub)
      return va.reply(1) != nil && vb.state["phase"] as? String == "running"
    }
    // Churn on A only: each count change is a patch there, none on B.
    let started = now()
    while now() - started < 2500 {
      let extra = Viewer(a.hub, "s")
      _ = loop.run(timeoutMs: 300) { false }
      a.hub.disconnect(extra.id, now: now())
      a.hub.advance(now: now())
      b.hub.advance(now: now())
      va.read(a.hub)
      vb.read(b.hub)
    }
    #expect(va.seq > vb.seq)
    // The page resumes with ?since=<the last seq it saw>.
    var moved = Viewer(b.hub, "s", since: UInt64(va.seq))
    moved.read(b.hub)
    #expect(moved.hasSnapshot)
    #expect(moved.seq >= va.seq)
    // A claim far beyond anything an instance could have sent is ignored.
    var liar = Viewer(b.hub, "s", since: UInt64(moved.seq) + Hub.maxSinceLead + 1)
    liar.read(b.hub)
    #expect(liar.seq < moved.seq + 10)
  }

  /// Every instance shows the sum of the viewers on all of them; an
  /// instance whose heartbeat expired stops counting.
  @Test func viewerCountsAreClusterWide() {
    let a = Instance(redis, loop: loop, epoch: epoch, heartbeatTTLMs: 600)
    let b = Instance(redis, loop: loop, epoch: epoch, heartbeatTTLMs: 600)
    connected(a, b)
    var (va, vb) = joined(a, b, "count")
    var second = Viewer(a.hub, "count")
    func shown(_ count: Int) -> Bool {
      for hub in [a.hub, b.hub] { hub.advance(now: now()) }
      va.read(a.hub)
      vb.read(b.hub)
      second.read(a.hub)
      return [va, vb, second].allSatisfy { $0.state["viewers"] as? Int == count }
    }
    waitFor(loop, "3 viewers shown on both instances") { shown(3) }
    a.hub.disconnect(second.id, now: now())
    waitFor(loop, "2 viewers shown on both instances") {
      for hub in [a.hub, b.hub] { hub.advance(now: now()) }
      va.read(a.hub)
      vb.read(b.hub)
      return [va, vb].allSatisfy { $0.state["viewers"] as? Int == 2 }
    }
    // A dies without a word: after its heartbeat's TTL, B counts only its own.
    a.sequencer.stop()
    waitFor(loop, "B alone") {
      b.hub.advance(now: now())
      vb.read(b.hub)
      return vb.state["viewers"] as? Int == 1
    }
  }

  /// Sessions watched on several instances cost Redis nothing while their
  /// counts hold still: each instance sends one heartbeat a second, not one
  /// recount per session.
  @Test func settledCountsCostOnlyHeartbeats() throws {
    let a = Instance(redis, loop: loop, epoch: epoch)
    let b = Instance(redis, loop: loop, epoch: epoch)
    connected(a, b)
    var viewers: [Watching] = (0..<20).flatMap {
      let (va, vb) = joined(a, b, "quiet-\($0)")
      return [(va, a.hub), (vb, b.hub)]
    }
    waitFor(loop, "2 viewers shown on every session") { allShow(2, &viewers) }
    let client = try redis.blocking()
    _ = try client.command(["CONFIG", "RESETSTAT"])
    // Only the heartbeat calls ZRANGEBYSCORE; only a count calls HINCRBY.
    waitFor(loop, "three heartbeats from each instance") {
      calls("zrangebyscore", client) >= 6
    }
    #expect(calls("hincrby", client) == 0)
  }

  /// How often Redis has run `command` since its statistics were reset.
  func calls(_ command: String, _ client: BlockingRedis) -> Int {
    guard let info = try? client.command(["INFO", "commandstats"]).text,
      let line = info.split(separator: "\r\n").first(where: {
        $0.hasPrefix("cmdstat_\(command):")
      }),
      let value = line.split(separator: "=").dropFirst().first?.split(separator: ",").first
    else { return 0 }
    return Int(value) ?? 0
  }

  /// An instance's death is recounted once, by one survivor, over the
  /// sessions it counted viewers in: not once per survivor and shared session.
  @Test func deathIsRecountedOnce() throws {
    let instances = (0..<3).map { _ in Instance(redis, loop: loop, epoch: epoch) }
    connected(instances[0], instances[1], instances[2])
    let sessions = (0..<20).map { "shared-\($0)" }
    var viewers: [Watching] = sessions.flatMap { session in
      instances.map { (Viewer($0.hub, session), $0.hub) }
    }
    waitFor(loop, "3 viewers shown everywhere") { allShow(3, &viewers) }
    let client = try redis.blocking()
    _ = try client.command(["CONFIG", "RESETSTAT"])
    instances[0].sequencer.stop()
    var survivors = viewers.filter { $0.hub !== instances[0].hub }
    waitFor(loop, "2 viewers shown on the survivors") { allShow(2, &survivors) }
    #expect(calls("hincrby", client) <= sessions.count, "one recount per session at most")
  }

  /// An instance whose heartbeat lapsed (a stalled link) sends its counts
  /// again, since the others may have dropped them meanwhile.
  @Test func lapsedHeartbeatSendsCountsAgain() throws {
    let a = Instance(redis, loop: loop, epoch: epoch)
    let b = Instance(redis, loop: loop, epoch: epoch)
    connected(a, b)
    let (va, vb) = joined(a, b, "lapse")
    var viewers: [Watching] = [(va, a.hub), (vb, b.hub)]
    waitFor(loop, "2 viewers shown on both instances") { allShow(2, &viewers) }
    let client = try redis.blocking()
    let key = RedisSequencer.viewerKey("lapse")
    let instance = a.sequencer.instance
    // What another instance's recount does once A's heartbeat has expired.
    _ = try client.command(["ZADD", RedisSequencer.instancesKey, "0", instance])
    _ = try client.command(["HDEL", key, instance])
    waitFor(loop, "A's count back in the viewer hash") {
      (try? client.command(["HGET", key, instance]).text) == "1"
    }
  }

  /// A sequencer released without `stop`, with a read in flight, closes its
  /// connections without running callbacks into freed objects.
  @Test func releasedWithoutStop() {
    var sequencer: RedisSequencer? = RedisSequencer(
      settings: RedisSequencer.Settings(address: redis.address, epoch: epoch))
    sequencer?.start(on: loop)
    waitFor(loop, "the connection") { sequencer?.isConnected == true }
    _ = sequencer?.created(session: "gone", record: SessionRecord(), keyHash: nil)
    sequencer = nil
    // Whatever Redis still sends has no one to reach; the loop runs on.
    #expect(!loop.run(timeoutMs: 200) { false })
  }

  /// 700 open sessions: the reconcile after a reconnect reads all 700, never
  /// more than the window at once, and a command sent meanwhile is answered.
  @Test func reconcileReadsEverySessionInABoundedWindow() throws {
    let a = Instance(redis, loop: loop, epoch: epoch)
    waitFor(loop, "the connections") { a.sequencer.isConnected }
    let count = BulkWindow.defaultSize * 2 + 188
    var viewers = (0..<count).map { Viewer(a.hub, "w-\($0)") }
    waitFor(loop, "every snapshot") {
      for index in viewers.indices { viewers[index].read(a.hub) }
      return viewers.allSatisfy(\.hasSnapshot)
    }
    #expect(a.sequencer.stats.peakBulkInFlight == 0)
    let before = a.sequencer.stats.rereads
    try redis.blocking().command(["CLIENT", "KILL", "TYPE", "normal"])
    waitFor(loop, "the reconnect") { a.sequencer.stats.rereads > before }
    viewers[0].send(a.hub, #"{"op":"start","seconds":60,"id":1}"#)
    waitFor(loop, "every session read again, and the start's answer") {
      viewers[0].read(a.hub)
      return a.sequencer.stats.rereads >= before + count && viewers[0].reply(1) != nil
    }
    #expect(a.sequencer.stats.peakBulkInFlight == BulkWindow.defaultSize)
    #expect(viewers[0].reply(1)?["type"] as? String == "ack")
  }
}
