import Foundation
import Testing

@testable import CountdownCore

extension HoldingStore {
  /// Completes every ticketed write still waiting, oldest first.
  func completeAll(_ hub: Hub, now: Int64) {
    while hasUnfinished { complete(hub, now: now) }
  }

  /// Every event written so far, in order, whatever write carried it.
  var events: [WebhookEvent] {
    writes.flatMap { write -> [WebhookEvent] in
      switch write {
      case .save(_, _, _, _, let events), .remember(_, _, _, let events): events
      case .finish(_, _, let event): [event]
      case .delete: []
      }
    }
  }

  /// The finishes no command caused, with the record each finished from.
  var finishes: [(session: String, record: SessionRecord, event: WebhookEvent)] {
    writes.compactMap { write in
      if case .finish(let session, let record, let event) = write {
        return (session, record, event)
      }
      return nil
    }
  }
}

@Suite struct WebhookRecordingTests {
  let t0: Int64 = 1_700_000_000_000

  func hub(_ store: HoldingStore, recordsEvents: Bool = true) -> Hub {
    Hub(
      config: HubConfig(recordsEvents: recordsEvents), sequencer: LocalSequencer(store: store))
  }

  func send(
    _ hub: Hub, _ store: HoldingStore, _ json: String, from id: ConnectionID, now: Int64
  ) {
    hub.receive(Array(json.utf8), from: id, now: now)
    store.completeAll(hub, now: now)
    while hub.nextFrame(for: id, now: now) != nil {}
  }

  func body(_ event: WebhookEvent) throws -> [String: Any] {
    try #require(try JSONSerialization.jsonObject(with: Data(event.body)) as? [String: Any])
  }

  func outcome(_ event: WebhookEvent) throws -> String? {
    (try body(event)["data"] as? [String: Any])?["outcome"] as? String
  }

