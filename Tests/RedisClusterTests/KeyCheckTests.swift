import CountdownCore
import Foundation
import Testing

@testable import RedisCluster

/// Calls `countdown_v3_command` as an instance would, presenting `presented`
/// (nil: open mode), on a base record of `base`; the reply's texts.
func commandCall(
  _ client: BlockingRedis, _ session: String, _ command: SessionCommand,
  base: SessionRecord.Fields = SessionRecord.Fields(), presented: KeyHash? = nil,
  epoch: String = "E", byToken: Bool = false
) throws -> [String] {
  let reply = try client.command(
    [
      "FCALL", RedisSequencer.function("command"), "3", RedisSequencer.sessionKey(session),
      RedisSequencer.epochKey, RedisSequencer.positionKey,
    ]
      + CommandCall.arguments(
        command, base: base, session: session, epoch: epoch, channel: "countdown:changes:0",
        presented: presented, byToken: byToken))
  return reply.elements?.compactMap(\.text) ?? []
}

/// Opens `session` as an instance in key mode would, proposing `key`.
func openCall(_ client: BlockingRedis, _ session: String, key: KeyHash?) throws -> [String] {
  let reply = try client.command([
    "FCALL", RedisSequencer.function("open"), "3", RedisSequencer.sessionKey(session),
    RedisSequencer.epochKey,
    RedisSequencer.positionKey, "E", session, key?.hex ?? "",
  ])
  return reply.elements?.compactMap(\.text) ?? []
}

@Suite(.serialized) struct KeyCheckTests {
  let redis: RedisProcess
  let client: BlockingRedis
  let key = KeyHash(of: "the host's key")
  let other = KeyHash(of: "somebody else's key")

  init() throws {
    redis = try RedisProcess()
    client = try redis.blocking()
    try client.command(["FUNCTION", "LOAD", "REPLACE", FunctionLibrary.source])
  }

  /// In key mode the function refuses a command presenting another key's
  /// hash, or none, and the session stays as it was.
  @Test func keyedSessionRefusesAnotherKey() throws {
    _ = try openCall(client, "k", key: key)
    #expect(
      try commandCall(client, "k", .start(.seconds(60), finishedLabel: nil)) == [
        "rejected", "forbidden",
      ])
    #expect(
      try commandCall(client, "k", .start(.seconds(60), finishedLabel: nil), presented: other) == [
        "rejected", "forbidden",
      ])
    #expect(try client.command(["HGET", RedisSequencer.sessionKey("k"), "phase"]) == .null)
    let ok = try commandCall(client, "k", .start(.seconds(60), finishedLabel: nil), presented: key)
    #expect(ok.first == "ok")
    #expect(try commandCall(client, "k", .cancel, presented: other) == ["rejected", "forbidden"])
    #expect(
      try client.command(["HGET", RedisSequencer.sessionKey("k"), "phase"]).text == "running")
  }

  /// A command an API token authorised passes the key check with no key
  /// presented, rotation included; without the flag the same call is refused.
  @Test func tokenFlagPassesTheKeyCheck() throws {
    _ = try openCall(client, "tk", key: key)
    #expect(
      try commandCall(client, "tk", .start(.seconds(60), finishedLabel: nil)) == [
        "rejected", "forbidden",
      ])
    let ok = try commandCall(
      client, "tk", .start(.seconds(60), finishedLabel: nil), byToken: true)
    #expect(ok.first == "ok")
    #expect(try commandCall(client, "tk", .rotateKey(other), byToken: true).first == "ok")
    #expect(
      try client.command(["HGET", RedisSequencer.sessionKey("tk"), "key"]).text == other.hex)
    // A token cannot make an open-mode session keyed either.
    _ = try openCall(client, "to", key: nil)
    #expect(
      try commandCall(client, "to", .rotateKey(other), byToken: true) == [
        "rejected", "bad_request",
      ])
  }

  /// A session without a key (open mode) takes commands whatever is
  /// presented, and cannot be given one.
  @Test func openSessionTakesAnyone() throws {
    _ = try openCall(client, "o", key: nil)
    let ok = try commandCall(
      client, "o", .start(.seconds(60), finishedLabel: nil), presented: other)
    #expect(ok.first == "ok")
    #expect(try commandCall(client, "o", .cancel).first == "ok")
    // But no open-mode caller may make it keyed.
    #expect(try commandCall(client, "o", .rotateKey(other)) == ["rejected", "bad_request"])
    #expect(try client.command(["HEXISTS", RedisSequencer.sessionKey("o"), "key"]) == .integer(0))
  }

  /// rotate_key stores the new hash and moves the revision: the old key is
  /// refused from then on, the new one works, and a bad hash is refused.
  @Test func rotationReplacesTheKey() throws {
    _ = try openCall(client, "r", key: key)
    #expect(
      try commandCall(client, "r", .rotateKey(other), presented: other) == [
        "rejected", "forbidden",
      ])
    let rotated = try commandCall(client, "r", .rotateKey(other), presented: key)
    #expect(rotated.first == "ok")
    #expect(
      rotated.count == 2 && (try? RecordMessage.parse(rotated[1])?.record.get())?.revision == 1)
    #expect(
      try client.command(["HGET", RedisSequencer.sessionKey("r"), "key"]).text == other.hex)
    #expect(try openCall(client, "r", key: key).last == other.hex)
    #expect(
      try commandCall(client, "r", .start(.seconds(5), finishedLabel: nil), presented: key) == [
        "rejected", "forbidden",
      ])
    #expect(
      try commandCall(client, "r", .start(.seconds(5), finishedLabel: nil), presented: other)
        .first == "ok")
    // A hash no KeyHash can hold, so the call is built by slot.
    var arguments = CommandCall.arguments(
      .rotateKey(other), base: SessionRecord.Fields(), session: "r", epoch: "E",
      channel: "countdown:changes:0", presented: other)
    arguments[CommandCall.Slot.first.index] = "XYZ"
    let reply = try client.command(
      [
        "FCALL", RedisSequencer.function("command"), "3", RedisSequencer.sessionKey("r"),
        RedisSequencer.epochKey, RedisSequencer.positionKey,
      ] + arguments)
    #expect(reply.elements?.compactMap(\.text) == ["rejected", "bad_request"])
  }
}

/// Rotations reach the other instances.
extension SequencerTests {
  /// A key rotated elsewhere stops working on an instance that has the
  /// session open, and the new key makes a controller there.
  @Test func rotationElsewhereRetiresTheOldKey() throws {
    let b = Instance(redis, loop: loop, epoch: epoch, control: .key)
    waitFor(loop, "connected") { b.sequencer.isConnected }
    var host = Viewer(b.hub, "rot")
    waitFor(loop, "the host's snapshot") {
      host.read(b.hub)
      return host.hasSnapshot
    }
    let oldKey = try #require(host.messages.first?["key"] as? String)
    let client = try redis.blocking()
    let before = b.sequencer.stats.messages
    let rotated = try commandCall(
      client, "rot", .rotateKey(KeyHash(of: "new key")), presented: KeyHash(of: oldKey),
      epoch: epoch)
    #expect(rotated.first == "ok")
    waitFor(loop, "the key message and the record") { b.sequencer.stats.messages >= before + 2 }
    func role(_ key: String) -> String? {
      var viewer = Viewer(b.hub, "rot", key: key)
      viewer.read(b.hub)
      return viewer.messages.first?["role"] as? String
    }
    #expect(role(oldKey) == "viewer")
    #expect(role("new key") == "controller")
    host.read(b.hub)
    #expect(host.messages.last?["role"] as? String != "controller")
  }
}
