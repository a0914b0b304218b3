import Foundation
import Testing

@testable import CountdownCore

/// A client as the page is one: it applies the snapshot and merge patches it receives.
struct FakeViewer {
  let id: ConnectionID
  var state: [String: Any] = [:]
  var seq: UInt64 = 0
  var messages: [[String: Any]] = []

  /// Reads everything the hub has for this viewer, as a socket that is always writable would.
  mutating func read(from hub: Hub, now: Int64) {
    while let frame = hub.nextFrame(for: id, now: now) {
      guard let parsed = try? JSONSerialization.jsonObject(with: Data(frame)),
        let message = parsed as? [String: Any]
      else {
        Issue.record("not a JSON object: \(String(decoding: frame, as: UTF8.self))")
        continue
      }
      messages.append(message)
      switch message["type"] as? String {
      case "snapshot":
        state = message["state"] as! [String: Any]
        seq = (message["seq"] as! NSNumber).uint64Value
      case "patch":
        for (key, value) in message["patch"] as! [String: Any] {
          // RFC 7396: null removes the member.
          state[key] = value is NSNull ? nil : value
        }
        seq = (message["seq"] as! NSNumber).uint64Value
      default: break
      }
    }
  }

  /// The state with null and absent treated alike, for comparing with a snapshot.
  var normalized: NSDictionary {
    var copy = state
    copy = copy.filter { !($0.value is NSNull) }
    return copy as NSDictionary
  }

  func last(_ type: String) -> [String: Any]? {
    messages.last { $0["type"] as? String == type }
  }
}

@Suite struct HubTests {
  /// Every viewer carries its hub slot, so its layout is budgeted: the
  /// fields are ordered to leave no padding, and nothing per-config is copied
  /// into it.
  @Test func viewerSlotStaysSmall() {
    #expect(Hub.connectionSlotBytes <= 69, "\(Hub.connectionSlotBytes) bytes per viewer")
  }

  let t0: Int64 = 1_700_000_000_000

  func start(_ seconds: Int, id: Int = 1) -> [UInt8] {
    Array(#"{"op":"start","seconds":\#(seconds),"id":\#(id)}"#.utf8)
  }

  /// Three viewers of one session receive the same patch stream from one start.
  @Test func threeViewersSameStream() {
    let hub = Hub(config: HubConfig())
    var viewers = (0..<3).map { _ in FakeViewer(id: hub.join("a", now: t0)) }
    for index in viewers.indices { viewers[index].read(from: hub, now: t0) }
    let offset = viewers.map(\.messages.count)
    hub.receive(start(3), from: viewers[0].id, now: t0 + 500)
    var now = t0 + 500
    while let due = hub.nextWakeup, now < t0 + 10_000 {
      for index in viewers.indices { viewers[index].read(from: hub, now: now) }
      now = due
      hub.advance(now: now)
    }
    for index in viewers.indices { viewers[index].read(from: hub, now: now) }
    func patches(_ viewer: FakeViewer, from start: Int) -> [NSDictionary] {
      viewer.messages[start...].filter { $0["type"] as? String == "patch" }
        .map { $0 as NSDictionary }
    }
    let reference = patches(viewers[0], from: offset[0])
    #expect(reference.count == 4)  // start, 2, 1, finish
    #expect(patches(viewers[1], from: offset[1]) == reference)
    #expect(patches(viewers[2], from: offset[2]) == reference)
    #expect(viewers[1].state["label"] as? String == "Countdown finished")
    #expect(viewers[0].last("ack")?["seq"] as? Int == 2)
  }

  /// A viewer joining mid-run gets a snapshot equal to what an early viewer built from patches.
  @Test func midRunSnapshotMatchesAppliedPatches() {
    let hub = Hub(config: HubConfig())
    var early = FakeViewer(id: hub.join("s", now: t0))
    hub.receive(start(5), from: early.id, now: t0)
    hub.advance(now: t0 + 1000)
    hub.advance(now: t0 + 2000)
    early.read(from: hub, now: t0 + 2000)
    var late = FakeViewer(id: hub.join("s", now: t0 + 2100))
    late.read(from: hub, now: t0 + 2100)
    early.read(from: hub, now: t0 + 2100)
    #expect(late.messages.first?["type"] as? String == "snapshot")
    #expect(late.seq == early.seq)
    #expect(late.normalized == early.normalized)
    #expect(late.state["label"] as? String == "3")
  }

  /// Two viewers of one countdown of `seconds`; the fast one reads every one of
  /// `ticks` ticks, the slow one nothing until the end. Returns both, and the
  /// patches the slow one then received.
  private func lagging(seconds: Int, ticks: Int) -> (
    fast: FakeViewer, slow: FakeViewer, patches: [[String: Any]]
  ) {
    let hub = Hub(config: HubConfig())
    var fast = FakeViewer(id: hub.join("s", now: t0))
    var slow = FakeViewer(id: hub.join("s", now: t0))
    fast.read(from: hub, now: t0)
    slow.read(from: hub, now: t0)
    hub.receive(start(seconds), from: fast.id, now: t0)
    for second in 1...ticks {
      hub.advance(now: t0 + Int64(second) * 1000)
      fast.read(from: hub, now: t0 + Int64(second) * 1000)
    }
    let before = slow.messages.count
    slow.read(from: hub, now: t0 + Int64(ticks) * 1000)
    let patches = slow.messages[before...].filter { $0["type"] as? String == "patch" }
    return (fast, slow, Array(patches))
  }

  /// A viewer that reads nothing for many ticks gets one merged patch that yields the true state.
  @Test func slowViewerGetsOneMergedPatch() {
    let (fast, slow, patches) = lagging(seconds: 10, ticks: 7)
    #expect(patches.count == 1)
    #expect(slow.seq == fast.seq)
    #expect(slow.normalized == fast.normalized)
    #expect(slow.state["remaining"] as? Int == 3)
  }

  /// A viewer further behind than the merge window gets one patch of every field, still the true state.
  @Test func viewerBeyondMergeWindowGetsWholeState() {
    let ticks = SessionStateMachine.mergeWindow + 4
    let (fast, slow, patches) = lagging(seconds: 30, ticks: ticks)
    #expect(patches.count == 1)
    let fields = (patches.first?["patch"] as? [String: Any]).map { Set($0.keys) }
    #expect(
      fields == [
        "phase", "spinner", "enabled", "label", "remaining", "duration", "endsAt", "viewers",
        "remainingMs", "stale", "startedAt", "timeoutAt", "outcome", "level", "overSince", "overMs",
        "overtime", "warnAtSeconds", "dangerAtSeconds", "message", "blackout",
      ])
    #expect(slow.seq == fast.seq)
    #expect(slow.normalized == fast.normalized)
    #expect(slow.state["remaining"] as? Int == 30 - ticks)
  }

