import CountdownCore
import Foundation
import Libev
import Testing

@testable import RedisCluster

/// hiredis arguments are passed with their true length from a buffer that
/// long: a NUL inside one neither cuts it short nor sends heap bytes past it.
@Suite(.serialized) struct BinarySafeTests {
  let redis: RedisProcess

  init() throws { redis = try RedisProcess() }

  /// Values with NUL at the start, the middle and the end, and a 4 KB one.
  static let values = [
    "a\u{0}bcdefgh", "\u{0}", "\u{0}\u{0}\u{0}secret", "tail\u{0}", "倒\u{0}計時",
    String(repeating: "x", count: 4096) + "\u{0}" + String(repeating: "y", count: 4096),
  ]

  /// Through the blocking connection: what is stored is exactly what was sent.
  @Test func blockingCommandIsBinarySafe() throws {
    let client = try redis.blocking()
    for value in Self.values {
      try client.command(["SET", "bin", value])
      #expect(try client.command(["STRLEN", "bin"]) == .integer(Int64(value.utf8.count)))
      #expect(try client.command(["GET", "bin"]).text == value)
    }
  }

  /// Through the async connection the sequencer uses, on its loop.
  @Test func asyncCommandIsBinarySafe() throws {
    let loop = LibevLoop()
    let connection = RedisConnection(
      name: "test", address: redis.address, loop: loop, timeoutMs: 2000)
    connection.start()
    defer { connection.stop() }
    #expect(loop.run(timeoutMs: 5000) { connection.isUp })
    for value in Self.values {
      var stored: RedisReply?
      connection.send(["SET", "bin", value]) { _ in }
      connection.send(["GET", "bin"]) { stored = try? $0.get() }
      #expect(loop.run(timeoutMs: 5000) { stored != nil })
      #expect(stored?.text == value)
    }
  }

  /// A finished label with NUL sent straight to the function (the decoder
  /// bypassed) is refused or stored byte-exact, never with other bytes.
  @Test func nulLabelInTheFunctionNeverLeaks() throws {
    let client = try redis.blocking()
    try client.command(["FUNCTION", "LOAD", "REPLACE", FunctionLibrary.source])
    for (index, label) in Self.values.enumerated() {
      let session = "nul\(index)"
      let reply = try commandCall(client, session, .start(.seconds(60), finishedLabel: label))
      let stored = try client.command(["HGET", RedisSequencer.sessionKey(session), "label"])
      switch reply.first {
      case "ok":
        #expect((try? RecordMessage.parse(reply[1])?.record.get())?.finishedLabel == label)
        #expect(stored.text == label)
      case "rejected":
        #expect(reply == ["rejected", "bad_request"])
        #expect(stored == .null)
      default:
        Issue.record("unexpected reply \(reply)")
      }
    }
  }
}