  /// With webhooks off, neither a command nor a run that elapses records an event.
  @Test func nothingIsRecordedWhenOff() {
    let store = HoldingStore()
    let hub = hub(store, recordsEvents: false)
    let id = hub.join("s", now: t0)
    send(hub, store, #"{"op":"start","seconds":5}"#, from: id, now: t0)
    hub.advance(now: t0 + 5000)
    #expect(hub.record(of: "s")?.phase == .finished)
    #expect(store.writes.count == 1)
    #expect(store.events.isEmpty)
  }

  /// Each command that changes the session records its own event in the same write as its record; a refused one records nothing.
  @Test func eachCommandRecordsItsEventWithItsRecord() throws {
    let store = HoldingStore()
    let hub = hub(store)
    let id = hub.join("s", now: t0)
    let commands: [(String, WebhookEventType?)] = [
      (#"{"op":"start","seconds":60}"#, .started),
      (#"{"op":"pause"}"#, .paused),
      (#"{"op":"pause"}"#, nil),
      (#"{"op":"resume"}"#, .resumed),
      (#"{"op":"adjust","seconds":30}"#, .adjusted),
      (#"{"op":"cancel"}"#, .cancelled),
      (#"{"op":"wait","label":"Deploying","timeoutSeconds":900}"#, .waiting),
      (#"{"op":"done","label":"Deployed"}"#, .finished),
      (#"{"op":"wait"}"#, .waiting),
      (#"{"op":"fail"}"#, .finished),
      (#"{"op":"start","seconds":60}"#, .started),
      (#"{"op":"adjust","seconds":-60}"#, .finished),
    ]
    for (step, (json, _)) in commands.enumerated() {
      send(hub, store, json, from: id, now: t0 + Int64(step) * 1000)
    }
    #expect(store.events.map(\.type) == commands.compactMap(\.1))
    // Every event rode on the save of the record it reports.
    for write in store.writes {
      guard case .save(let session, let record, _, _, let events) = write else { continue }
      #expect(events.count == 1)
      #expect(events.first?.seq == record.seq)
      #expect(events.first?.session == session)
    }
    let finishes = store.events.filter { $0.type == .finished }
    #expect(try finishes.map(outcome) == ["done", "failed", "elapsed"])
    #expect(store.finishes.isEmpty)
  }

  /// A keyed command's event is remembered in the same write as its answer; a remembered refusal carries none.
  @Test func keyedCommandRecordsItsEventWithItsAnswer() {
    let store = HoldingStore()
    let hub = hub(store)
    let id = hub.join("s", now: t0)
    hub.submit(.start(.seconds(60), finishedLabel: nil), idempotencyKey: "k1", from: id, now: t0)
    store.completeAll(hub, now: t0)
    hub.submit(.resume, idempotencyKey: "k2", from: id, now: t0 + 1)
    store.completeAll(hub, now: t0 + 1)
    let remembered = store.writes.compactMap { write -> [WebhookEvent]? in
      if case .remember(_, _, _, let events) = write { return events }
      return nil
    }
    #expect(remembered.map { $0.map(\.type) } == [[.started], []])
  }

  /// A run that elapses is recorded once, at its deadline, from the running record, with outcome elapsed; later ticks record nothing more.
  @Test func elapsedRunIsRecordedOnce() throws {
    let store = HoldingStore()
    let hub = hub(store)
    let id = hub.join("s", now: t0)
    send(hub, store, #"{"op":"start","seconds":3,"finishedLabel":"Go"}"#, from: id, now: t0)
    let running = try #require(hub.record(of: "s"))
    for step in 1...6 { hub.advance(now: t0 + Int64(step) * 700) }
    let finishes = store.finishes
    try #require(finishes.count == 1)
    #expect(finishes[0].session == "s")
    #expect(finishes[0].record.status == .running(endsAt: t0 + 3000))
    #expect(finishes[0].record.revision == running.revision)
    #expect(finishes[0].event.timestamp == t0 + 3000)
    #expect(finishes[0].event.type == .finished)
    #expect(try outcome(finishes[0].event) == "elapsed")
    #expect(hub.record(of: "s")?.phase == .finished)
  }

  /// A wait past its timeout is recorded once with outcome timeout, and a wait without one never finishes by itself.
  @Test func timedOutWaitIsRecordedOnce() throws {
    let store = HoldingStore()
    let hub = hub(store)
    let a = hub.join("a", now: t0)
    let b = hub.join("b", now: t0)
    send(hub, store, #"{"op":"wait","timeoutSeconds":2}"#, from: a, now: t0)
    send(hub, store, #"{"op":"wait"}"#, from: b, now: t0)
    for step in 1...10 { hub.advance(now: t0 + Int64(step) * 500) }
    let finishes = store.finishes
    try #require(finishes.count == 1)
    #expect(finishes[0].session == "a")
    #expect(finishes[0].event.timestamp == t0 + 2000)
    #expect(try outcome(finishes[0].event) == "timeout")
  }

  /// At start-up a run or wait whose deadline passed while the server was down is recorded then, at its deadline; one still to come, or paused, is not.
  @Test func restoreRecordsDeadlinesPassedWhileDown() throws {
    let store = HoldingStore()
    let hub = hub(store)
    let down = t0 + 60_000
    hub.restore(
      [
        StoredSession(
          id: "gone", record: SessionRecord(.running(endsAt: t0 + 5000), duration: 5, seq: 4),
          keyHash: nil),
        StoredSession(
          id: "timed-out",
          record: SessionRecord(.waiting(startedAt: t0, timeoutAt: t0 + 9000), seq: 2),
          keyHash: nil),
        StoredSession(
          id: "later",
          record: SessionRecord(.running(endsAt: down + 5000), duration: 70, seq: 9),
          keyHash: nil),
        StoredSession(
          id: "paused", record: SessionRecord(.paused(remainingMs: 1000), seq: 1), keyHash: nil),
        StoredSession(
          id: "done", record: SessionRecord(.finished(.done), seq: 3), keyHash: nil),
      ], now: down)
    #expect(store.finishes.map(\.session) == ["gone", "timed-out"])
    #expect(store.finishes.map(\.event.timestamp) == [t0 + 5000, t0 + 9000])
    #expect(try store.finishes.map { try outcome($0.event) } == ["elapsed", "timeout"])
    #expect(store.finishes[0].record.status == .running(endsAt: t0 + 5000))
    // Restored finished, the first two never finish again; the third does, once.
    for step in 1...8 { hub.advance(now: down + Int64(step) * 1000) }
    #expect(store.finishes.map(\.session) == ["gone", "timed-out", "later"])
  }

  /// A start sequenced just past a deadline the hub's timer has not reached carries the old run's finish in its own write, and the hub's late finish then names the replaced revision, which the store skips.
  @Test func commandPastAnUnseenDeadlineCarriesTheFinish() throws {
    let store = HoldingStore()
    let hub = hub(store)
    let id = hub.join("s", now: t0)
    send(hub, store, #"{"op":"start","seconds":2}"#, from: id, now: t0)
    let running = try #require(hub.record(of: "s"))
    hub.receive(Array(#"{"op":"start","seconds":10}"#.utf8), from: id, now: t0 + 2005)
    guard case .save(_, let record, _, _, let events) = try #require(store.writes.last) else {
      Issue.record("not a save: \(String(describing: store.writes.last))")
      return
    }
    #expect(events.map(\.type) == [.finished, .started])
    #expect(events.first?.timestamp == t0 + 2000)
    #expect(try outcome(events[0]) == "elapsed")
    #expect(record.revision == running.revision + 1)
    // The timer fires while the start is still being stored.
    hub.advance(now: t0 + 2006)
    #expect(store.finishes.map(\.record.revision) == [running.revision])
    store.completeAll(hub, now: t0 + 2007)
    #expect(hub.record(of: "s")?.status == .running(endsAt: t0 + 12_005))
  }

  /// A start whose write is durable only after its own deadline is adopted finished, and that finish is recorded once, from the start's record, at its deadline.
  @Test func runStoredPastItsDeadlineIsRecordedOnAdoption() throws {
    let store = HoldingStore()
    let hub = hub(store)
    let id = hub.join("s", now: t0)
    hub.receive(Array(#"{"op":"start","seconds":1}"#.utf8), from: id, now: t0)
    hub.advance(now: t0 + 1200)
    #expect(store.finishes.isEmpty)
    store.completeAll(hub, now: t0 + 1500)
    #expect(hub.record(of: "s")?.phase == .finished)
    for step in 1...4 { hub.advance(now: t0 + 1500 + Int64(step) * 500) }
    let finishes = store.finishes
    try #require(finishes.count == 1)
    #expect(finishes[0].record.status == .running(endsAt: t0 + 1000))
    #expect(finishes[0].record.revision == 1)
    #expect(finishes[0].event.timestamp == t0 + 1000)
    #expect(store.events.map(\.type) == [.started, .finished])
  }

  /// A key rotation, even on a finished session, records no event.
  @Test func keyRotationRecordsNothing() {
    let store = HoldingStore()
    let hub = Hub(
      config: HubConfig(control: .key, recordsEvents: true),
      sequencer: LocalSequencer(store: store))
    let id = hub.join("s", now: t0)
    while hub.nextFrame(for: id, now: t0) != nil {}
    send(hub, store, #"{"op":"wait"}"#, from: id, now: t0)
    send(hub, store, #"{"op":"done"}"#, from: id, now: t0 + 1)
    send(hub, store, #"{"op":"rotate_key"}"#, from: id, now: t0 + 2)
    #expect(hub.record(of: "s")?.revision == 3)
    #expect(store.events.map(\.type) == [.waiting, .finished])
  }
}
