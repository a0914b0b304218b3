import Testing

@testable import CountdownCore

/// Numbers at and past the edge of every range, in each field a client sets:
/// each is refused as bad_request or, where valid, works, and none traps.
@Suite struct ValueEdgeTests {
  let t0: Int64 = 1_700_000_000_000

  /// Literals no command field takes: past Int64 both ways, past UInt64,
  /// doubles past the range, -0 and 0 (the integer 0), fractions.
  static let neverValid = [
    "-9223372036854775808", "9223372036854775807", "9223372036854775808", "-9223372036854775809",
    "18446744073709551616", "1e308", "-1e308", "1e400", "-1e400", "-0", "0", "0.0", "-0.0",
    "1.5", "1e-1", "0.55e1", String(repeating: "9", count: 400), "\"5\"", "null", "true", "[]",
  ]

  func code(_ text: String) -> ErrorCode? { errorCode(text) }

  /// `seconds` of a start: every edge is refused; 1 and 86400 are taken.
  @Test(arguments: neverValid + ["-1", "86401"])
  func startSecondsEdges(_ literal: String) {
    #expect(code(#"{"op":"start","seconds":\#(literal)}"#) == .badRequest, "\(literal)")
  }

  /// The range's own bounds decode, however the integer is written.
  @Test func startSecondsBounds() throws {
    let bounds = [SessionRecord.secondsRange.lowerBound, SessionRecord.secondsRange.upperBound]
    for (literal, seconds) in zip(["1", "86400", "1.0", "8.64e4"], bounds + bounds) {
      let message = try decode(#"{"op":"start","seconds":\#(literal)}"#).get()
      #expect(message.request == .command(.start(.seconds(seconds), finishedLabel: nil)))
    }
  }

  /// `until` outside the moments a record may hold is refused by the decoder.
  @Test(arguments: [
    "-9223372036854775808", "9223372036854775807", "9223372036854775808", "18446744073709551616",
    "1e308", "1e400", "-1", "253402300800000", "1.5", "null",
  ])
  func untilEdges(_ literal: String) {
    #expect(code(#"{"op":"start","until":\#(literal)}"#) == .badRequest, "\(literal)")
  }

  /// `-0` and both ends of the epoch range decode; the rules then refuse any
  /// deadline not 1 s to 30 days ahead, and the far past and far future are both.
  @Test func untilWithinEpochThenAhead() throws {
    for literal in ["-0", "0", "253402300799999"] {
      let message = try decode(#"{"op":"start","until":\#(literal)}"#).get()
      guard case .command(.start(.until(let deadline), _, _)) = message.request else {
        Issue.record("until \(literal) decoded as \(message.request)")
        continue
      }
      #expect(
        SessionRecord().applying(.start(.until(deadline), finishedLabel: nil), at: t0)
          == .failure(.badRequest))
    }
  }

  /// `seconds` of an adjust: every edge is refused; the bounds and ±1 are taken.
  @Test(arguments: neverValid + ["86401", "-86401"])
  func adjustEdges(_ literal: String) {
    #expect(code(#"{"op":"adjust","seconds":\#(literal)}"#) == .badRequest, "\(literal)")
  }

  /// Adjust's own bounds and its smallest steps decode.
  @Test func adjustBounds() throws {
    for seconds in [-86_400, -1, 1, 86_400] {
      #expect(
        try decode(#"{"op":"adjust","seconds":\#(seconds)}"#).get().request
          == .command(.adjust(seconds: seconds)))
    }
  }

  /// `timeoutSeconds` of a wait: every edge is refused, as are 1.5 and past a day.
  @Test(arguments: neverValid + ["-1", "86401", "1.5"])
  func waitTimeoutEdges(_ literal: String) {
    #expect(code(#"{"op":"wait","timeoutSeconds":\#(literal)}"#) == .badRequest, "\(literal)")
  }

  /// The timeout's own bounds decode, and a wait with no fields at all.
  @Test func waitTimeoutBounds() throws {
    for seconds in [1, 86_400] {
      #expect(
        try decode(#"{"op":"wait","timeoutSeconds":\#(seconds)}"#).get().request
          == .command(.wait(label: nil, timeoutSeconds: seconds, timeoutLabel: nil)))
    }
    #expect(
      try decode(#"{"op":"wait"}"#).get().request
        == .command(.wait(label: nil, timeoutSeconds: nil, timeoutLabel: nil)))
  }

  /// Each label field of wait, done and fail refuses what finishedLabel does:
  /// empty, 65 characters, 4 KB, NUL and other control characters, and non-strings.
  @Test(arguments: [
    #""""#, "\"\(String(repeating: "x", count: 65))\"",
    "\"\(String(repeating: "x", count: 4000))\"",
    #""a\u0000b""#, #""tab\there""#, #""\u007f""#, "5", "null", "[]", "{}", "true",
  ])
  func waitLabelEdges(_ literal: String) {
    for text in [
      #"{"op":"wait","label":\#(literal)}"#, #"{"op":"wait","timeoutLabel":\#(literal)}"#,
      #"{"op":"done","label":\#(literal)}"#, #"{"op":"fail","label":\#(literal)}"#,
    ] {
      #expect(code(text) == .badRequest, "\(text)")
    }
  }

  /// 64 characters of text (é, 🎉 counted as one each) are a label.
  @Test func waitLabelBounds() throws {
    let long = String(repeating: "🎉", count: 64)
    #expect(
      try decode(#"{"op":"wait","label":"\#(long)","timeoutSeconds":900,"timeoutLabel":"é"}"#)
        .get().request == .command(.wait(label: long, timeoutSeconds: 900, timeoutLabel: "é")))
    #expect(
      try decode(#"{"op":"done","label":"Deployed"}"#).get().request
        == .command(.done(label: "Deployed")))
    #expect(try decode(#"{"op":"fail"}"#).get().request == .command(.fail(label: nil)))
  }

  /// A ping's t is echoed as written, so only a short literal of a finite
  /// number passes: -0, 0, 1e308 and ±2^63 are echoed; 1e400 and 33 characters are not.
  @Test func pingTEdges() throws {
    for literal in ["-0", "0", "1e308", "-9223372036854775808", "18446744073709551616", "5e-324"] {
      #expect(try decode(#"{"op":"ping","t":\#(literal)}"#).get().request == .ping(t: literal))
      #expect(
        text(WireCodec.pong(t: literal, serverTime: 1))
          == #"{"type":"pong","t":\#(literal),"serverTime":1}"#)
    }
    let long = "1" + String(repeating: "0", count: WireCodec.maxPingTLength)
    for literal in ["1e400", "-1e400", long, "\"1\"", "null", "[1]"] {
      #expect(code(#"{"op":"ping","t":\#(literal)}"#) == .badRequest, "\(literal)")
    }
    let longest = String(repeating: "1", count: WireCodec.maxPingTLength)
    #expect(try decode(#"{"op":"ping","t":\#(longest)}"#).get().request == .ping(t: longest))
  }

  /// Labels are text: each control character (U+0000–U+001F, U+007F) is refused.
  @Test func labelControlCharacters() {
    for value in Array(0x00...0x1F) + [0x7F] {
      let escaped = "\\u" + String(repeating: "0", count: 2) + hex2(value)
      #expect(
        code(#"{"op":"start","finishedLabel":"a\#(escaped)b"}"#) == .badRequest, "U+\(hex2(value))")
    }
    #expect(
      (try? decode(#"{"op":"start","finishedLabel":"a\u0080b"}"#).get()) != nil,
      "U+0080 is no control character the rule names")
  }

  func hex2(_ value: Int) -> String {
    let digits = String(value, radix: 16, uppercase: true)
    return digits.count == 1 ? "0" + digits : digits
  }

  /// Input quoted in an error is cut to 32 Unicode scalars with an ellipsis,
  /// even when it is one character of many combining marks.
  @Test func echoedInputIsCut() throws {
    for name in [
      String(repeating: "x", count: 4000), "e" + String(repeating: "\u{301}", count: 4000),
    ] {
      for frame in [#"{"op":"\#(name)"}"#, #"{"\#(name)":1,"\#(name)":2}"#] {
        guard case .failure(let error) = decode(frame) else {
          Issue.record("a 4 KB name was accepted")
          continue
        }
        #expect(error.code == .badRequest)
        #expect(error.message.unicodeScalars.count <= WireCodec.maxEchoLength + 20, "\(error)")
        #expect(error.message.hasSuffix("…\""))
      }
    }
    let exact = String(repeating: "y", count: WireCodec.maxEchoLength)
    guard case .failure(let error) = decode(#"{"op":"\#(exact)"}"#) else {
      Issue.record("an unknown op was accepted")
      return
    }
    #expect(error.message == "unknown op \"\(exact)\"")
  }

  /// The rules refuse deadlines no record may hold, at any clock, without a trap.
  @Test func applyingNeverOverflows() {
    let idle = SessionRecord()
    for deadline in [Int64.min, Int64.min + 1, -1, 0, Int64.max, Int64.max - 1] {
      for at in [t0, SessionRecord.epochMsRange.upperBound, 0] {
        #expect(
          idle.applying(.start(.until(deadline), finishedLabel: nil), at: at)
            == .failure(.badRequest), "until \(deadline) at \(at)")
      }
    }
    // A clock outside the range makes no record at all.
    for at in [Int64.min, -1, SessionRecord.epochMsRange.upperBound + 1, Int64.max] {
      #expect(
        idle.applying(.start(.seconds(5), finishedLabel: nil), at: at) == .failure(.unavailable))
    }
    // Near the end of the range, a deadline past it is refused.
    let late = SessionRecord.epochMsRange.upperBound - 500
    #expect(
      idle.applying(.start(.seconds(1), finishedLabel: nil), at: late) == .failure(.badRequest))
    let paused = SessionRecord(
      .paused(remainingMs: 60_000), duration: 60, revision: 1, updatedAt: late)
    #expect(paused.applying(.resume, at: late) == .failure(.badRequest))
    #expect(paused.applying(.adjust(seconds: 60), at: late).map(\.remainingMs) == .success(120_000))
  }