  /// The patch a command causes reaches its sender before the ack naming its seq.
  @Test func ackFollowsItsPatch() {
    let hub = Hub(config: HubConfig())
    var viewer = FakeViewer(id: hub.join("s", now: t0))
    viewer.read(from: hub, now: t0)
    hub.receive(start(2, id: 9), from: viewer.id, now: t0)
    viewer.read(from: hub, now: t0)
    let types = viewer.messages.map { $0["type"] as! String }
    #expect(types == ["snapshot", "patch", "ack"])
    #expect(viewer.messages[2]["seq"] as? Int == viewer.messages[1]["seq"] as? Int)
    #expect(viewer.messages[2]["id"] as? Int == 9)
  }

  /// Bad input gets its error code; the session and the other viewers are untouched.
  @Test func errorsLeaveSessionUnharmed() {
    let hub = Hub(config: HubConfig())
    var sender = FakeViewer(id: hub.join("s", now: t0))
    var other = FakeViewer(id: hub.join("s", now: t0))
    sender.read(from: hub, now: t0)
    other.read(from: hub, now: t0)
    let seq = other.seq
    hub.receive(Array("nope".utf8), from: sender.id, now: t0)
    hub.receive(Array(#"{"op":"cancel","id":"c"}"#.utf8), from: sender.id, now: t0)
    hub.receive(start(5), from: sender.id, now: t0)
    hub.receive(start(5, id: 2), from: sender.id, now: t0 + 10)
    sender.read(from: hub, now: t0 + 10)
    other.read(from: hub, now: t0 + 10)
    let codes = sender.messages.compactMap { $0["code"] as? String }
    #expect(codes == ["bad_json", "not_running", "busy"])
    #expect(other.seq == seq + 1)
    #expect(other.messages.filter { $0["type"] as? String == "error" }.isEmpty)
  }

  /// A ping is answered on its own connection only, without touching the session.
  @Test func pingIsPrivate() {
    let hub = Hub(config: HubConfig(), epoch: "e1")
    var pinger = FakeViewer(id: hub.join("s", now: t0))
    var other = FakeViewer(id: hub.join("s", now: t0))
    pinger.read(from: hub, now: t0)
    other.read(from: hub, now: t0)
    let seq = other.seq
    hub.receive(Array(#"{"op":"ping","t":5}"#.utf8), from: pinger.id, now: t0 + 300)
    pinger.read(from: hub, now: t0 + 310)
    other.read(from: hub, now: t0 + 310)
    #expect(pinger.last("pong")?["serverTime"] as? Int64 == t0 + 310)
    #expect(pinger.last("pong")?["t"] as? Int == 5)
    #expect(other.last("pong") == nil)
    #expect(other.seq == seq)
    #expect(pinger.messages.first?["epoch"] as? String == "e1")
  }

  /// Every server start has its own epoch.
  @Test func epochsDiffer() {
    #expect(Hub(config: HubConfig()).epoch != Hub(config: HubConfig()).epoch)
    #expect(Hub.randomEpoch().count == 16)
  }

  /// Sessions are independent, and the default seconds apply when a start names none.
  @Test func sessionsAreIndependent() {
    let hub = Hub(config: HubConfig(session: SessionConfig(defaultSeconds: 7)))
    var a = FakeViewer(id: hub.join("a", now: t0))
    var b = FakeViewer(id: hub.join("b", now: t0))
    hub.receive(Array(#"{"op":"start"}"#.utf8), from: a.id, now: t0)
    a.read(from: hub, now: t0)
    b.read(from: hub, now: t0)
    #expect(a.state["remaining"] as? Int == 7)
    #expect(b.state["phase"] as? String == "idle")
    #expect(hub.sessionCount == 2)
  }

  /// An idle session without viewers is forgotten after 60 s; a running one is kept.
  @Test func quietSessionsAreForgotten() {
    let hub = Hub(config: HubConfig())
    let idle = hub.join("idle", now: t0)
    let busy = hub.join("busy", now: t0)
    hub.receive(start(300), from: busy, now: t0)
    hub.disconnect(idle, now: t0 + 1)
    hub.disconnect(busy, now: t0 + 1)
    var now = t0
    while let due = hub.nextWakeup, due <= t0 + 61_000 {
      now = due
      hub.advance(now: now)
    }
    #expect(hub.state(of: "idle") == nil)
    #expect(hub.state(of: "busy")?.state.phase == .running)
    #expect(hub.sessionCount == 1)
    #expect(hub.connectionCount == 0)
  }

  /// Viewer counts follow joins and leaves, and a viewer's slot is reused safely.
  @Test func viewerCountsFollowConnections() {
    let hub = Hub(config: HubConfig())
    let first = hub.join("s", now: t0)
    let second = hub.join("s", now: t0 + 300)
    hub.disconnect(first, now: t0 + 600)
    var viewer = FakeViewer(id: second)
    viewer.read(from: hub, now: t0 + 600)
    #expect(viewer.state["viewers"] as? Int == 1)
    let third = hub.join("s", now: t0 + 900)
    #expect(third == first)  // the slot was reused
    viewer.read(from: hub, now: t0 + 900)
    #expect(viewer.state["viewers"] as? Int == 2)
  }

  /// drainWritable names every viewer of a session that changed, and the hub is then quiet.
  @Test func drainNamesChangedViewers() {
    let hub = Hub(config: HubConfig())
    let a = hub.join("s", now: t0)
    let b = hub.join("s", now: t0)
    let c = hub.join("other", now: t0)
    var named = Set<ConnectionID>()
    hub.drainWritable { named.insert($0) }
    #expect(named == [a, b, c])
    for id in [a, b, c] { while hub.nextFrame(for: id, now: t0) != nil {} }
    named = []
    hub.receive(start(3), from: a, now: t0 + 1)
    hub.drainWritable { named.insert($0) }
    #expect(named == [a, b])
    #expect(!hub.hasPending(c))
  }
}

extension Hub {
  /// Joins a session that must accept the viewer.
  func join(
    _ session: String, key: String? = nil, peer: String = "192.0.2.1", now: Int64,
    sourceLocation: SourceLocation = #_sourceLocation
  ) -> ConnectionID {
    let outcome = connect(session: session, key: key, peer: peer, now: now)
    guard case .joined(let id) = outcome else {
      Issue.record("join refused: \(outcome)", sourceLocation: sourceLocation)
      return -1
    }
    return id
  }
}

/// A sequencer that holds every command until the test lets it through, as a
/// store does until its commit: the seam's own contract, tested without disk.
final class HeldSequencer: CommandSequencer {
  var held: [SequenceRequest] = []
  var forgotten: [String] = []
  var created: [(String, KeyHash?)] = []
  /// What `created` answers: `.loading` plays a cluster that fetches state.
  var load = SessionLoad.ready

  func sequence(_ request: SequenceRequest) -> SequenceResult {
    held.append(request)
    return .pending
  }
  func created(session: String, record: SessionRecord, keyHash: KeyHash?) -> SessionLoad {
    created.append((session, keyHash))
    return load
  }
  func forgot(session: String) { forgotten.append(session) }

  /// Completes the oldest held command as the local rules decide.
  func release(_ hub: Hub, now: Int64) {
    let request = held.removeFirst()
    switch request.current.applying(request.command, at: request.now) {
    case .success(let record): hub.complete(request.ticket, .applied(record), now: now)
    case .failure(let code): hub.complete(request.ticket, .rejected(code), now: now)
    }
  }
}

@Suite struct CommandPathTests {
  let t0: Int64 = 1_700_000_000_000

  func command(_ json: String) -> [UInt8] { Array(json.utf8) }

  /// Viewers never see a held command's patch; the session keeps ticking meanwhile; patch then ack.
  @Test func heldCommandIsInvisibleUntilComplete() {
    let sequencer = HeldSequencer()
    let hub = Hub(config: HubConfig(), sequencer: sequencer)
    var a = FakeViewer(id: hub.join("s", now: t0))
    var b = FakeViewer(id: hub.join("s", now: t0))
    hub.receive(command(#"{"op":"start","seconds":10,"id":1}"#), from: a.id, now: t0)
    a.read(from: hub, now: t0)
    #expect(a.state["phase"] as? String == "idle")
    #expect(sequencer.held.count == 1)
    sequencer.release(hub, now: t0 + 5)
    a.read(from: hub, now: t0 + 5)
    b.read(from: hub, now: t0 + 5)
    #expect(b.state["phase"] as? String == "running")
    #expect(b.state["endsAt"] as? Int64 == t0 + 10_000)
    // Pause is held while the run ticks on.
    hub.receive(command(#"{"op":"pause","id":2}"#), from: a.id, now: t0 + 900)
    hub.advance(now: t0 + 1000)
    b.read(from: hub, now: t0 + 1000)
    #expect(b.state["remaining"] as? Int == 9)
    #expect(b.state["phase"] as? String == "running")
    sequencer.release(hub, now: t0 + 1100)
    a.read(from: hub, now: t0 + 1100)
    b.read(from: hub, now: t0 + 1100)
    // The record was made at the command's own time, not at the completion's.
    #expect(b.state["remainingMs"] as? Int64 == 9100)
    let types = a.messages.suffix(2).map { $0["type"] as? String }
    #expect(types == ["patch", "ack"])
    #expect(a.last("ack")?["seq"] as? UInt64 == a.seq)
    #expect(hub.stats.commands["pause"]?["ok"] == 1)
  }

  /// An unavailable store answers `unavailable` and leaves the session as it was.
  @Test func unavailableChangesNothing() {
    let sequencer = HeldSequencer()
    let hub = Hub(config: HubConfig(), sequencer: sequencer)
    var a = FakeViewer(id: hub.join("s", now: t0))
    a.read(from: hub, now: t0)
    let seq = a.seq
    hub.receive(command(#"{"op":"start","id":"x"}"#), from: a.id, now: t0)
    let request = sequencer.held.removeFirst()
    hub.complete(request.ticket, .unavailable("disk full"), now: t0 + 1)
    a.read(from: hub, now: t0 + 1)
    #expect(a.seq == seq)
    #expect(a.last("error")?["code"] as? String == "unavailable")
    #expect(a.last("error")?["id"] as? String == "x")
    #expect(hub.record(of: "s")?.phase == .idle)
    #expect(hub.stats.commands["start"]?["unavailable"] == 1)
  }

  /// Commands on one session wait behind the one in flight and run in order against its result.
  @Test func commandsQueueInOrder() {
    let sequencer = HeldSequencer()
    let hub = Hub(config: HubConfig(), sequencer: sequencer)
    var a = FakeViewer(id: hub.join("s", now: t0))
    hub.receive(command(#"{"op":"start","seconds":60,"id":1}"#), from: a.id, now: t0)
    hub.receive(command(#"{"op":"start","seconds":60,"id":2}"#), from: a.id, now: t0 + 1)
    hub.receive(command(#"{"op":"adjust","seconds":60,"id":3}"#), from: a.id, now: t0 + 2)
    #expect(sequencer.held.count == 1)
    sequencer.release(hub, now: t0 + 3)
    #expect(sequencer.held.count == 1)
    sequencer.release(hub, now: t0 + 4)
    sequencer.release(hub, now: t0 + 5)
    a.read(from: hub, now: t0 + 5)
    let answers = a.messages.filter {
      $0["type"] as? String != "patch" && $0["type"] as? String != "snapshot"
    }
    #expect(answers.map { $0["id"] as? Int } == [1, 2, 3])
    #expect(answers.map { $0["type"] as? String } == ["ack", "error", "ack"])
    #expect(answers[1]["code"] as? String == "busy")
    #expect(hub.record(of: "s")?.duration == 120)
    #expect(hub.stats.commandsInFlight == 0)
  }

  /// A late ack never reaches a new connection that took the closed one's slot.
  @Test func lateAckSkipsReusedSlot() {
    let sequencer = HeldSequencer()
    let hub = Hub(config: HubConfig(), sequencer: sequencer)
    let keeper = hub.join("s", now: t0)
    let leaver = hub.join("s", now: t0)
    hub.receive(command(#"{"op":"start","id":1}"#), from: leaver, now: t0)
    hub.disconnect(leaver, now: t0)
    var newcomer = FakeViewer(id: hub.join("s", now: t0))
    #expect(newcomer.id == leaver)
    sequencer.release(hub, now: t0 + 1)
    newcomer.read(from: hub, now: t0 + 1)
    #expect(newcomer.last("ack") == nil)
    #expect(newcomer.state["phase"] as? String == "running")
    _ = keeper
  }

  /// A forgotten session is reported to the sequencer, and phase counts follow every session.
  @Test func forgetAndPhaseCounts() {
    let sequencer = HeldSequencer()
    let hub = Hub(config: HubConfig(), sequencer: sequencer)
    let a = hub.join("s", now: t0)
    hub.receive(command(#"{"op":"start","seconds":5}"#), from: a, now: t0)
    sequencer.release(hub, now: t0)
    #expect(hub.stats.sessionsByPhase == [0, 1, 0, 0, 0, 0])
    hub.disconnect(a, now: t0)
    for second in 1...5 { hub.advance(now: t0 + Int64(second) * 1000) }
    #expect(hub.stats.sessionsByPhase == [0, 0, 0, 1, 0, 0])
    hub.advance(now: t0 + 5000 + SessionConfig().idleExpiryMs)
    #expect(sequencer.forgotten == ["s"])
    #expect(hub.stats.sessionsByPhase == [0, 0, 0, 0, 0, 0])
    #expect(hub.stats.sessionsCreated == 1 && hub.stats.sessionsForgotten == 1)
    #expect(hub.stats.tickLatenessMs.count == 5)
  }

  /// Restored sessions resume their phase; in key mode the stored hash still admits the key.
  @Test func restoreWithKey() {
    let hub = Hub(config: HubConfig(control: .key))
    guard
      case .success(let record) = SessionRecord().applying(
        .start(.seconds(60), finishedLabel: nil), at: t0)
    else {
      Issue.record("start refused")
      return
    }
    hub.restore(
      [StoredSession(id: "s", record: record, keyHash: KeyHash(of: "secret"))], now: t0 + 2000)
    var controller = FakeViewer(id: hub.join("s", key: "secret", now: t0 + 2000))
    var viewer = FakeViewer(id: hub.join("s", key: "wrong", now: t0 + 2000))
    controller.read(from: hub, now: t0 + 2000)
    viewer.read(from: hub, now: t0 + 2000)
    #expect(controller.messages.first?["role"] as? String == "controller")
    #expect(controller.messages.first?["key"] as? String == "secret")
    #expect(viewer.messages.first?["role"] as? String == "viewer")
    #expect(controller.state["remaining"] as? Int == 58)
    hub.advance(now: t0 + 2999)
    controller.read(from: hub, now: t0 + 2999)
    #expect(controller.state["remaining"] as? Int == 58)
    hub.advance(now: t0 + 3000)
    controller.read(from: hub, now: t0 + 3000)
    #expect(controller.state["remaining"] as? Int == 57)
  }
}

@Suite struct LoadingTests {
  let t0: Int64 = 1_700_000_000_000

  /// A session whose state is fetched elsewhere shows nothing and runs no command until it arrives.
  @Test func viewersWaitForTheLoadedState() {
    let sequencer = HeldSequencer()
    sequencer.load = .loading
    let hub = Hub(config: HubConfig(), sequencer: sequencer)
    var a = FakeViewer(id: hub.join("s", now: t0))
    hub.receive(Array(#"{"op":"pause","id":1}"#.utf8), from: a.id, now: t0)
    a.read(from: hub, now: t0)
    #expect(a.messages.isEmpty)
    #expect(!hub.hasPending(a.id))
    #expect(sequencer.held.isEmpty)
    guard
      case .success(let running) = SessionRecord().applying(
        .start(.seconds(60), finishedLabel: nil), at: t0 - 10_000)
    else { return }
    hub.apply(.loaded(session: "s", record: running, keyHash: nil), now: t0 + 5)
    var names: [ConnectionID] = []
    hub.drainWritable { names.append($0) }
    #expect(names.contains(a.id))
    a.read(from: hub, now: t0 + 5)
    #expect(a.messages.first?["type"] as? String == "snapshot")
    #expect(a.state["endsAt"] as? Int64 == t0 + 50_000)
    // The waiting pause went to the sequencer against the loaded record.
    #expect(sequencer.held.count == 1)
    #expect(sequencer.held.first?.current.phase == .running)
  }

  /// A viewer that created a keyed session here, while another instance holds its key, is a viewer.
  @Test func losingTheKeyRaceMakesAViewer() {
    let sequencer = HeldSequencer()
    sequencer.load = .loading
    let hub = Hub(config: HubConfig(control: .key), sequencer: sequencer)
    var a = FakeViewer(id: hub.join("s", now: t0))
    var early = FakeViewer(id: hub.join("s", key: "elsewhere", now: t0))
    hub.apply(.loaded(session: "s", record: nil, keyHash: KeyHash(of: "elsewhere")), now: t0)
    a.read(from: hub, now: t0)
    early.read(from: hub, now: t0)
    #expect(early.messages.first?["role"] as? String == "controller")
    #expect(a.messages.first?["role"] as? String == "viewer")
    #expect(a.messages.first?["key"] == nil)
    hub.receive(Array(#"{"op":"start","id":1}"#.utf8), from: a.id, now: t0)
    a.read(from: hub, now: t0)
    #expect(a.last("error")?["code"] as? String == "forbidden")
    var b = FakeViewer(id: hub.join("s", key: "elsewhere", now: t0))
    b.read(from: hub, now: t0)
    #expect(b.messages.first?["role"] as? String == "controller")
  }

  /// A newer record from another instance is adopted; an older one is not.
  @Test func remoteRecordsByRevision() {
    let hub = Hub(config: HubConfig())
    var a = FakeViewer(id: hub.join("s", now: t0))
    guard
      case .success(let first) = SessionRecord().applying(
        .start(.seconds(60), finishedLabel: nil), at: t0),
      case .success(let second) = first.applying(.pause, at: t0 + 1000)
    else { return }
    hub.apply(.adopted(session: "s", record: second), now: t0 + 1000)
    hub.apply(.adopted(session: "s", record: first), now: t0 + 1001)
    a.read(from: hub, now: t0 + 1001)
    #expect(a.state["phase"] as? String == "paused")
    #expect(a.state["remainingMs"] as? Int64 == 59_000)
    hub.apply(.adopted(session: "absent", record: second), now: t0)
    #expect(hub.state(of: "absent") == nil)
  }
}

@Suite struct StaleTests {
  /// An instance that cannot confirm state tells every viewer of every session, once.
  @Test func staleReachesEveryViewerOnce() {
    let t0: Int64 = 1_700_000_000_000
    let hub = Hub(config: HubConfig())
    var a = FakeViewer(id: hub.join("a", now: t0))
    var b = FakeViewer(id: hub.join("b", now: t0))
    a.read(from: hub, now: t0)
    b.read(from: hub, now: t0)
    #expect(a.state["stale"] as? Bool == false)
    hub.apply(.stale(true), now: t0 + 1)
    hub.apply(.stale(true), now: t0 + 2)
    a.read(from: hub, now: t0 + 2)
    b.read(from: hub, now: t0 + 2)
    #expect(a.state["stale"] as? Bool == true)
    #expect(b.state["stale"] as? Bool == true)
    #expect(a.messages.filter { $0["type"] as? String == "patch" }.count == 1)
    hub.apply(.stale(false), now: t0 + 3)
    a.read(from: hub, now: t0 + 3)
    #expect(a.state["stale"] as? Bool == false)
  }
}
