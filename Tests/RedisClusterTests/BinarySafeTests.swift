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

  /// A pipeline sends each value exactly, and answers each command in order,
  /// an error reply among them without cutting the rest short.
  @Test func pipelineIsBinarySafeAndInOrder() throws {
    let client = try redis.blocking()
    let commands = Self.values.enumerated().flatMap { index, value in
      [["SET", "p\(index)", value], ["GET", "p\(index)"]]
    }
    let replies = try client.pipeline(commands + [["INCR", "p0"], ["STRLEN", "p1"]])
    #expect(replies.count == commands.count + 2)
    for (index, value) in Self.values.enumerated() {
      #expect(replies[2 * index] == .status("OK"))
      #expect(replies[2 * index + 1].text == value)
    }
    guard case .error = replies[commands.count] else {
      Issue.record("INCR of text answered \(replies[commands.count])")
      return
    }
    #expect(replies.last == .integer(Int64(Self.values[1].utf8.count)))
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

  /// A wait's two labels, with spaces anywhere and characters of every
  /// width, come back from the function's line each exactly, and so does the
  /// label of the done that ends it.
  @Test func waitLabelsWithSpacesParseApart() throws {
    let client = try redis.blocking()
    try client.command(["FUNCTION", "LOAD", "REPLACE", FunctionLibrary.source])
    let pairs: [(String?, String?)] = [
      ("a b  c", " x y "), (" ", nil), (nil, "Deploy timed out"), ("倒計時 結束 🎉", "é é"),
      (String(repeating: "🎉", count: 64), String(repeating: " ", count: 64)), (nil, nil),
    ]
    for (index, (label, timeoutLabel)) in pairs.enumerated() {
      let session = "labels\(index)"
      let reply = try commandCall(
        client, session, .wait(label: label, timeoutSeconds: 60, timeoutLabel: timeoutLabel))
      #expect(reply.first == "ok", "\(reply)")
      let record = try #require(try RecordMessage.parse(reply[1])?.record.get(), "\(reply)")
      #expect(record.waitLabel == label)
      #expect(record.finishedLabel == timeoutLabel)
      #expect(record.timeoutAt.map { $0 - record.updatedAt } == 60_000)
      let done = try commandCall(
        client, session, .done(label: label), base: record.fields)
      let finished = try #require(try RecordMessage.parse(done[1])?.record.get(), "\(done)")
      #expect(finished.status == .finished(.done))
      #expect(finished.finishedLabel == label && finished.waitLabel == nil)
    }
  }

  /// The message is free text in the line too, between the wait label and
  /// the finished label: with spaces anywhere, each of the three comes back
  /// exactly, however many of them there are.
  @Test func messageParsesApartFromTheLabels() throws {
    let client = try redis.blocking()
    try client.command(["FUNCTION", "LOAD", "REPLACE", FunctionLibrary.source])
    let messages = [
      "Wrap up", " a  b ", " ", String(repeating: "🎉", count: 140), "倒計時 結束 Take questions",
    ]
    let labels: [(String?, String?)] = [
      (nil, nil), ("a b  c", " x y "), (" ", nil), (nil, " "), ("é é", "🎉 🎉"),
    ]
    for (index, message) in messages.enumerated() {
      for (other, (label, timeoutLabel)) in labels.enumerated() {
        let session = "msg\(index)-\(other)"
        #expect(try commandCall(client, session, .message(message)).first == "ok")
        let reply = try commandCall(
          client, session, .wait(label: label, timeoutSeconds: 60, timeoutLabel: timeoutLabel),
          base: SessionRecord.Fields(revision: 1, message: message))
        let record = try #require(try RecordMessage.parse(reply[1])?.record.get(), "\(reply)")
        #expect(record.message == message, "\(reply)")
        #expect(record.waitLabel == label && record.finishedLabel == timeoutLabel, "\(reply)")
        let stored = try client.command(["HGET", RedisSequencer.sessionKey(session), "message"])
        #expect(stored.text == message)
      }
    }
  }
}
