import Testing

@testable import CountdownCore

func decode(_ text: String, defaultSeconds: Int = 5) -> Result<ClientMessage, CommandError> {
  WireCodec.decode(Array(text.utf8), defaultSeconds: defaultSeconds)
}

func errorCode(_ text: String) -> ErrorCode? {
  if case .failure(let error) = decode(text) { return error.code }
  return nil
}

func text(_ bytes: [UInt8]) -> String { String(decoding: bytes, as: UTF8.self) }

@Suite struct WireCodecTests {
  /// A full start decodes with its seconds, label and numeric id.
  @Test func decodesStart() throws {
    let message = try decode(#"{"op":"start","seconds":5,"finishedLabel":"倒計時結束","id":7}"#).get()
    #expect(message.request == .command(.start(.seconds(5), finishedLabel: "倒計時結束")))
    #expect(message.id.map { text($0.json) } == "7")
  }

  /// A start without seconds runs the server's default; a string id is kept.
  @Test func decodesStartWithDefaults() throws {
    let message = try decode(#"{"op":"start","id":"a\"b"}"#, defaultSeconds: 42).get()
    #expect(message.request == .command(.start(.seconds(42), finishedLabel: nil)))
    #expect(message.id.map { text($0.json) } == #""a\"b""#)
  }

  /// A ping needs a numeric t, which the pong echoes verbatim with the server's time.
  @Test func pingAndPong() throws {
    #expect(
      try decode(#"{"op":"ping","t":1700000000123.5}"#).get().request == .ping(t: "1700000000123.5")
    )
    #expect(errorCode(#"{"op":"ping","t":"now"}"#) == .badRequest)
    #expect(errorCode(#"{"op":"ping"}"#) == .badRequest)
    #expect(
      text(WireCodec.pong(t: "12", serverTime: 34)) == #"{"type":"pong","t":12,"serverTime":34}"#)
  }

  /// Cancel decodes; unknown extra fields are ignored.
  @Test func decodesCancel() throws {
    #expect(try decode(#"{"op":"cancel","extra":[1,2]}"#).get().request == .command(.cancel))
  }

  /// Text that is not JSON is bad_json.
  @Test(arguments: ["", "hello", "{", #"{"op":"start""#, "{'op':'start'}", "[1,]", "01", "\"\\x\""])
  func badJSON(_ input: String) {
    #expect(errorCode(input) == .badJSON)
  }

  /// Valid JSON that is not a valid command is bad_request, and keeps the id when it has one.
  @Test(arguments: [
    "[]", "42", "null", #"{"seconds":5}"#, #"{"op":"jump"}"#, #"{"op":5}"#,
    #"{"op":"start","seconds":0}"#, #"{"op":"start","seconds":86401}"#,
    #"{"op":"start","seconds":"5"}"#, #"{"op":"start","seconds":2.5}"#,
    #"{"op":"start","seconds":1e5}"#, #"{"op":"start","seconds":null}"#,
    #"{"op":"start","finishedLabel":5}"#, #"{"op":"start","finishedLabel":""}"#,
    #"{"op":"start","seconds":99999999999999999999999}"#,
  ])
  func badRequest(_ input: String) {
    #expect(errorCode(input) == .badRequest)
  }

  /// A finished label of 64 characters is accepted, 65 is refused.
  @Test func finishedLabelLength() throws {
    let ok = String(repeating: "倒", count: 64)
    let long = String(repeating: "x", count: 65)
    #expect(
      try decode(#"{"op":"start","finishedLabel":"\#(ok)"}"#).get().request
        == .command(.start(.seconds(5), finishedLabel: ok)))
    #expect(errorCode(#"{"op":"start","finishedLabel":"\#(long)"}"#) == .badRequest)
  }

  /// An error echoes the id; an id of the wrong type is itself the error, echoed as null.
  @Test func errorsCarryTheID() {
    guard case .failure(let withID) = decode(#"{"op":"jump","id":"x1"}"#) else {
      Issue.record("expected failure")
      return
    }
    #expect(withID.id.map { text($0.json) } == #""x1""#)
    guard case .failure(let badID) = decode(#"{"op":"start","id":{"a":1}}"#) else {
      Issue.record("expected failure")
      return
    }
    #expect(badID.code == .badRequest)
    #expect(badID.id == nil)
  }

  /// An id is null (no id), an integer within ±2^63 (echoed as one) or a string of
  /// at most 128 scalars, exactly what the OpenAPI document's CommandID says; a fraction is refused.
  @Test func idRule() throws {
    func echoed(_ id: String) throws -> String? {
      try decode(#"{"op":"cancel","id":\#(id)}"#).get().id.map { text($0.json) }
    }
    #expect(try echoed("null") == nil)
    #expect(try echoed("-9223372036854775808") == "-9223372036854775808")
    #expect(try echoed("9223372036854775807") == "9223372036854775807")
    #expect(try echoed("14693.0") == "14693")
    let string = String(repeating: "é", count: 128)
    #expect(try echoed(#""\#(string)""#) == #""\#(string)""#)
    for bad in [
      "9223372036854775808", "-9223372036854775809", "1e400", "7.5", "1e-1", "true", "[]",
      #""\#(string)x""#,
    ] {
      #expect(errorCode(#"{"op":"cancel","id":\#(bad)}"#) == .badRequest, "\(bad)")
    }
  }

  /// Duplicate keys are refused rather than silently resolved.
  @Test func duplicateKeys() {
    #expect(errorCode(#"{"op":"start","op":"cancel"}"#) == .badRequest)
  }

  /// Nesting of 16 levels parses; 17 is bad_request, without deep recursion.
  @Test func nestingLimit() {
    func nested(_ depth: Int) -> String {
      #"{"op":"cancel","x":"# + String(repeating: "[", count: depth - 1)
        + String(repeating: "]", count: depth - 1) + "}"
    }
    #expect(errorCode(nested(16)) == nil)
    #expect(errorCode(nested(17)) == .badRequest)
    #expect(errorCode(String(repeating: "[", count: 100_000)) == .badRequest)
  }

  /// Escapes, including surrogate pairs, decode to the right characters.
  @Test func stringEscapes() throws {
    let value = try JSONParser.parse(Array(#""a\n\u00e9\ud83d\ude00\/""#.utf8))
    #expect(value == .string("a\né😀/"))
    #expect(throws: JSONParseError.self) { try JSONParser.parse(Array(#""\ud83d""#.utf8)) }
    #expect(throws: JSONParseError.self) { try JSONParser.parse([0x22, 0xFF, 0x22]) }
  }

  /// A wait's times are written as numbers and a finish's outcome as its name;
  /// a patch that ends a wait removes the times with null.
  @Test func encodesWaitingAndOutcome() {
    let waiting = CountdownState(
      phase: .waiting, spinner: true, enabled: false, label: "Deploying", remaining: 0,
      duration: 0, endsAt: nil, viewers: 1, startedAt: 1000, timeoutAt: 901_000)
    #expect(
      text(
        WireCodec.patch(Patch(seq: 4, fields: [.phase, .startedAt, .timeoutAt], state: waiting)))
        == #"{"type":"patch","seq":4,"patch":{"phase":"waiting","startedAt":1000,"timeoutAt":901000}}"#
    )
    var finished = waiting
    finished.phase = .finished
    finished.startedAt = nil
    finished.timeoutAt = nil
    finished.outcome = .timeout
    #expect(
      text(
        WireCodec.patch(
          Patch(seq: 5, fields: [.phase, .startedAt, .timeoutAt, .outcome], state: finished)))
        == #"{"type":"patch","seq":5,"patch":{"phase":"finished","startedAt":null,"timeoutAt":null,"outcome":"timeout"}}"#
    )
  }

  /// The snapshot carries every field, the times and the outcome as null when idle.
  @Test func encodesSnapshot() {
    let state = CountdownState(
      phase: .idle, spinner: false, enabled: true, label: "Ready", remaining: 0, duration: 0,
      endsAt: nil, viewers: 2)
    #expect(
      text(
        WireCodec.snapshot(
          session: "team-a", epoch: "00ff", seq: 3, serverTime: 1234, state: state))
        == #"{"type":"snapshot","session":"team-a","epoch":"00ff","seq":3,"serverTime":1234,"state":{"phase":"idle","spinner":false,"enabled":true,"label":"Ready","remaining":0,"duration":0,"endsAt":null,"viewers":2,"remainingMs":null,"stale":false,"startedAt":null,"timeoutAt":null,"outcome":null,"level":"normal","overSince":null,"overMs":null,"overtime":false,"warnAtSeconds":null,"dangerAtSeconds":null,"message":null,"blackout":false}}"#
    )
  }

  /// A patch carries only its fields, escaped.
  @Test func encodesPatch() {
    let state = CountdownState(
      phase: .running, spinner: true, enabled: false, label: "say \"hi\"\u{1}", remaining: 4,
      duration: 5, endsAt: 99, viewers: 1)
    #expect(
      text(WireCodec.patch(Patch(seq: 9, fields: [.label, .endsAt], state: state)))
        == #"{"type":"patch","seq":9,"patch":{"label":"say \"hi\"\u0001","endsAt":99}}"#)
  }

  /// Ack and error messages have the documented shape, for every error code.
  @Test func encodesAckAndErrors() throws {
    let id = try #require(CommandID(.number("12")))
    #expect(text(WireCodec.ack(id: id, seq: 4)) == #"{"type":"ack","id":12,"seq":4}"#)
    for code in [ErrorCode.badJSON, .badRequest, .busy, .notRunning] {
      #expect(
        text(WireCodec.error(CommandError(code, "why", id: nil)))
          == #"{"type":"error","id":null,"code":"\#(code.rawValue)","message":"why"}"#)
    }
  }

  /// Integers are written in decimal at both ends of their ranges.
  @Test func integers() {
    var writer = JSONWriter()
    for value in [Int64(0), 7, -5, 1_796_024_361_226, .max, .min] {
      writer.integer(value)
      writer.raw(",")
    }
    writer.integer(UInt64.max)
    #expect(
      text(writer.bytes)
        == "0,7,-5,1796024361226,9223372036854775807,-9223372036854775808,18446744073709551615")
  }

  /// Numeric ids and ping times longer than 32 characters are refused: each echo is queued.
  @Test func longNumbersRefused() {
    let long = String(repeating: "9", count: 33)
    #expect(errorCode(#"{"op":"cancel","id":\#(long)}"#) == .badRequest)
    #expect(errorCode(#"{"op":"ping","t":\#(long)}"#) == .badRequest)
    #expect(errorCode(#"{"op":"ping","t":\#(String(long.dropFirst()))}"#) == nil)
  }

  /// Session ids are [A-Za-z0-9_-]{1,64}.
  @Test func sessionIDs() {
    #expect(SessionID.isValid("team-a_1"))
    #expect(SessionID.isValid(String(repeating: "a", count: 64)))
    #expect(!SessionID.isValid(String(repeating: "a", count: 65)))
    for bad in ["", "a.b", "..", "a/b", "a b", "é", "%2e"] {
      #expect(!SessionID.isValid(bad))
    }
  }
}
