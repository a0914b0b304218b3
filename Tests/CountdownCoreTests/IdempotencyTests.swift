import Foundation
import Testing

@testable import CountdownCore

/// A store that keeps every write, and completes ticketed ones only when the
/// test says, as durable or as failed: a disk that takes its time.
final class HoldingStore: SessionStore {
  var writes: [StoreWrite] = []
  private var unfinished: [StoreWrite] = []

  func write(_ write: StoreWrite) {
    writes.append(write)
    switch write {
    case .save(_, _, _, .some, _), .remember: unfinished.append(write)
    case .save, .delete, .finish: break
    }
  }

  var hasUnfinished: Bool { !unfinished.isEmpty }

  var remembered: [IdempotencyEntry] {
    writes.compactMap { if case .remember(let entry, _, _, _) = $0 { entry } else { nil } }
  }

  var waiting: Int { unfinished.count }

  /// Completes the oldest ticketed write: durable, or failed as a full disk.
  func complete(_ hub: Hub, failing: Bool = false, now: Int64) {
    let write = unfinished.removeFirst()
    switch write {
    case .save(_, let record, _, let ticket?, _):
      hub.complete(ticket, failing ? .unavailable("disk full") : .applied(record), now: now)
    case .remember(let entry, _, let ticket, _):
      hub.complete(ticket, failing ? .unavailable("disk full") : entry.answer.outcome, now: now)
    default:
      Issue.record("not a ticketed write: \(write)")
    }
  }
}

@Suite struct IdempotencyTests {
  let t0: Int64 = 1_700_000_000_000

  /// Every frame the hub has for a connection, as text.
  func frames(_ hub: Hub, _ id: ConnectionID, now: Int64) -> [String] {
    var out: [String] = []
    while let frame = hub.nextFrame(for: id, now: now) {
      out.append(String(decoding: frame, as: UTF8.self))
    }
    return out
  }

