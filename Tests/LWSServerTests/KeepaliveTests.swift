import Testing

@testable import LWSServer

@Suite struct KeepaliveTests {
  let limits = Keepalive.Limits(pingAfter: 20_000, hangUpAfter: 30_000, stuckAfter: 60_000)

  /// Silence past ping-after owes one ping (asked for once), written at the
  /// next writable callback with nothing else to write.
  @Test func pingAfterSilence() {
    var keepalive = Keepalive(now: 1000)
    #expect(keepalive.swept(now: 20_999, limits: limits) == .none)
    #expect(keepalive.swept(now: 21_000, limits: limits) == .requestWritable)
    #expect(keepalive.owesPing)
    #expect(keepalive.swept(now: 22_000, limits: limits) == .none, "one ping per silence")
    #expect(keepalive.nothingElseToWrite() == .ping)
    #expect(!keepalive.owesPing)
    #expect(keepalive.nothingElseToWrite() == .none)
  }

  /// An unanswered ping ends it at hang-up-after; any answer starts the silence over.
  @Test func hangUpOnlyAfterAnUnansweredPing() {
    var keepalive = Keepalive(now: 0)
    // A sweep that comes late (past hang-up-after) pings rather than hangs up.
    #expect(keepalive.swept(now: 45_000, limits: limits) == .requestWritable)
    #expect(keepalive.swept(now: 46_000, limits: limits) == .hangUp)

    var answered = Keepalive(now: 0)
    #expect(answered.swept(now: 20_000, limits: limits) == .requestWritable)
    #expect(answered.heard(now: 25_000) == .none)
    #expect(answered.swept(now: 44_999, limits: limits) == .none)
    #expect(answered.swept(now: 45_000, limits: limits) == .requestWritable)
  }

  /// Waiting to be written past stuck-after hangs up, however lively it is;
  /// a writable callback stops that clock, and the first wait is what counts.
  @Test func hangUpWhenStuck() {
    var keepalive = Keepalive(now: 0)
    #expect(keepalive.waiting(now: 1000) == .requestWritable)
    #expect(keepalive.waiting(now: 50_000) == .requestWritable)
    _ = keepalive.heard(now: 60_000)
    #expect(keepalive.swept(now: 60_999, limits: limits) == .none)
    #expect(keepalive.swept(now: 61_000, limits: limits) == .hangUp)
    #expect(keepalive.writable() == .none)
    #expect(keepalive.swept(now: 61_000, limits: limits) == .none)
    #expect(keepalive.waiting(now: 70_000) == .requestWritable)
    _ = keepalive.heard(now: 125_000)
    #expect(keepalive.swept(now: 129_999, limits: limits) == .none)
    #expect(keepalive.swept(now: 130_000, limits: limits) == .hangUp)
  }

  /// With no hang-up limit (an event stream, whose client cannot answer),
  /// it is owed its comment after each silence and never hung up for it.
  @Test func eventStreamLimits() {
    let stream = Keepalive.Limits(pingAfter: 13_000, hangUpAfter: .max, stuckAfter: 60_000)
    var keepalive = Keepalive(now: 0)
    #expect(keepalive.swept(now: 13_000, limits: stream) == .requestWritable)
    #expect(keepalive.swept(now: 1_000_000, limits: stream) == .none)
    #expect(keepalive.nothingElseToWrite() == .ping)
    _ = keepalive.heard(now: 1_000_000)
    #expect(keepalive.swept(now: 1_013_000, limits: stream) == .requestWritable)
  }

  /// Every viewer holds one, and its slot must not grow for it.
  @Test func staysSmall() {
    #expect(MemoryLayout<Keepalive>.size <= 25)
    #expect(MemoryLayout<ViewerSocket>.stride <= 48, "\(MemoryLayout<ViewerSocket>.stride) bytes")
  }
}