  /// Adjust keeps the duration within what storage holds, both ways.
  @Test func durationStaysInRange() throws {
    let top = SessionRecord.durationRange.upperBound
    let running = SessionRecord(
      .running(endsAt: t0 + 60_000), duration: top, revision: 1, updatedAt: t0)
    let more = try running.applying(.adjust(seconds: 86_400), at: t0).get()
    #expect(more.duration == top)
    #expect(more.damage == nil)
    let short = SessionRecord(
      .running(endsAt: t0 + 600_000), duration: 10, revision: 1, updatedAt: t0)
    let less = try short.applying(.adjust(seconds: -60), at: t0).get()
    #expect(less.duration == 0)
    #expect(less.damage == nil)
  }

  /// A pause after the clock stepped back by weeks keeps at most 30 days.
  @Test func pauseAfterClockStepBack() throws {
    let running = SessionRecord(
      .running(endsAt: t0 + 60_000), duration: 60, revision: 1, updatedAt: t0)
    let back = t0 - 100 * 86_400_000
    let paused = try running.applying(.pause, at: back).get()
    #expect(paused.remainingMs == SessionRecord.aheadMsRange.upperBound)
    #expect(paused.damage == nil)
  }

  /// The JSON integer conversion is JSON Schema's `integer`: the value, not
  /// the spelling (-0 is 0, `1.0` is 1, `1E2` is 100), and it reports what does
  /// not fit rather than trapping or rounding: ±2^63 past Int's ends and
  /// fractions are not integers, however long the digits or the exponent.
  @Test func jsonIntegers() {
    let exact: [(String, Int)] = [
      ("-0", 0), ("0e999999999999999999", 0), ("-0.0e-5", 0), ("1.0", 1), ("1E2", 100),
      ("1.5e1", 15), ("100e-2", 1), ("14693.0", 14693), ("-9223372036854775808", .min),
      ("9223372036854775807", .max), ("9.223372036854775807e18", .max),
      ("-9.223372036854775808E+18", .min),
      ("1" + String(repeating: "0", count: 4000) + "e-4000", 1),
    ]
    for (literal, value) in exact {
      #expect(JSONValue.number(literal).integer == value, "\(literal)")
    }
    for literal in [
      "9223372036854775808", "-9223372036854775809", "18446744073709551616", "1e308",
      "1e400", "1e19", "9.223372036854775808e18", "1.5", "1e-1", "1e-400",
      "1e999999999999999999", String(repeating: "9", count: 4000),
    ] {
      #expect(JSONValue.number(literal).integer == nil, "\(literal)")
    }
  }

