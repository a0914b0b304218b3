import CountdownCore
import Foundation
import Testing

@testable import SQLiteStore

#if canImport(Glibc)
  import Glibc
#endif

@Suite struct DiskFullTests {
  /// Fills the filesystem under `path` with one file, to the last byte it takes.
  static func fill(_ path: String) -> Bool {
    let descriptor = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
    guard descriptor >= 0 else { return false }
    defer { close(descriptor) }
    let chunk = [UInt8](repeating: 0xAB, count: 4096)
    while chunk.withUnsafeBytes({ write(descriptor, $0.baseAddress, $0.count) }) > 0 {}
    return errno == ENOSPC
  }

  /// On a full disk every ticketed write of the failed batch is answered
  /// `unavailable` and none of it is stored; once space is freed, new writes
  /// succeed and the creations and deletions that failed are stored too.
  @Test(.enabled(if: Tmpfs.canMount, "mounting a tmpfs is refused on this machine"))
  func survivesAFullDisk() throws {
    let mount = try Tmpfs(size: "1m")
    defer { mount.unmount() }
    let path = mount.directory.file("countdown.db")
    let store = try SQLiteStore.open(path: path)
    defer { store.close() }
    let completions = Completions()
    store.onCompleted = completions.handler
    let before = SessionRecord(
      .running(endsAt: 1_796_024_364_226), duration: 60, seq: 1, updatedAt: 1_796_024_304_226)
    store.write(save("talk", before, ticket: 0))
    store.write(save("old", SessionRecord(), ticket: 1))
    #expect(
      completions.wait(for: 2).map(\.outcome) == [.applied(before), .applied(SessionRecord())])

    let filler = mount.directory.file("filler")
    #expect(Self.fill(filler))
    // Big labels need new pages, which a full disk cannot give.
    let label = String(repeating: "x", count: 3000)
    let paused = SessionRecord(.paused(remainingMs: 5000), duration: 60, seq: 2)
    store.write(save("talk", paused, ticket: 2))
    for index in 0..<100 {
      store.write(
        save("big\(index)", SessionRecord(finishedLabel: label), ticket: UInt64(3 + index)))
    }
    store.write(save("created", SessionRecord(), key: KeyHash(of: "k"), ticket: nil))
    store.write(.delete(session: "old"))
    let failed = Array(completions.wait(for: 103).dropFirst(2))
    #expect(failed.count == 101)
    #expect(
      failed.allSatisfy { $0.outcome == .unavailable("the server's disk is full; nothing changed") }
    )
    #expect(store.stats.lastError?.kind == .full)
    #expect(store.stats.failedCommits >= 1)
    // Nothing of the failed writes is visible: "talk" still runs, "old" is there.
    let whileFull = try store.load().sessions
    #expect(whileFull.map(\.id) == ["old", "talk"])
    #expect(whileFull.last?.record == before)

    try FileManager.default.removeItem(atPath: filler)
    let after = SessionRecord(.finished(.elapsed), duration: 60, seq: 3)
    store.write(save("talk", after, ticket: 200))
    #expect(completions.wait(for: 104).last?.outcome == .applied(after))
    let recovered = try store.load().sessions
    #expect(recovered.map(\.id) == ["created", "talk"])
    #expect(recovered.first?.keyHash == KeyHash(of: "k"))
    #expect(recovered.last?.record == after)
    #expect(store.stats.lastError == nil)
    #expect(store.stats.writesKept == 0)
  }
}

@Suite struct ReadOnlyWhileRunningTests {
  /// When the database turns read-only under a running store (here SQLite's
  /// own `query_only`, since a tmpfs with a file open for writing refuses to be
  /// remounted read-only), commands are answered `unavailable` and nothing is
  /// stored; once writable again the next write succeeds and the kept
  /// deletion is applied.
  @Test func recoversWhenWritableAgain() throws {
    let fixture = try Fixture()
    defer { fixture.finish() }
    let (store, completions) = (fixture.store, fixture.completions)
    store.write(save("talk", SessionRecord(seq: 1), ticket: 0))
    store.write(save("old", SessionRecord(), ticket: 1))
    _ = completions.wait(for: 2)

    _ = try store.pragma("query_only = ON")
    store.write(save("talk", SessionRecord(.running(endsAt: 9), seq: 2), ticket: 2))
    store.write(.delete(session: "old"))
    #expect(
      completions.wait(for: 3).last?.outcome
        == .unavailable("the server's storage is read-only; nothing changed"))
    #expect(store.stats.lastError?.kind == .readOnly)
    #expect(try store.load().sessions.map(\.id) == ["old", "talk"])

    _ = try store.pragma("query_only = OFF")
    let after = SessionRecord(.paused(remainingMs: 1), seq: 3)
    store.write(save("talk", after, ticket: 3))
    #expect(completions.wait(for: 4).last?.outcome == .applied(after))
    #expect(try store.load().sessions == [StoredSession(id: "talk", record: after, keyHash: nil)])
  }
}
