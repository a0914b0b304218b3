import CountdownCore
import Foundation
import Libev
import Testing

@testable import RedisCluster

/// A command whose reply is lost (the link cut between send and reply) is
/// answered with what truly happened: an ack when it applied, `unavailable`
/// only when it did not, `outcome_unknown` when that cannot be known.
@Suite(.serialized) struct LostReplyTests {
  let redis: RedisProcess
  let relay: LinkRelay
  let loop = LibevLoop()
  let epoch: String

  init() throws {
    // As the server does: the relay may close a link hiredis is writing to.
    signal(SIGPIPE, SIG_IGN)
    redis = try RedisProcess()
    relay = try LinkRelay(to: redis)
    epoch = try RedisSequencer.prepare(redis.address, proposedEpoch: Hub.randomEpoch())
  }

  /// An instance that talks to Redis through the relay.
  func instance(resolveWithinMs: Int64 = 5000) -> (Hub, RedisSequencer) {
    var settings = RedisSequencer.Settings(address: relay.address, epoch: epoch)
    settings.resolveWithinMs = resolveWithinMs
    let sequencer = RedisSequencer(settings: settings)
    let hub = Hub(config: HubConfig(), epoch: epoch, sequencer: sequencer)
    sequencer.hub = hub
    sequencer.start(on: loop)
    return (hub, sequencer)
  }

  func joined(_ hub: Hub, _ sequencer: RedisSequencer, _ session: String) -> Viewer {
    waitFor(loop, "the connections") { sequencer.isConnected }
    var viewer = Viewer(hub, session)
    waitFor(loop, "the snapshot") {
      viewer.read(hub)
      return viewer.hasSnapshot
    }
    return viewer
  }

  /// Reads `viewer` until the reply to command `id` has come.
  func awaitReply(_ viewer: inout Viewer, _ hub: Hub, _ id: Int) {
    waitFor(loop, "the reply to command \(id)") {
      viewer.read(hub)
      return viewer.reply(id) != nil
    }
  }

  func field(_ session: String, _ name: String) throws -> String? {
    try redis.blocking().command(["HGET", RedisSequencer.sessionKey(session), name]).text
  }

  /// A subscription probe lost with the commands connection (it goes out on
  /// that one) does not get the healthy subscriber reset once it is overdue.
  @Test func aProbeLostWithTheCommandsConnectionLeavesTheSubscriber() throws {
    var settings = RedisSequencer.Settings(address: relay.address, epoch: epoch)
    settings.checkIntervalMs = 100
    settings.timeoutMs = 400
    let sequencer = RedisSequencer(settings: settings)
    let hub = Hub(config: HubConfig(), epoch: epoch, sequencer: sequencer)
    sequencer.hub = hub
    sequencer.start(on: loop)
    waitFor(loop, "the connections") { sequencer.isConnected }
    let before = relay.droppedBytes
    relay.set(.dropCommands)
    // The next check's probe and position read are lost on the way.
    waitFor(loop, "a check's probe to be lost") { relay.droppedBytes > before }
    relay.set(.forward)
    try redis.blocking().command(["CLIENT", "KILL", "TYPE", "normal"])
    waitFor(loop, "the commands connection back") {
      sequencer.stats.reconnects == 1 && sequencer.isConnected
    }
    // Absence needs a window: past the lost probe's timeout, with checks in it.
    let end = monotonicMs() + settings.timeoutMs + 3 * settings.checkIntervalMs
    _ = loop.run(timeoutMs: 5000) { monotonicMs() > end }
    #expect(sequencer.stats.reconnects == 1)
    #expect(sequencer.isConnected)
    sequencer.stop()
  }

  /// Sends `json` with the relay in `mode`, waits until `reached` (what
  /// Redis shows once the command got there, or not), then cuts the
  /// commands connection from Redis's side and lets the relay forward again.
  func sendLosingReply(
    _ viewer: Viewer, _ hub: Hub, _ json: String, mode: LinkRelay.Mode,
    reached: () throws -> Bool
  ) throws {
    relay.set(mode)
    viewer.send(hub, json)
    waitFor(loop, "the command to be sent and lost") { (try? reached()) ?? false }
    try redis.blocking().command(["CLIENT", "KILL", "TYPE", "normal"])
    relay.set(.forward)
  }

