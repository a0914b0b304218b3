import Foundation
import Libev
import Testing

@testable import CountdownCore
@testable import RedisCluster

extension LostReplyTests {
  /// A keyed command applied in Redis whose reply was lost is answered from its stored
  /// answer: the same bytes a retry then gets, and applied once.
  @Test func keyedCommandWithLostReplyIsAnsweredAsItWillBeReplayed() throws {
    let (hub, sequencer) = instance()
    let viewer = joined(hub, sequencer, "keyed-lost")
    func answer() -> String? {
      var found: String?
      waitFor(loop, "the answer") {
        while let frame = hub.nextFrame(for: viewer.id, now: now()) {
          let text = String(decoding: frame, as: UTF8.self)
          if text.hasPrefix(#"{"type":"ack""#) || text.hasPrefix(#"{"type":"error""#) {
            found = text
          }
        }
        return found != nil
      }
      return found
    }
    let start = SessionCommand.start(.seconds(60), finishedLabel: nil)
    relay.set(.dropReplies)
    hub.submit(start, idempotencyKey: "lost-1", from: viewer.id, now: now())
    waitFor(loop, "the command to be applied and its reply lost") {
      (try? field("keyed-lost", "revision")) == "1" && relay.droppedBytes > 0
    }
    // Past a whole second, a record read back now has a higher seq floor than the
    // stored answer's: only the stored line gives the bytes a replay will.
    let applied = now()
    waitFor(loop, "a second to pass") { now() > applied + 1100 }
    try redis.blocking().command(["CLIENT", "KILL", "TYPE", "normal"])
    relay.set(.forward)
    let first = try #require(answer())
    #expect(first.hasPrefix(#"{"type":"ack""#))
    #expect(sequencer.stats.lostRepliesApplied == 1)
    hub.submit(start, idempotencyKey: "lost-1", from: viewer.id, now: now())
    #expect(answer() == first)
    #expect(try field("keyed-lost", "revision") == "1")
  }
}

/// The function library's idempotency rules are the core's: the same refusals remembered,
/// kept as long.
@Suite struct IdempotencyParityTests {
  /// `REMEMBERED` in countdown.lua lists exactly the codes `IdempotentAnswer.remembers`, and `IDEM_MS` is `IdempotencyKey.keepMs`.
  @Test func libraryRemembersWhatTheCoreDoes() throws {
    let source = FunctionLibrary.source
    let table = try #require(source.range(of: "local REMEMBERED = {"))
    let body = source[table.upperBound...].prefix { $0 != "}" }
    let listed = Set(
      body.split(separator: ",").map {
        String($0.split(separator: "=")[0]).trimmingCharacters(in: .whitespacesAndNewlines)
      }.filter { !$0.isEmpty })
    let core = Set(ErrorCode.allCases.filter(IdempotentAnswer.remembers).map(\.rawValue))
    #expect(listed == core)
    #expect(source.contains("local IDEM_MS = \(IdempotencyKey.keepMs)\n"))
  }
}