  /// Whole seconds of any span, without the rounding's own overflow.
  @Test func wholeSecondsAtTheEdges() {
    #expect(SessionRecord.wholeSeconds(.max) == Int64.max / 1000 + 1)
    #expect(SessionRecord.wholeSeconds(.min) == 0)
    #expect(SessionRecord.wholeSeconds(1) == 1)
    #expect(SessionRecord.wholeSeconds(1000) == 1)
    #expect(SessionRecord.wholeSeconds(1001) == 2)
  }

  /// A record from outside with extreme times and counters is restored
  /// without a trap: seq stays within a page's numbers, a run decades away
  /// shows a clamped count, and one long past comes back finished.
  @Test func restoringExtremeRecords() {
    let config = SessionConfig.Shared(SessionConfig())
    var old = SessionRecord(.idle, seq: .max, revision: 1, updatedAt: .min)
    var machine = SessionStateMachine(restoring: old, config: config, now: t0)
    #expect(machine.seq == SessionRecord.maxCounter)
    old = SessionRecord(.idle, seq: 3, revision: 1, updatedAt: .max)
    machine = SessionStateMachine(restoring: old, config: config, now: t0)
    #expect(machine.seq == 3 + SessionStateMachine.maxUnstoredPatchesPerSecond)

    let far = SessionRecord(
      .running(endsAt: SessionRecord.epochMsRange.upperBound), duration: 60, revision: 1,
      updatedAt: t0)
    machine = SessionStateMachine(restoring: far, config: config, now: t0)
    #expect(machine.published.remaining == Int(Int32.max))
    let due = machine.nextDeadline ?? 0
    #expect(due > t0)
    _ = machine.advance(now: due)
    #expect(machine.published.remaining < Int(Int32.max))

    for endsAt in [Int64.min, Int64.max] {
      let damaged = SessionRecord(
        .running(endsAt: endsAt), duration: 60, revision: 1, updatedAt: t0)
      machine = SessionStateMachine(restoring: damaged, config: config, now: t0)
      _ = machine.advance(now: t0 + 1000)
      #expect(machine.phase == (endsAt < t0 ? .finished : .running))
    }
  }

