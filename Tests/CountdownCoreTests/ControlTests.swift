import Foundation
import Testing

@testable import CountdownCore

/// Who controls a `--control key` session: keys presented in an `auth`
/// message, rotated by a controller, and checked again when a command is sent on.
@Suite struct ControlTests {
  let t0: Int64 = 1_700_000_000_000

  func message(_ json: String) -> [UInt8] { Array(json.utf8) }

  /// A key-mode hub with one session whose creator has read its snapshot: the hub, the creator and the key.
  func keyed(
    sequencer: any CommandSequencer = LocalSequencer(), config: HubConfig = HubConfig(control: .key)
  ) throws -> (Hub, FakeViewer, String) {
    let hub = Hub(config: config, sequencer: sequencer)
    var creator = FakeViewer(id: hub.join("s", now: t0))
    creator.read(from: hub, now: t0)
    let key = try #require(creator.messages.first?["key"] as? String)
    return (hub, creator, key)
  }

  /// A viewer that presents the key in an `auth` becomes a controller: a snapshot says so, then the ack, then its commands run.
  @Test func authGrantsControl() throws {
    let (hub, _, key) = try keyed()
    var viewer = FakeViewer(id: hub.join("s", now: t0))
    viewer.read(from: hub, now: t0)
    #expect(viewer.messages.first?["role"] as? String == "viewer")
    hub.receive(message(#"{"op":"auth","key":"\#(key)","id":7}"#), from: viewer.id, now: t0)
    viewer.read(from: hub, now: t0)
    let answers = viewer.messages.dropFirst().map { $0["type"] as? String }
    #expect(answers == ["snapshot", "ack"])
    #expect(viewer.last("snapshot")?["role"] as? String == "controller")
    #expect(viewer.last("snapshot")?["key"] as? String == key)
    #expect(viewer.last("ack")?["id"] as? Int == 7)
    #expect(viewer.last("ack")?["seq"] as? UInt64 == viewer.seq)
    hub.receive(message(#"{"op":"start","seconds":9,"id":8}"#), from: viewer.id, now: t0 + 1)
    viewer.read(from: hub, now: t0 + 1)
    #expect(viewer.last("ack")?["id"] as? Int == 8)
    #expect(hub.state(of: "s")?.state.phase == .running)
    #expect(hub.stats.commands["auth"]?["ok"] == 1)
  }

  /// A wrong key, of any length up to the limit and with any characters, is `forbidden`, and the connection stays a viewer.
  @Test func wrongKeyIsForbidden() throws {
    let (hub, _, key) = try keyed()
    var viewer = FakeViewer(id: hub.join("s", now: t0))
    viewer.read(from: hub, now: t0)
    let wrong = (key.first == "0" ? "1" : "0") + key.dropFirst()
    let keys = [
      wrong, "", String(key.dropLast()), key + "0", key.uppercased(), "\\u0000" + key,
      String(repeating: "a", count: WireCodec.maxKeyLength),
    ]
    for (index, offered) in keys.enumerated() {
      hub.receive(
        message(#"{"op":"auth","key":"\#(offered)","id":\#(index)}"#), from: viewer.id,
        now: t0 + Int64(index) * 1000)
      viewer.read(from: hub, now: t0 + Int64(index) * 1000)
      let error = viewer.last("error")
      #expect(error?["id"] as? Int == index, "key \(offered)")
      #expect(error?["code"] as? String == "forbidden", "key \(offered)")
      #expect(error?["message"] as? String == "the controller key was not accepted")
    }
    #expect(viewer.messages.filter { $0["type"] as? String == "snapshot" }.count == 1)
    hub.receive(message(#"{"op":"start","id":"s"}"#), from: viewer.id, now: t0 + 60_000)
    viewer.read(from: hub, now: t0 + 60_000)
    #expect(viewer.last("error")?["id"] as? String == "s")
    #expect(viewer.last("error")?["code"] as? String == "forbidden")
    #expect(hub.state(of: "s")?.state.phase == .idle)
    #expect(hub.stats.commands["auth"]?["forbidden"] == UInt64(keys.count))
  }

  /// An `auth` whose key is not a string of at most 128 characters is a `bad_request`.
  @Test func malformedAuthIsBadRequest() throws {
    let (hub, _, _) = try keyed()
    var viewer = FakeViewer(id: hub.join("s", now: t0))
    let bodies = [
      #"{"op":"auth"}"#, #"{"op":"auth","key":null}"#, #"{"op":"auth","key":1e400}"#,
      #"{"op":"auth","key":["k"]}"#,
      #"{"op":"auth","key":"\#(String(repeating: "k", count: WireCodec.maxKeyLength + 1))"}"#,
      #"{"op":"auth","key":"\#(String(repeating: "k", count: 4000))"}"#,
    ]
    for (index, body) in bodies.enumerated() {
      hub.receive(message(body), from: viewer.id, now: t0 + Int64(index) * 1000)
      viewer.read(from: hub, now: t0 + Int64(index) * 1000)
      #expect(viewer.last("error")?["code"] as? String == "bad_request", "\(body.prefix(40))")
    }
    #expect(viewer.messages.filter { $0["type"] as? String == "error" }.count == bodies.count)
  }

  /// A controller's `auth`, with any key, is acked and changes nothing; in open mode every `auth` is acked.
  @Test func authOfAControllerAndInOpenMode() throws {
    let (hub, creator, _) = try keyed()
    var controller = creator
    hub.receive(message(#"{"op":"auth","key":"other","id":1}"#), from: controller.id, now: t0)
    controller.read(from: hub, now: t0)
    #expect(controller.messages.map { $0["type"] as? String } == ["snapshot", "ack"])
    hub.receive(message(#"{"op":"start","id":2}"#), from: controller.id, now: t0)
    controller.read(from: hub, now: t0)
    #expect(controller.last("ack")?["id"] as? Int == 2)

    let open = Hub(config: HubConfig())
    var viewer = FakeViewer(id: open.join("o", now: t0))
    viewer.read(from: open, now: t0)
    open.receive(message(#"{"op":"auth","key":"anything","id":3}"#), from: viewer.id, now: t0)
    viewer.read(from: open, now: t0)
    #expect(viewer.messages.map { $0["type"] as? String } == ["snapshot", "ack"])
    #expect(viewer.messages.first?["role"] == nil)
  }

  /// `auth` spends the connection's command budget like any command.
  @Test func authIsRateLimited() throws {
    let (hub, _, key) = try keyed(config: HubConfig(commandsPerSecond: 2, control: .key))
    var viewer = FakeViewer(id: hub.join("s", now: t0))
    for index in 0..<3 {
      hub.receive(message(#"{"op":"auth","key":"x","id":\#(index)}"#), from: viewer.id, now: t0)
    }
    hub.receive(message(#"{"op":"auth","key":"\#(key)","id":9}"#), from: viewer.id, now: t0)
    viewer.read(from: hub, now: t0)
    let codes = viewer.messages.filter { $0["type"] as? String == "error" }.map {
      $0["code"] as? String
    }
    #expect(codes == ["forbidden", "forbidden", "rate_limited", "rate_limited"])
    #expect(viewer.messages.first?["role"] as? String == "viewer")
  }

  /// While the session loads (a cluster), an `auth` waits for its key: the right one makes a controller, a wrong one a viewer.
  @Test func authWaitsForTheLoadedKey() {
    let sequencer = HeldSequencer()
    sequencer.load = .loading
    let hub = Hub(config: HubConfig(control: .key), sequencer: sequencer)
    var creator = FakeViewer(id: hub.join("s", now: t0))
    var right = FakeViewer(id: hub.join("s", now: t0))
    var wrong = FakeViewer(id: hub.join("s", now: t0))
    hub.receive(message(#"{"op":"auth","key":"remote","id":1}"#), from: right.id, now: t0)
    hub.receive(message(#"{"op":"auth","key":"guess","id":2}"#), from: wrong.id, now: t0)
    right.read(from: hub, now: t0)
    wrong.read(from: hub, now: t0)
    #expect(right.messages.isEmpty && wrong.messages.isEmpty)
    hub.loaded(session: "s", record: nil, keyHash: KeyHash(of: "remote"), now: t0 + 5)
    creator.read(from: hub, now: t0 + 5)
    right.read(from: hub, now: t0 + 5)
    wrong.read(from: hub, now: t0 + 5)
    #expect(creator.messages.first?["role"] as? String == "viewer")
    #expect(right.messages.map { $0["type"] as? String } == ["snapshot", "ack"])
    #expect(right.messages.first?["role"] as? String == "controller")
    #expect(right.messages.first?["key"] as? String == "remote")
    #expect(wrong.messages.map { $0["type"] as? String } == ["snapshot", "error"])
    #expect(wrong.messages.first?["role"] as? String == "viewer")
    #expect(wrong.messages.first?["key"] == nil)
    #expect(wrong.last("error")?["code"] as? String == "forbidden")
    hub.receive(message(#"{"op":"start","id":3}"#), from: right.id, now: t0 + 6)
    #expect(sequencer.held.count == 1)
  }
}