  /// The answers (acks and errors) among them.
  func answers(_ hub: Hub, _ id: ConnectionID, now: Int64) -> [String] {
    frames(hub, id, now: now).filter {
      $0.hasPrefix(#"{"type":"ack""#) || $0.hasPrefix(#"{"type":"error""#)
    }
  }

  func viewer(_ hub: Hub, _ session: String = "s", now: Int64) -> ConnectionID {
    let id = hub.join(session, now: now)
    _ = frames(hub, id, now: now)
    return id
  }

  /// A retried keyed start gets the first answer's exact bytes, and the session's revision moved once.
  @Test func retryReplaysTheFirstAnswer() throws {
    let hub = Hub(config: HubConfig())
    let id = viewer(hub, now: t0)
    hub.submit(
      .start(.seconds(60), finishedLabel: nil), idempotencyKey: "k-1", from: id, now: t0 + 10)
    let first = answers(hub, id, now: t0 + 10)
    hub.submit(
      .start(.seconds(60), finishedLabel: nil), idempotencyKey: "k-1", from: id, now: t0 + 5000)
    let second = answers(hub, id, now: t0 + 5000)
    #expect(first.count == 1)
    #expect(first == second)
    let ack = try #require(first.first)
    #expect(ack.hasPrefix(#"{"type":"ack","id":null,"seq":"#))
    #expect(ack.contains(#""phase":"running""#))
    #expect(ack.contains(#""endsAt":\#(t0 + 10 + 60_000)"#))
    #expect(hub.record(of: "s")?.revision == 1)
    #expect(hub.stats.commands["start"]?["replayed"] == 1)
    // Without a key the same start is a new command: busy.
    hub.submit(
      .start(.seconds(60), finishedLabel: nil), idempotencyKey: nil, from: id, now: t0 + 6000)
    #expect(answers(hub, id, now: t0 + 6000).first?.contains(#""code":"busy""#) == true)
  }

  /// A key is per session; a key reused for another command is bad_request and applies nothing.
  @Test func keysArePerSessionAndPerCommand() {
    let hub = Hub(config: HubConfig())
    let a = viewer(hub, "a", now: t0)
    let b = viewer(hub, "b", now: t0)
    hub.submit(.start(.seconds(60), finishedLabel: nil), idempotencyKey: "same", from: a, now: t0)
    hub.submit(.start(.seconds(60), finishedLabel: nil), idempotencyKey: "same", from: b, now: t0)
    #expect(hub.record(of: "a")?.revision == 1)
    #expect(hub.record(of: "b")?.revision == 1)
    _ = answers(hub, a, now: t0)
    hub.submit(
      .start(.seconds(61), finishedLabel: nil), idempotencyKey: "same", from: a, now: t0 + 1)
    hub.submit(.pause, idempotencyKey: "same", from: a, now: t0 + 2)
    let refused = answers(hub, a, now: t0 + 2)
    #expect(refused.count == 2)
    #expect(refused.allSatisfy { $0.contains(#""code":"bad_request""#) })
    #expect(hub.record(of: "a")?.phase == .running)
    #expect(hub.record(of: "a")?.revision == 1)
  }

  /// A rules refusal is remembered: the retry is refused the same way after the state changed.
  @Test func refusalIsRemembered() {
    let hub = Hub(config: HubConfig())
    let id = viewer(hub, now: t0)
    hub.submit(.cancel, idempotencyKey: "c", from: id, now: t0)
    let first = answers(hub, id, now: t0)
    #expect(first.first?.contains(#""code":"not_running""#) == true)
    hub.submit(.start(.seconds(60), finishedLabel: nil), idempotencyKey: nil, from: id, now: t0 + 1)
    _ = answers(hub, id, now: t0 + 1)
    hub.submit(.cancel, idempotencyKey: "c", from: id, now: t0 + 2)
    #expect(answers(hub, id, now: t0 + 2) == first)
    #expect(hub.record(of: "s")?.phase == .running)
  }

  /// A key outside 1–255 printable ASCII is refused by the core too, and applies nothing.
  @Test func badKeysAreRefused() {
    let hub = Hub(config: HubConfig())
    let id = viewer(hub, now: t0)
    let bad = [
      "", String(repeating: "k", count: 256), String(repeating: "k", count: 4096), "a\u{0}b",
      "tab\there", "del\u{7F}", "é", "new\nline", "\u{1F600}",
    ]
    for (index, key) in bad.enumerated() {
      let now = t0 + Int64(index)
      hub.submit(.start(.seconds(60), finishedLabel: nil), idempotencyKey: key, from: id, now: now)
      #expect(
        answers(hub, id, now: now).first?.contains(#""code":"bad_request""#) == true,
        "\(key.debugDescription)")
    }
    #expect(hub.record(of: "s")?.revision == 0)
    #expect(IdempotencyKey.isValid(String(repeating: "~", count: 255)))
    #expect(IdempotencyKey.isValid("!"))
    #expect(!IdempotencyKey.isValid(" "))
    #expect(!IdempotencyKey.isValid("a b"))
  }

  /// With a store that completes later, a retry sent while the first is in flight waits and is replayed: one write, the same bytes.
  @Test func concurrentRetryAppliesOnce() {
    let store = HoldingStore()
    let hub = Hub(config: HubConfig(), sequencer: LocalSequencer(store: store))
    let id = viewer(hub, now: t0)
    let start = SessionCommand.start(.seconds(30), finishedLabel: "Go")
    hub.submit(start, idempotencyKey: "twice", from: id, now: t0)
    hub.submit(start, idempotencyKey: "twice", from: id, now: t0 + 1)
    #expect(store.waiting == 1)
    #expect(answers(hub, id, now: t0 + 1).isEmpty)
    store.complete(hub, now: t0 + 20)
    let both = answers(hub, id, now: t0 + 20)
    #expect(both.count == 2)
    #expect(both.first == both.last)
    #expect(store.remembered.count == 1)
    #expect(store.waiting == 0)
    #expect(hub.record(of: "s")?.revision == 1)
  }

  /// The answer is written with the record in one write; a write that failed is forgotten, so the retry applies.
  @Test func failedWriteIsNotRemembered() throws {
    let store = HoldingStore()
    let sequencer = LocalSequencer(store: store)
    let hub = Hub(config: HubConfig(), sequencer: sequencer)
    let id = viewer(hub, now: t0)
    hub.submit(.start(.seconds(30), finishedLabel: nil), idempotencyKey: "k", from: id, now: t0)
    store.complete(hub, failing: true, now: t0 + 5)
    #expect(answers(hub, id, now: t0 + 5).first?.contains(#""code":"unavailable""#) == true)
    #expect(sequencer.answers.count == 0)
    hub.submit(
      .start(.seconds(30), finishedLabel: nil), idempotencyKey: "k", from: id, now: t0 + 10)
    #expect(store.writes.count == 2)
    guard case .remember(let entry, _, _, _) = try #require(store.writes.last) else {
      Issue.record("not a remember write")
      return
    }
    #expect(entry.answer.record?.revision == 1)
    #expect(entry.fingerprint == "start seconds 30 ")
    store.complete(hub, now: t0 + 15)
    #expect(answers(hub, id, now: t0 + 15).first?.hasPrefix(#"{"type":"ack""#) == true)
    #expect(sequencer.answers.count == 1)
    #expect(hub.record(of: "s")?.revision == 1)
  }