  /// Every edge, sent through a hub (a start's on an idle session, an
  /// adjust's on a running one), is answered bad_request as its last frame
  /// and leaves the record as it was.
  @Test(arguments: neverValid)
  func edgesThroughTheHub(_ literal: String) throws {
    let hub = Hub(config: HubConfig(commandsPerSecond: 1000), epoch: "e")
    guard case .joined(let viewer) = hub.connect(session: "s", peer: "127.0.0.1", now: t0) else {
      Issue.record("join refused")
      return
    }
    func refused(_ frame: String) throws {
      let before = try #require(hub.record(of: "s"))
      while hub.nextFrame(for: viewer, now: t0) != nil {}
      hub.receive(Array(frame.utf8), from: viewer, now: t0)
      #expect(hub.record(of: "s") == before, "\(frame)")
      var last: [UInt8]?
      while let next = hub.nextFrame(for: viewer, now: t0) { last = next }
      #expect(last.map(text)?.contains(#""code":"bad_request""#) == true, "\(frame)")
    }
    try refused(#"{"op":"start","until":\#(literal)}"#)
    try refused(#"{"op":"start","seconds":\#(literal)}"#)
    hub.receive(Array(#"{"op":"start","seconds":60}"#.utf8), from: viewer, now: t0)
    #expect(hub.record(of: "s")?.phase == .running)
    try refused(#"{"op":"adjust","seconds":\#(literal)}"#)
  }

  /// The 50-byte message that stopped the server is a bad_request; the
  /// session is unchanged, and the next start works.
  @Test func untilOverflowThroughTheHub() throws {
    let hub = Hub(config: HubConfig(), epoch: "e")
    guard case .joined(let viewer) = hub.connect(session: "s", peer: "127.0.0.1", now: t0) else {
      Issue.record("join refused")
      return
    }
    let before = try #require(hub.record(of: "s"))
    let frame = #"{"op":"start","until":-9223372036854775808}"#
    #expect(frame.utf8.count < 50)
    hub.receive(Array(frame.utf8), from: viewer, now: t0)
    #expect(hub.record(of: "s") == before)
    var frames: [String] = []
    while let next = hub.nextFrame(for: viewer, now: t0) { frames.append(text(next)) }
    #expect(frames.last?.contains(#""code":"bad_request""#) == true, "\(frames)")
    hub.receive(Array(#"{"op":"start","seconds":5,"id":1}"#.utf8), from: viewer, now: t0)
    #expect(hub.record(of: "s")?.endsAt == t0 + 5000)
  }
}
