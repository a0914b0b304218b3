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
    hub.apply(.loaded(session: "s", record: nil, keyHash: KeyHash(of: "remote")), now: t0 + 5)
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

  /// `rotate_key` acks with a new key; every other controller becomes a viewer, and only the new key controls.
  @Test func rotationHandsOutANewKey() throws {
    let (hub, creator, old) = try keyed()
    var requester = creator
    var other = FakeViewer(id: hub.join("s", key: old, now: t0))
    var viewer = FakeViewer(id: hub.join("s", now: t0))
    other.read(from: hub, now: t0)
    viewer.read(from: hub, now: t0)
    #expect(other.messages.first?["role"] as? String == "controller")
    hub.receive(message(#"{"op":"rotate_key","id":5}"#), from: requester.id, now: t0 + 1)
    requester.read(from: hub, now: t0 + 1)
    other.read(from: hub, now: t0 + 1)
    viewer.read(from: hub, now: t0 + 1)
    let ack = try #require(requester.last("ack"))
    #expect(ack["id"] as? Int == 5)
    let key = try #require(ack["key"] as? String)
    #expect(key.count == 32 && key != old)
    #expect(requester.messages.filter { $0["type"] as? String == "snapshot" }.count == 1)
    #expect(other.messages.map { $0["type"] as? String } == ["snapshot", "snapshot"])
    #expect(other.last("snapshot")?["role"] as? String == "viewer")
    #expect(other.last("snapshot")?["key"] == nil)
    #expect(viewer.messages.filter { $0["type"] as? String == "snapshot" }.count == 1)
    #expect(hub.stats.commands["rotate_key"]?["ok"] == 1)

    hub.receive(message(#"{"op":"start","id":6}"#), from: other.id, now: t0 + 2)
    other.read(from: hub, now: t0 + 2)
    #expect(other.last("error")?["code"] as? String == "forbidden")
    var stale = FakeViewer(id: hub.join("s", key: old, now: t0 + 3))
    var fresh = FakeViewer(id: hub.join("s", key: key, now: t0 + 3))
    stale.read(from: hub, now: t0 + 3)
    fresh.read(from: hub, now: t0 + 3)
    #expect(stale.messages.first?["role"] as? String == "viewer")
    #expect(fresh.messages.first?["role"] as? String == "controller")
    hub.receive(message(#"{"op":"auth","key":"\#(old)","id":7}"#), from: other.id, now: t0 + 4)
    other.read(from: hub, now: t0 + 4)
    #expect(other.last("error")?["code"] as? String == "forbidden")
    hub.receive(message(#"{"op":"start","id":8}"#), from: requester.id, now: t0 + 5)
    requester.read(from: hub, now: t0 + 5)
    #expect(requester.last("ack")?["id"] as? Int == 8)
  }

  /// `rotate_key` is a `bad_request` in open mode and `forbidden` from a viewer.
  @Test func rotationNeedsAController() throws {
    let open = Hub(config: HubConfig())
    var anyone = FakeViewer(id: open.join("o", now: t0))
    open.receive(message(#"{"op":"rotate_key","id":1}"#), from: anyone.id, now: t0)
    anyone.read(from: open, now: t0)
    #expect(anyone.last("error")?["code"] as? String == "bad_request")
    #expect(anyone.last("error")?["id"] as? Int == 1)

    let (hub, _, key) = try keyed()
    var viewer = FakeViewer(id: hub.join("s", now: t0))
    hub.receive(message(#"{"op":"rotate_key","id":2}"#), from: viewer.id, now: t0)
    viewer.read(from: hub, now: t0)
    #expect(viewer.last("error")?["code"] as? String == "forbidden")
    var holder = FakeViewer(id: hub.join("s", key: key, now: t0))
    holder.read(from: hub, now: t0)
    #expect(holder.messages.first?["role"] as? String == "controller")
    #expect(hub.stats.commands["rotate_key"]?["forbidden"] == 1)
  }

  /// A rotation goes through the store like any command: the new hash is saved, and commands behind it run once it is durable.
  @Test func rotationIsStored() throws {
    let store = RecordingStore()
    let (hub, creator, old) = try keyed(sequencer: LocalSequencer(store: store))
    var requester = creator
    hub.receive(message(#"{"op":"rotate_key","id":1}"#), from: requester.id, now: t0)
    hub.receive(message(#"{"op":"start","seconds":30,"id":2}"#), from: requester.id, now: t0)
    let rotation = try #require(store.saves.last)
    #expect(store.saves.count == 2)  // the session's creation, then the rotation
    #expect(rotation.keyHash != KeyHash(of: old))
    store.complete(hub, now: t0 + 1)
    requester.read(from: hub, now: t0 + 1)
    let key = try #require(requester.last("ack")?["key"] as? String)
    #expect(rotation.keyHash == KeyHash(of: key))
    // The start waited behind the rotation and carries the new hash to the store.
    #expect(store.saves.count == 3)
    #expect(store.saves.last?.keyHash == KeyHash(of: key))
    store.complete(hub, now: t0 + 2)
    requester.read(from: hub, now: t0 + 2)
    #expect(requester.last("ack")?["id"] as? Int == 2)
    #expect(hub.state(of: "s")?.state.phase == .running)
  }

  /// A key changed elsewhere demotes every controller here that holds another key, and only those.
  @Test func keyChangedDemotesOtherKeys() {
    let hub = Hub(config: HubConfig(control: .key))
    hub.restore(
      [StoredSession(id: "s", record: SessionRecord(), keyHash: KeyHash(of: "old"))], now: t0)
    var a = FakeViewer(id: hub.join("s", key: "old", now: t0))
    var viewer = FakeViewer(id: hub.join("s", now: t0))
    a.read(from: hub, now: t0)
    viewer.read(from: hub, now: t0)
    hub.apply(.keyChanged(session: "s", keyHash: KeyHash(of: "new")), now: t0 + 1)
    hub.apply(.keyChanged(session: "absent", keyHash: KeyHash(of: "new")), now: t0 + 1)
    var b = FakeViewer(id: hub.join("s", key: "new", now: t0 + 1))
    a.read(from: hub, now: t0 + 1)
    viewer.read(from: hub, now: t0 + 1)
    b.read(from: hub, now: t0 + 1)
    #expect(a.messages.compactMap { $0["role"] as? String } == ["controller", "viewer"])
    #expect(viewer.messages.filter { $0["type"] as? String == "snapshot" }.count == 1)
    #expect(b.messages.first?["role"] as? String == "controller")
    hub.apply(.keyChanged(session: "s", keyHash: KeyHash(of: "new")), now: t0 + 2)
    b.read(from: hub, now: t0 + 2)
    #expect(b.messages.filter { $0["type"] as? String == "snapshot" }.count == 1)
    hub.receive(message(#"{"op":"start","id":1}"#), from: a.id, now: t0 + 3)
    hub.receive(message(#"{"op":"start","id":2}"#), from: b.id, now: t0 + 3)
    a.read(from: hub, now: t0 + 3)
    b.read(from: hub, now: t0 + 3)
    #expect(a.last("error")?["code"] as? String == "forbidden")
    #expect(b.last("ack")?["id"] as? Int == 2)
  }

  /// The requester stays the controller even when the change feed reports its rotation before the sequencer does.
  @Test func requesterKeepsControlWhenTheFeedComesFirst() throws {
    let sequencer = HeldSequencer()
    let (hub, creator, _) = try keyed(sequencer: sequencer)
    var requester = creator
    hub.receive(message(#"{"op":"rotate_key","id":1}"#), from: requester.id, now: t0)
    guard case .rotateKey(let hash)? = sequencer.held.first?.command else {
      Issue.record("no rotation held: \(sequencer.held)")
      return
    }
    hub.apply(.keyChanged(session: "s", keyHash: hash), now: t0 + 1)
    requester.read(from: hub, now: t0 + 1)
    #expect(requester.last("snapshot")?["role"] as? String == "viewer")
    sequencer.release(hub, now: t0 + 2)
    requester.read(from: hub, now: t0 + 2)
    let key = try #require(requester.last("ack")?["key"] as? String)
    #expect(KeyHash(of: key) == hash)
    #expect(requester.last("snapshot")?["role"] as? String == "controller")
    #expect(requester.last("snapshot")?["key"] as? String == key)
    hub.receive(message(#"{"op":"pause","id":2}"#), from: requester.id, now: t0 + 3)
    #expect(sequencer.held.count == 1)
  }

  /// Key mode, a cluster: a pause pipelined by a joiner while the session loads, then `loaded` with another key: `forbidden`, never sequenced.
  @Test func pauseBeforeLoadedWithAnotherKeyIsForbidden() {
    let sequencer = HeldSequencer()
    sequencer.load = .loading
    let hub = Hub(config: HubConfig(control: .key), sequencer: sequencer)
    var joiner = FakeViewer(id: hub.join("s", key: "guess", now: t0))
    var authed = FakeViewer(id: hub.join("s", now: t0))
    hub.receive(message(#"{"op":"pause","id":1}"#), from: joiner.id, now: t0)
    hub.receive(message(#"{"op":"auth","key":"guess","id":2}"#), from: authed.id, now: t0)
    hub.receive(message(#"{"op":"cancel","id":3}"#), from: authed.id, now: t0)
    guard
      case .success(let running) = SessionRecord().applying(
        .start(.seconds(60), finishedLabel: nil), at: t0 - 1000)
    else { return }
    hub.apply(.loaded(session: "s", record: running, keyHash: KeyHash(of: "host")), now: t0 + 5)
    joiner.read(from: hub, now: t0 + 5)
    authed.read(from: hub, now: t0 + 5)
    #expect(sequencer.held.isEmpty)
    #expect(joiner.messages.first?["role"] as? String == "viewer")
    #expect(joiner.last("error")?["id"] as? Int == 1)
    #expect(joiner.last("error")?["code"] as? String == "forbidden")
    let errors = authed.messages.filter { $0["type"] as? String == "error" }
    #expect(errors.map { $0["id"] as? Int } == [2, 3])
    #expect(errors.map { $0["code"] as? String } == ["forbidden", "forbidden"])
    #expect(hub.state(of: "s")?.state.phase == .running)
    #expect(hub.stats.commands["pause"]?["forbidden"] == 1)
  }

  /// The same pipelined pause with the session's own key goes on, carrying the hash of the key presented.
  @Test func pauseBeforeLoadedWithTheKeyGoesOn() {
    let sequencer = HeldSequencer()
    sequencer.load = .loading
    let hub = Hub(config: HubConfig(control: .key), sequencer: sequencer)
    var host = FakeViewer(id: hub.join("s", key: "host", now: t0))
    hub.receive(message(#"{"op":"pause","id":1}"#), from: host.id, now: t0)
    hub.apply(.loaded(session: "s", record: nil, keyHash: KeyHash(of: "host")), now: t0 + 5)
    #expect(sequencer.held.count == 1)
    #expect(sequencer.held.first?.presentedKeyHash == KeyHash(of: "host"))
    #expect(sequencer.held.first?.keyHash == KeyHash(of: "host"))
    host.read(from: hub, now: t0 + 5)
    #expect(host.messages.first?["role"] as? String == "controller")
    #expect(host.messages.first?["key"] as? String == "host")
  }

  /// A joiner that creates a loading session here with a key keeps control whichever key the session turns out to have: the one it was made, or its own.
  @Test func creatorWithAKeyKeepsControlEitherWay() throws {
    for sessionIsNew in [true, false] {
      let sequencer = HeldSequencer()
      sequencer.load = .loading
      let hub = Hub(config: HubConfig(control: .key), sequencer: sequencer)
      var host = FakeViewer(id: hub.join("s", key: "host", now: t0))
      let made = try #require(sequencer.created.first?.1)
      #expect(made != KeyHash(of: "host"))
      let keyHash = sessionIsNew ? made : KeyHash(of: "host")
      hub.apply(.loaded(session: "s", record: nil, keyHash: keyHash), now: t0 + 5)
      host.read(from: hub, now: t0 + 5)
      #expect(host.messages.count == 1)
      #expect(host.messages.first?["role"] as? String == "controller")
      let shown = try #require(host.messages.first?["key"] as? String)
      #expect(KeyHash(of: shown) == keyHash)
      hub.receive(message(#"{"op":"start","id":1}"#), from: host.id, now: t0 + 6)
      #expect(sequencer.held.first?.presentedKeyHash == keyHash)
    }
  }

  /// A command queued behind a rotation from a controller holding the old key is `forbidden`; one from a controller that left, holding the current key, still runs.
  @Test func commandsBehindARotationAreCheckedWhenSentOn() throws {
    let sequencer = HeldSequencer()
    let (hub, creator, old) = try keyed(sequencer: sequencer)
    var other = FakeViewer(id: hub.join("s", key: old, now: t0))
    let leaver = hub.join("s", key: old, now: t0)
    hub.receive(message(#"{"op":"start","seconds":60,"id":1}"#), from: creator.id, now: t0)
    hub.receive(message(#"{"op":"adjust","seconds":5,"id":2}"#), from: leaver, now: t0)
    hub.disconnect(leaver, now: t0)
    hub.receive(message(#"{"op":"rotate_key","id":3}"#), from: creator.id, now: t0)
    hub.receive(message(#"{"op":"pause","id":4}"#), from: other.id, now: t0)
    sequencer.release(hub, now: t0 + 1)  // the start
    #expect(sequencer.held.first?.command == .adjust(seconds: 5))
    #expect(sequencer.held.first?.presentedKeyHash == KeyHash(of: old))
    sequencer.release(hub, now: t0 + 2)  // the adjust
    sequencer.release(hub, now: t0 + 3)  // the rotation
    other.read(from: hub, now: t0 + 3)
    #expect(sequencer.held.isEmpty)
    #expect(other.last("error")?["id"] as? Int == 4)
    #expect(other.last("error")?["code"] as? String == "forbidden")
    #expect(hub.record(of: "s")?.phase == .running)
    #expect(hub.record(of: "s")?.duration == 65)
  }
}

/// A store that keeps every write and completes a ticketed one only when the test says.
final class RecordingStore: SessionStore {
  var saves: [(session: String, record: SessionRecord, keyHash: KeyHash?, ticket: Ticket?)] = []
  private var unfinished: [(Ticket, SessionRecord)] = []

  func write(_ write: StoreWrite) {
    guard case .save(let session, let record, let keyHash, let ticket, _) = write else { return }
    saves.append((session, record, keyHash, ticket))
    if let ticket { unfinished.append((ticket, record)) }
  }

  /// Makes the oldest ticketed write durable.
  func complete(_ hub: Hub, now: Int64) {
    let (ticket, record) = unfinished.removeFirst()
    hub.complete(ticket, .applied(record), now: now)
  }
}

/// What one client address may cost: running sessions, and replies waiting on a connection.
@Suite struct AddressLimitTests {
  let t0: Int64 = 1_700_000_000_000

  func message(_ json: String) -> [UInt8] { Array(json.utf8) }

  /// Joins `session` from `peer` and sends a start: the reply's type and code.
  func start(
    _ hub: Hub, _ session: String, from peer: String, seconds: Int = 60, now: Int64
  ) -> (ConnectionID, String?) {
    var viewer = FakeViewer(id: hub.join(session, peer: peer, now: now))
    hub.receive(message(#"{"op":"start","seconds":\#(seconds),"id":1}"#), from: viewer.id, now: now)
    viewer.read(from: hub, now: now)
    let answer = viewer.messages.last { $0["id"] as? Int == 1 }
    return (viewer.id, answer?["code"] as? String ?? answer?["type"] as? String)
  }

  /// Past its cap an address's start is `too_many_sessions`; another address is unaffected; a cancel, a finish or a forget frees a place.
  @Test func runningSessionsPerAddressAreCapped() {
    let hub = Hub(config: HubConfig(maxSessionsPerAddress: 3))
    let a = "198.51.100.7"
    var started: [ConnectionID] = []
    for index in 0..<3 {
      let (id, answer) = start(hub, "a\(index)", from: a, seconds: 10 + index, now: t0)
      #expect(answer == "ack")
      started.append(id)
    }
    #expect(start(hub, "a3", from: a, now: t0).1 == "too_many_sessions")
    #expect(hub.state(of: "a3")?.state.phase == .idle)
    #expect(start(hub, "b0", from: "2001:db8::1", now: t0).1 == "ack")
    // A paused run still counts; a cancelled one does not.
    hub.receive(message(#"{"op":"pause"}"#), from: started[2], now: t0 + 1)
    #expect(start(hub, "a4", from: a, now: t0 + 1).1 == "too_many_sessions")
    hub.receive(message(#"{"op":"cancel"}"#), from: started[1], now: t0 + 2)
    #expect(start(hub, "a5", from: a, now: t0 + 2).1 == "ack")
    #expect(start(hub, "a6", from: a, now: t0 + 2).1 == "too_many_sessions")
    // The 10 s run finishes: a place again.
    run(hub, until: t0 + 10_000)
    #expect(hub.state(of: "a0")?.state.phase == .finished)
    #expect(start(hub, "a7", from: a, now: t0 + 10_000).1 == "ack")
    #expect(hub.stats.commands["start"]?["too_many_sessions"] == 3)
  }

  /// A wait holds its address's place as a run does, a wait past the cap is
  /// `too_many_sessions`, and a done, a timeout or a cancel frees the place; a
  /// waiting session with no viewers is never forgotten.
  @Test func waitingSessionsHoldTheirAddressPlace() {
    let hub = Hub(config: HubConfig(maxSessionsPerAddress: 2))
    let a = "198.51.100.9"
    func wait(_ session: String, _ fields: String = "", now: Int64) -> (ConnectionID, String?) {
      var viewer = FakeViewer(id: hub.join(session, peer: a, now: now))
      hub.receive(message(#"{"op":"wait","id":1\#(fields)}"#), from: viewer.id, now: now)
      viewer.read(from: hub, now: now)
      let answer = viewer.messages.last { $0["id"] as? Int == 1 }
      return (viewer.id, answer?["code"] as? String ?? answer?["type"] as? String)
    }
    let (first, answer) = wait("w0", #","timeoutSeconds":5"#, now: t0)
    #expect(answer == "ack")
    let (second, _) = wait("w1", now: t0)
    #expect(hub.state(of: "w1")?.state.phase == .waiting)
    #expect(wait("w2", now: t0).1 == "too_many_sessions")
    #expect(start(hub, "w3", from: a, now: t0).1 == "too_many_sessions")
    hub.disconnect(first, now: t0)
    hub.disconnect(second, now: t0)
    // Long after any idle expiry, the wait without a timeout is still there.
    run(hub, until: t0 + 10 * SessionConfig().idleExpiryMs)
    #expect(hub.state(of: "w1")?.state.phase == .waiting)
    // The 5 s one timed out (and, with nobody watching, was forgotten): one place again.
    #expect(hub.state(of: "w0")?.state.phase != .waiting)
    #expect(wait("w4", now: t0 + 10 * SessionConfig().idleExpiryMs).1 == "ack")
    #expect(hub.stats.commands["wait"]?["too_many_sessions"] == 1)
  }

  /// A paused session forgotten after its expiry frees its place, and an address nobody holds any more is gone from the table.
  @Test func forgottenSessionsFreeTheirPlace() {
    let hub = Hub(
      config: HubConfig(session: SessionConfig(pausedExpiryMs: 5000), maxSessionsPerAddress: 1))
    let (id, answer) = start(hub, "p", from: "198.51.100.8", now: t0)
    #expect(answer == "ack")
    hub.receive(message(#"{"op":"pause"}"#), from: id, now: t0 + 1)
    hub.disconnect(id, now: t0 + 1)
    #expect(hub.addresses.count == 1)
    let (refused, code) = start(hub, "q", from: "198.51.100.8", now: t0 + 2)
    #expect(code == "too_many_sessions")
    hub.disconnect(refused, now: t0 + 2)
    run(hub, until: t0 + 1 + 5000)
    #expect(hub.state(of: "p") == nil)
    #expect(hub.addresses.count == 0)
    #expect(start(hub, "r", from: "198.51.100.8", now: t0 + 6000).1 == "ack")
  }

  /// Advances the hub through every wake-up up to `end`.
  func run(_ hub: Hub, until end: Int64) {
    while let due = hub.nextWakeup, due <= end { hub.advance(now: due) }
  }

  /// Starts still with the sequencer count too, so a burst of starts cannot overshoot the cap; a failed one frees its place.
  @Test func startsInFlightCount() {
    let sequencer = HeldSequencer()
    let hub = Hub(config: HubConfig(maxSessionsPerAddress: 2), sequencer: sequencer)
    var viewers = (0..<3).map { FakeViewer(id: hub.join("s\($0)", peer: "198.51.100.9", now: t0)) }
    for viewer in viewers {
      hub.receive(message(#"{"op":"start","id":1}"#), from: viewer.id, now: t0)
    }
    #expect(sequencer.held.count == 2)
    viewers[2].read(from: hub, now: t0)
    #expect(viewers[2].last("error")?["code"] as? String == "too_many_sessions")
    let first = sequencer.held.removeFirst()
    hub.complete(first.ticket, .unavailable("disk full"), now: t0 + 1)
    // The one that left still holds its address's place while its start is held.
    hub.disconnect(viewers[1].id, now: t0 + 1)
    hub.receive(message(#"{"op":"start","id":2}"#), from: viewers[2].id, now: t0 + 2)
    #expect(sequencer.held.count == 2)
    hub.receive(message(#"{"op":"start","id":3}"#), from: viewers[0].id, now: t0 + 3)
    viewers[0].read(from: hub, now: t0 + 3)
    #expect(viewers[0].last("error")?["code"] as? String == "too_many_sessions")
    sequencer.release(hub, now: t0 + 4)
    sequencer.release(hub, now: t0 + 4)
    #expect(hub.state(of: "s1")?.state.phase == .running)
    #expect(hub.state(of: "s2")?.state.phase == .running)
    #expect(hub.addresses.sessions(of: hub.connectionAddresses[Int(viewers[0].id)]) == 2)
  }

  /// A connection that sends but never reads has at most 16 KiB of replies waiting; the rest are dropped and counted.
  @Test func repliesWaitingAreCappedInBytes() {
    let hub = Hub(config: HubConfig(commandsPerSecond: 1000))
    var reader = FakeViewer(id: hub.join("s", now: t0))
    let silent = hub.join("s", now: t0)
    let long = String(repeating: "x", count: 4000)
    for index in 0..<400 {
      let body = index % 2 == 0 ? #"{"op":"\#(long)","id":\#(index)}"# : #"{"op":"cancel"}"#
      hub.receive(message(body), from: silent, now: t0)
    }
    var bytes = 0
    var replies = 0
    while let frame = hub.nextFrame(for: silent, now: t0) {
      if frame.starts(with: Array(#"{"type":"error""#.utf8)) {
        bytes += frame.count
        replies += 1
      }
    }
    #expect(bytes <= Hub.maxPendingReplyBytes)
    #expect(bytes > Hub.maxPendingReplyBytes / 2)
    #expect(hub.stats.repliesDropped == UInt64(400 - replies))
    #expect(hub.pendingReplyBytes[silent] == nil)
    // Once read, the connection is answered again, and others never were limited.
    hub.receive(message(#"{"op":"pause","id":"after"}"#), from: silent, now: t0 + 1)
    #expect(
      hub.nextFrame(for: silent, now: t0 + 1).map { String(decoding: $0, as: UTF8.self) }?
        .contains(#""id":"after""#) == true)
    hub.receive(message(#"{"op":"pause","id":"r"}"#), from: reader.id, now: t0 + 1)
    reader.read(from: hub, now: t0 + 1)
    #expect(reader.last("error")?["id"] as? String == "r")
  }
}

/// A keyed session stays with its host while the host may come back.
@Suite struct KeptControlTests {
  let t0: Int64 = 1_700_000_000_000
  let day: Int64 = 86_400_000

  func run(_ hub: Hub, until end: Int64) {
    while let due = hub.nextWakeup, due <= end { hub.advance(now: due) }
  }

  /// Key mode: an idle session its host left is kept 24 h, not `--forget-after`: a visitor meanwhile is a viewer and the host's key still controls; after, the id is new.
  @Test func idleKeyedSessionIsKeptADay() throws {
    let sequencer = HeldSequencer()
    let hub = Hub(
      config: HubConfig(session: SessionConfig(idleExpiryMs: 1000), control: .key),
      sequencer: sequencer)
    var host = FakeViewer(id: hub.join("s", now: t0))
    host.read(from: hub, now: t0)
    let key = try #require(host.messages.first?["key"] as? String)
    hub.disconnect(host.id, now: t0)
    run(hub, until: t0 + day - 1)
    #expect(sequencer.forgotten.isEmpty)
    var visitor = FakeViewer(id: hub.join("s", now: t0 + day - 1))
    visitor.read(from: hub, now: t0 + day - 1)
    #expect(visitor.messages.first?["role"] as? String == "viewer")
    #expect(visitor.messages.first?["key"] == nil)
    var back = FakeViewer(id: hub.join("s", key: key, now: t0 + day - 1))
    back.read(from: hub, now: t0 + day - 1)
    #expect(back.messages.first?["role"] as? String == "controller")
    hub.disconnect(visitor.id, now: t0 + day)
    hub.disconnect(back.id, now: t0 + day)
    // The day counts from the last viewer's leaving.
    run(hub, until: t0 + 2 * day - 1)
    #expect(hub.state(of: "s") != nil)
    run(hub, until: t0 + 2 * day)
    #expect(sequencer.forgotten == ["s"])
    var next = FakeViewer(id: hub.join("s", key: key, now: t0 + 2 * day))
    next.read(from: hub, now: t0 + 2 * day)
    #expect(next.messages.first?["role"] as? String == "controller")
    #expect(next.messages.first?["key"] as? String != key)
  }

  /// Key mode: a running or paused session is never forgotten; in open mode a paused one goes after 24 h, an idle one after `--forget-after`.
  @Test func keyedRunsAreNeverForgotten() throws {
    for control in [ControlMode.key, .open] {
      let hub = Hub(config: HubConfig(session: SessionConfig(idleExpiryMs: 1000), control: control))
      for session in ["paused", "running", "idle"] {
        var viewer = FakeViewer(id: hub.join(session, now: t0))
        if session != "idle" {
          hub.receive(Array(#"{"op":"start","seconds":86400}"#.utf8), from: viewer.id, now: t0)
        }
        if session == "paused" {
          hub.receive(Array(#"{"op":"pause"}"#.utf8), from: viewer.id, now: t0 + 1)
        }
        viewer.read(from: hub, now: t0 + 1)
        hub.disconnect(viewer.id, now: t0 + 1)
      }
      run(hub, until: t0 + day / 2)
      #expect(hub.state(of: "running")?.state.phase == .running, "\(control)")
      #expect(hub.state(of: "paused")?.state.phase == .paused, "\(control)")
      #expect((hub.state(of: "idle") != nil) == (control == .key), "\(control)")
      // The run finished at one day, and is then kept as an idle one is.
      run(hub, until: t0 + day + day / 2)
      #expect((hub.state(of: "running") != nil) == (control == .key), "\(control)")
      run(hub, until: t0 + 3 * day)
      #expect(hub.state(of: "running") == nil, "\(control)")
      #expect((hub.state(of: "paused") != nil) == (control == .key), "\(control)")
    }
  }

  /// Key mode: since a keyed session is kept a day, the sessions one address creates are capped too; joining existing ones is not.
  @Test func sessionsCreatedPerAddressAreCapped() {
    let hub = Hub(config: HubConfig(maxSessionsPerAddress: 2, control: .key))
    let a = "198.51.100.10"
    for session in ["a0", "a1"] {
      hub.disconnect(hub.join(session, peer: a, now: t0), now: t0)
    }
    #expect(hub.connect(session: "a2", peer: a, now: t0) == .refused(.tooManySessions))
    #expect(hub.state(of: "a2") == nil)
    let other = hub.join("b0", peer: "198.51.100.11", now: t0)
    let joiner = hub.join("a0", peer: a, now: t0)
    #expect(other >= 0 && joiner >= 0)
    hub.disconnect(joiner, now: t0)
    run(hub, until: t0 + day)
    #expect(hub.state(of: "a0") == nil)
    #expect(hub.join("a2", peer: a, now: t0 + day) >= 0)

    let open = Hub(config: HubConfig(maxSessionsPerAddress: 1))
    for session in ["o0", "o1", "o2"] {
      open.disconnect(open.join(session, peer: a, now: t0), now: t0)
    }
    #expect(open.sessionCount == 3)
  }
}