  /// A day on, the key is forgotten and a retry is a new command.
  @Test func keysLastADay() {
    let hub = Hub(config: HubConfig())
    let id = viewer(hub, now: t0)
    hub.submit(.cancel, idempotencyKey: "d", from: id, now: t0)
    _ = answers(hub, id, now: t0)
    hub.submit(.start(.seconds(5), finishedLabel: nil), idempotencyKey: "d2", from: id, now: t0)
    _ = answers(hub, id, now: t0)
    let late = t0 + IdempotencyKey.keepMs
    hub.advance(now: late)
    hub.submit(.start(.seconds(5), finishedLabel: nil), idempotencyKey: "d2", from: id, now: late)
    #expect(answers(hub, id, now: late).first?.contains(#""endsAt":\#(late + 5000)"#) == true)
    #expect(hub.record(of: "s")?.revision == 2)
  }

  /// Past a limit (per session, per address, in all) a new key is not
  /// admitted, and nothing already held is dropped for it; a day on, room
  /// comes back as the oldest expire.
  @Test func cacheRefusesPastItsLimitsAndNeverEvicts() {
    var cache = IdempotencyCache(limits: IdempotencyLimits(perSession: 2, perAddress: 3, total: 4))
    func add(_ session: String, _ key: String, from address: String, at: Int64) -> Bool {
      guard cache.admits(session: session, address: address, now: at) else { return false }
      cache.insert(
        IdempotencyEntry(
          session: session, key: key, fingerprint: "cancel", answer: .rejected(.notRunning),
          at: at, address: address), now: at)
      return true
    }
    #expect(add("a", "1", from: "x", at: t0) && add("a", "2", from: "x", at: t0 + 1))
    #expect(!add("a", "3", from: "y", at: t0 + 2), "the session holds its 2")
    #expect(add("b", "1", from: "x", at: t0 + 3))
    #expect(!add("c", "1", from: "x", at: t0 + 4), "the address holds its 3")
    #expect(add("c", "1", from: "y", at: t0 + 5))
    #expect(!add("d", "1", from: "z", at: t0 + 6), "the server holds its 4")
    // Unknown addresses count against the session and the total only.
    #expect(cache.count(ofAddress: "") == 0 && cache.count(ofAddress: "x") == 3)
    for (session, key) in [("a", "1"), ("a", "2"), ("b", "1"), ("c", "1")] {
      #expect(cache.lookup(session: session, key: key, now: t0 + 6) != nil, "\(session) \(key)")
    }
    #expect(cache.count == 4)
    // A failed write's entry goes, and gives its place back.
    cache.remove(session: "c", key: "1")
    #expect(add("d", "1", from: "z", at: t0 + 7))
    // A day after the first key, it alone has gone: one place each.
    let late = t0 + IdempotencyKey.keepMs
    #expect(cache.lookup(session: "a", key: "1", now: late) == nil)
    #expect(add("a", "3", from: "x", at: late))
    #expect(!add("a", "4", from: "x", at: late))
    #expect(cache.lookup(session: "a", key: "2", now: late) != nil)
    // Ten thousand refusals later, the cache holds what it held.
    for n in 0..<10_000 { _ = add("a", "flood\(n)", from: "x", at: late + 1) }
    #expect(cache.count == 4)
  }

