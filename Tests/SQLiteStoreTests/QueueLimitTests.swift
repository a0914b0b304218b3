import CountdownCore
import Testing

@testable import SQLiteStore

@Suite struct QueueLimitTests {
  static let record = SessionRecord(.running(endsAt: 61_000), duration: 60, updatedAt: 1000)

  /// With the writer held in a commit (a stalled disk), a command's write past the limit is
  /// answered unavailable at once through onCompleted; writes without a ticket get as much
  /// room again and are then dropped, counted; once the writer moves, writes are taken again.
  @Test(.timeLimit(.minutes(1))) func refusesPastTheLimit() throws {
    let directory = try TemporaryDirectory()
    defer { directory.remove() }
    let store = try SQLiteStore.open(path: directory.file("countdown.db"), queueLimit: 4)
    defer { store.close() }
    let completions = Completions()
    store.onCompleted = completions.handler
    let gate = Guarded((entered: false, released: false))
    store.queue.update { queue in
      queue.beforeCommit = {
        gate.update { $0.entered = true }
        gate.wait(until: { $0.released }) { _ in }
      }
    }
    store.write(save("s0", Self.record, ticket: 0))
    gate.wait(until: { $0.entered }) { _ in }
    // One write in the held commit, three queued: the limit of four.
    for index in 1...3 { store.write(save("s\(index)", Self.record, ticket: UInt64(index))) }
    store.write(save("s4", Self.record, ticket: 4))
    let refused = completions.wait(for: 1)
    #expect(refused.map(\.ticket) == [Ticket(4)])
    guard case .unavailable(let message) = refused.first?.outcome else {
      Issue.record("s4 was not refused: \(refused)")
      return
    }
    #expect(message.contains("4 writes behind"))

    for index in 5...8 { store.write(save("u\(index)", Self.record, ticket: nil)) }
    store.write(.delete(session: "s0"))
    let stats = store.stats
    #expect(stats.writesRefused == 1)
    #expect(stats.writesDropped == 1)
    #expect(stats.queueDepth == 7)
    #expect(stats.batchInProgress == 1)
    #expect(stats.queueLimit == 4)

    gate.update { $0.released = true }
    let answered = completions.wait(for: 5)
    #expect(answered.dropFirst().map(\.ticket) == (0...3).map { Ticket($0) })
    #expect(answered.dropFirst().allSatisfy { $0.outcome == .applied(Self.record) })
    store.write(save("s9", Self.record, ticket: 9))
    #expect(completions.wait(for: 6).last?.outcome == .applied(Self.record))
    // The refused write was never stored; the dropped deletion left s0 in place.
    let ids = try store.load().sessions.map(\.id)
    #expect(ids == ["s0", "s1", "s2", "s3", "s9", "u5", "u6", "u7", "u8"])
  }
}
