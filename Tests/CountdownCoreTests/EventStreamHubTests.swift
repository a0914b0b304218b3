import Foundation
import Testing

@testable import CountdownCore

@Suite struct EventStreamHubTests {
  let t0: Int64 = 1_700_000_000_000

  func joined(_ outcome: JoinOutcome) -> ConnectionID {
    guard case .joined(let id) = outcome else {
      Issue.record("join refused: \(outcome)")
      return -1
    }
    return id
  }

  func seq(of frame: [UInt8]) -> UInt64? {
    let object = try? JSONSerialization.jsonObject(with: Data(frame)) as? [String: Any]
    return (object?["seq"] as? NSNumber)?.uint64Value
  }

  /// `nextEvent` names each frame's kind and the seq it carries: the snapshot,
  /// then a patch per tick, and a slow reader's catch-up as one merged patch;
  /// an ack is a reply, which an event stream skips.
  @Test func kindsAndSeqs() {
    let hub = Hub(config: HubConfig())
    let id = joined(hub.connect(session: "s", peer: "192.0.2.1", now: t0))
    let snapshot = hub.nextEvent(for: id, now: t0)
    #expect(snapshot?.kind == .snapshot)
    #expect(snapshot.map { seq(of: $0.frame) == $0.seq } == true)
    hub.receive(Array(#"{"op":"start","seconds":5,"id":1}"#.utf8), from: id, now: t0)
    var kinds: [Hub.FrameKind] = []
    while let event = hub.nextEvent(for: id, now: t0) {
      kinds.append(event.kind)
      if event.kind != .reply { #expect(seq(of: event.frame) == event.seq) }
    }
    #expect(kinds == [.patch, .reply])
    for second in 1...3 { hub.advance(now: t0 + Int64(second) * 1000) }
    let merged = hub.nextEvent(for: id, now: t0 + 3000)
    #expect(merged?.kind == .patch)
    #expect(merged.map { seq(of: $0.frame) == $0.seq } == true)
    #expect(hub.nextEvent(for: id, now: t0 + 3000) == nil, "three ticks behind: one merged patch")
  }

  /// In key mode a viewer-only joiner is never shown a key, even when it
  /// created the session; the first joiner that may control gets it, once.
  @Test func viewerOnlyLeavesTheKeyToTheNextJoiner() {
    let hub = Hub(config: HubConfig(control: .key))
    let stream = joined(hub.connect(session: "k", peer: "192.0.2.1", now: t0, viewerOnly: true))
    let first = hub.nextEvent(for: stream, now: t0).map {
      String(decoding: $0.frame, as: UTF8.self)
    }
    #expect(first?.contains(#""role":"viewer""#) == true && first?.contains(#""key""#) == false)
    let page = joined(hub.connect(session: "k", peer: "192.0.2.1", now: t0))
    let shown = hub.nextEvent(for: page, now: t0).map { String(decoding: $0.frame, as: UTF8.self) }
    #expect(shown?.contains(#""role":"controller""#) == true)
    let other = joined(hub.connect(session: "k", peer: "192.0.2.1", now: t0))
    let second = hub.nextEvent(for: other, now: t0).map {
      String(decoding: $0.frame, as: UTF8.self)
    }
    #expect(second?.contains(#""role":"viewer""#) == true)
  }
}