  /// From one address on one session, keyed HTTP commands past the session's
  /// limit get rate_limited (429) with the limit named, and are not applied;
  /// another session's earlier key, from another address, still replays its
  /// first answer and is not applied twice.
  @Test func hubRefusesNewKeysPastTheLimit() throws {
    let limits = IdempotencyLimits(perSession: 3, perAddress: 5, total: 100)
    let sequencer = LocalSequencer(answers: IdempotencyCache(limits: limits))
    let hub = Hub(config: HubConfig(), sequencer: sequencer)
    var request: RequestID = 0
    func send(_ body: String, _ session: String, key: String, peer: String, at: Int64)
      -> RequestAnswer?
    {
      request += 1
      hub.command(
        Array(body.utf8), session: session, authority: .none, peer: peer, request: request,
        idempotencyKey: key, now: at)
      var answer: RequestAnswer?
      hub.drainAnswers { answer = $1 }
      return answer
    }
    let first = try #require(
      send(#"{"op":"start","seconds":60}"#, "other", key: "theirs", peer: "192.0.2.9", at: t0))
    #expect(first.code == nil)
    var codes: [String] = []
    for n in 0..<30 {
      let answer = send(
        #"{"op":"cancel"}"#, "flood", key: "k\(n)", peer: "198.51.100.1", at: t0 + Int64(n) * 100)
      codes.append(answer?.code?.rawValue ?? "ack")
    }
    #expect(codes.prefix(3).allSatisfy { $0 == "not_running" })
    #expect(codes.dropFirst(3).allSatisfy { $0 == "rate_limited" })
    #expect(sequencer.answers.count == 4)
    let refused = try #require(
      send(#"{"op":"cancel"}"#, "flood", key: "new", peer: "198.51.100.1", at: t0 + 5000))
    #expect(String(decoding: refused.body, as: UTF8.self).contains("Idempotency-Key"))
    // A retry of a key the session holds is still answered.
    let retried = send(#"{"op":"cancel"}"#, "flood", key: "k1", peer: "198.51.100.1", at: t0 + 5100)
    #expect(retried?.code == .notRunning)
    let replay = try #require(
      send(
        #"{"op":"start","seconds":60}"#, "other", key: "theirs", peer: "192.0.2.9", at: t0 + 6000))
    #expect(replay == first)
    #expect(hub.record(of: "other")?.revision == 1)
  }

  /// A stored entry is input: each field out of range names its damage.
  @Test func entryDamage() {
    let good = IdempotencyEntry(
      session: "s", key: "k", fingerprint: "start seconds 5 ",
      answer: .applied(SessionRecord(revision: 1)),
      at: t0)
    #expect(good.damage == nil)
    var bad = good
    bad.session = "no/slash"
    #expect(bad.damage != nil)
    bad = good
    bad.key = String(repeating: "k", count: 256)
    #expect(bad.damage != nil)
    bad = good
    bad.fingerprint = "launch now"
    #expect(bad.damage != nil)
    for at in [Int64.min, -1, Int64.max, 253_402_300_800_000] {
      bad = good
      bad.at = at
      #expect(bad.damage != nil, "at \(at)")
    }
    bad = good
    bad.answer = .rejected(.unavailable)
    #expect(bad.damage != nil)
    bad = good
    bad.answer = .applied(SessionRecord(duration: -1))
    #expect(bad.damage != nil)
    for address in ["a b", "\u{0}", "é", String(repeating: "f", count: 65)] {
      bad = good
      bad.address = address
      #expect(bad.damage != nil, "address \(address.prefix(8))")
    }
    for address in ["", "?", "198.51.100.7", "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff/128"] {
      bad = good
      bad.address = address
      #expect(bad.damage == nil, "address \(address)")
    }
  }

  /// The answer is a pure function of what is remembered: the same entry renders the same bytes in another hub.
  @Test func answerIsPure() {
    let record = SessionRecord(
      .running(endsAt: t0 + 90_500), duration: 91, finishedLabel: "Done", seq: 7, revision: 3,
      updatedAt: t0)
    let one = Hub(config: HubConfig()).requestAnswer(.applied(record))
    let two = Hub(config: HubConfig()).requestAnswer(.applied(record))
    #expect(one == two)
    let text = String(decoding: one, as: UTF8.self)
    #expect(
      text
        == #"{"type":"ack","id":null,"seq":7,"state":{"phase":"running","spinner":true,"enabled":false,"label":"91","remaining":91,"duration":91,"endsAt":\#(t0 + 90_500),"viewers":0,"remainingMs":null,"stale":false,"startedAt":null,"timeoutAt":null,"outcome":null,"level":"normal","overSince":null,"overMs":null,"overtime":false,"warnAtSeconds":null,"dangerAtSeconds":null,"message":null,"blackout":false}}"#
    )
  }
}

extension IdempotentAnswer {
  var record: SessionRecord? {
    if case .applied(let record) = self { return record }
    return nil
  }
}

extension IdempotencyTests {
  /// A keyed wait is replayed as waiting even after done; a keyed done refused with not_waiting stays refused after a wait.
  @Test func waitingOpsAreRemembered() {
    let hub = Hub(config: HubConfig())
    let id = viewer(hub, now: t0)
    let wait = SessionCommand.wait(label: "Deploying", timeoutSeconds: 900, timeoutLabel: nil)
    hub.submit(wait, idempotencyKey: "w", from: id, now: t0)
    let first = answers(hub, id, now: t0)
    #expect(first.first?.contains(#""phase":"waiting""#) == true)
    hub.submit(.done(label: "Deployed"), idempotencyKey: "d", from: id, now: t0 + 1)
    _ = answers(hub, id, now: t0 + 1)
    hub.submit(wait, idempotencyKey: "w", from: id, now: t0 + 2)
    #expect(answers(hub, id, now: t0 + 2) == first)
    #expect(hub.record(of: "s")?.phase == .finished)
    hub.submit(.fail(label: nil), idempotencyKey: "f", from: id, now: t0 + 3)
    let refused = answers(hub, id, now: t0 + 3)
    #expect(refused.first?.contains(#""code":"not_waiting""#) == true)
    hub.submit(wait, idempotencyKey: nil, from: id, now: t0 + 4)
    _ = answers(hub, id, now: t0 + 4)
    hub.submit(.fail(label: nil), idempotencyKey: "f", from: id, now: t0 + 5)
    #expect(answers(hub, id, now: t0 + 5) == refused)
    #expect(hub.record(of: "s")?.phase == .waiting)
    // Another wait under the key of the first is another command.
    hub.submit(
      .wait(label: "Deploying", timeoutSeconds: 901, timeoutLabel: nil), idempotencyKey: "w",
      from: id, now: t0 + 6)
    #expect(answers(hub, id, now: t0 + 6).first?.contains(#""code":"bad_request""#) == true)
  }
}