  /// `adjust +60` applied in Redis whose reply was lost is acked once,
  /// with the true record, and applied once: a retry is not needed.
  @Test func appliedCommandWithLostReplyIsAcked() throws {
    let (hub, sequencer) = instance()
    var viewer = joined(hub, sequencer, "applied")
    viewer.send(hub, #"{"op":"start","seconds":60,"id":1}"#)
    awaitReply(&viewer, hub, 1)
    #expect(try field("applied", "duration") == "60")
    try sendLosingReply(
      viewer, hub, #"{"op":"adjust","seconds":60,"id":2}"#, mode: .dropReplies
    ) { try field("applied", "duration") == "120" && relay.droppedBytes > 0 }
    awaitReply(&viewer, hub, 2)
    #expect(viewer.reply(2)?["type"] as? String == "ack")
    #expect(viewer.state["duration"] as? Int == 120)
    #expect(try field("applied", "duration") == "120")
    #expect(try field("applied", "revision") == "2")
    #expect(sequencer.stats.lostRepliesApplied == 1)
  }

  /// A command that never reached Redis, its link then cut, is answered
  /// `unavailable`, and Redis shows nothing changed.
  @Test func commandThatNeverArrivedIsUnavailable() throws {
    let (hub, sequencer) = instance()
    var viewer = joined(hub, sequencer, "absent")
    viewer.send(hub, #"{"op":"start","seconds":60,"id":1}"#)
    awaitReply(&viewer, hub, 1)
    let before = relay.droppedBytes
    try sendLosingReply(
      viewer, hub, #"{"op":"adjust","seconds":60,"id":2}"#, mode: .dropCommands
    ) { relay.droppedBytes > before && sequencer.stats.commandsSent == 2 }
    awaitReply(&viewer, hub, 2)
    #expect(viewer.reply(2)?["code"] as? String == "unavailable")
    #expect(try field("absent", "duration") == "60")
    #expect(try field("absent", "revision") == "1")
    #expect(sequencer.stats.lostRepliesNotApplied == 1)
  }

  /// Redis lost its data between the command and the read-back: the
  /// instance cannot know, and says `outcome_unknown`, not `unavailable`.
  @Test func lostDataGivesOutcomeUnknown() throws {
    let (hub, sequencer) = instance()
    var viewer = joined(hub, sequencer, "flushed")
    var flushed = false
    try sendLosingReply(
      viewer, hub, #"{"op":"start","seconds":60,"id":1}"#, mode: .dropReplies
    ) {
      // Asked again once true: so it flushes once.
      guard !flushed else { return true }
      guard try field("flushed", "revision") == "1" else { return false }
      try redis.blocking().command(["FLUSHALL"])
      flushed = true
      return true
    }
    awaitReply(&viewer, hub, 1)
    #expect(viewer.reply(1)?["code"] as? String == "outcome_unknown")
    #expect(sequencer.stats.lostRepliesUnknown == 1)
  }

  /// Redis unreachable after the reply was lost: past `resolveWithinMs`
  /// the command is answered `outcome_unknown`, and later ones are not held.
  @Test func unreachableRedisGivesOutcomeUnknownInTime() throws {
    let (hub, sequencer) = instance(resolveWithinMs: 300)
    var viewer = joined(hub, sequencer, "gone")
    relay.set(.dropReplies)
    viewer.send(hub, #"{"op":"start","seconds":60,"id":1}"#)
    waitFor(loop, "the start to apply") { (try? field("gone", "revision")) == "1" }
    redis.stop()
    relay.set(.forward)
    let asked = now()
    awaitReply(&viewer, hub, 1)
    #expect(viewer.reply(1)?["code"] as? String == "outcome_unknown")
    #expect(now() - asked < 2000)
    viewer.send(hub, #"{"op":"pause","id":2}"#)
    viewer.read(hub)
    #expect(viewer.reply(2)?["code"] as? String == "unavailable")
  }

  /// The function side: a read-back before the command's deadline voids its
  /// nonce, so the command, arriving late, changes nothing; and a nonce
  /// pushed out by 16 later commands is reported unknown, not absent.
  @Test func resolveVoidsALateCommandAndKnowsItsLimits() throws {
    let client = try redis.blocking()
    let key = RedisSequencer.sessionKey("late")
    func command(_ op: String, _ a: String, nonce: String) throws -> [String] {
      let base = ["idle", "0", "-", "-", "0", ""]
      let deadline = String(now() + 60_000)
      return try client.command(
        [
          "FCALL", RedisSequencer.function("command"), "3", key, "countdown:epoch", "countdown:pos",
          epoch,
          "countdown:changes:0", "late", op, a, op == "start" ? "60" : "", "",
        ] + base + [deadline, nonce, ""]
      ).elements?.compactMap(\.text) ?? []
    }
    func resolve(_ nonce: String, base: Int) throws -> [String] {
      try client.command([
        "FCALL", RedisSequencer.function("resolve"), "3", key, "countdown:epoch", "countdown:pos",
        epoch, "late",
        nonce, String(base), String(now() + 60_000),
      ]).elements?.compactMap(\.text) ?? []
    }
    #expect(try command("start", "seconds", nonce: "n1").first == "ok")
    #expect(try resolve("n1", base: 0).first == "applied")
    // n2 has not arrived: absent, and voided.
    #expect(try resolve("n2", base: 1) == ["absent"])
    #expect(try command("adjust", "60", nonce: "n2") == ["expired"])
    #expect(try client.command(["HGET", key, "revision"]).text == "1")
    // 16 later commands: n3 itself pushed out of the kept nonces.
    #expect(try command("adjust", "1", nonce: "n3").first == "ok")
    for index in 0..<16 {
      #expect(try command("adjust", "1", nonce: "m\(index)").first == "ok")
    }
    #expect(try resolve("n3", base: 1) == ["unknown"])
    // A nonce never sent, from a base the kept nonces still cover: absent.
    #expect(try resolve("n4", base: 17) == ["absent"])
  }
}
