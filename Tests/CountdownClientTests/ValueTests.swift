import Foundation
import Testing

@testable import CountdownClient

/// The client's values, without a server: URLs, JSON, backoff, clock.
struct ValueTests {
  /// The page's own address gives the server's root, the session and a link's key.
  @Test(
    arguments: [
      ("http://h:8080/?session=team-a", "http://h:8080/", "team-a", nil),
      ("http://h:8080/", "http://h:8080/", "default", nil),
      ("http://h:8080", "http://h:8080/", "default", nil),
      ("http://h:8080/?session=", "http://h:8080/", "default", nil),
      ("https://h/countdown/index.html?session=x&lang=de", "https://h/countdown/", "x", nil),
      ("http://h/?session=a#key=abc123", "http://h/", "a", "abc123"),
      ("http://h/?session=a&key=old", "http://h/", "a", "old"),
    ] as [(String, String, String, String?)])
  func pageURL(page: String, base: String, session: String, token: String?) throws {
    let client = try CountdownClient(pageURL: URL(string: page)!)
    #expect(client.base.absoluteString == base)
    #expect(client.session == session)
    #expect(client.token == token)
    #expect(
      client.endpoint("/commands").absoluteString == base + "api/v1/sessions/\(session)/commands")
  }

  /// A page address whose session the server would refuse is refused here.
  @Test func pageURLWithBadSession() {
    for page in [
      "http://h/?session=a%20b", "http://h/?session=%00",
      "http://h/?session=" + String(repeating: "a", count: 65),
    ] {
      #expect(throws: CountdownError.self) { try CountdownClient(pageURL: URL(string: page)!) }
    }
  }

  /// A command's JSON is the protocol's, with only the fields given.
  @Test func commandBodies() throws {
    func json(_ c: Command) throws -> String { String(decoding: try c.body(), as: UTF8.self) }
    #expect(
      try json(.start(seconds: 90, finishLabel: "Go"))
        == #"{"finishedLabel":"Go","op":"start","seconds":90}"#)
    #expect(try json(.start()) == #"{"op":"start"}"#)
    #expect(
      try json(.startUntil(epochMs: 1_796_028_000_000)) == #"{"op":"start","until":1796028000000}"#)
    #expect(try json(.adjust(seconds: -60)) == #"{"op":"adjust","seconds":-60}"#)
    #expect(
      try json(.wait(label: "Deploy/1", timeoutSeconds: 900))
        == #"{"label":"Deploy/1","op":"wait","timeoutSeconds":900}"#)
    #expect(try json(.fail(label: "x")) == #"{"label":"x","op":"fail"}"#)
    #expect(try json(.rotateKey) == #"{"op":"rotate_key"}"#)
  }

  /// `HH:MM` is the next such local time; anything else is nil.
  @Test func timeOfDay() throws {
    var cal = Calendar(identifier: .gregorian)
    cal.timeZone = TimeZone(identifier: "UTC")!
    let now = Date(timeIntervalSince1970: 1_796_024_400)  // 2026-12-01 07:40:00 UTC
    let later = try #require(Command.nextTimeOfDay("18:30", after: now, calendar: cal))
    #expect(later.timeIntervalSince(now) == 10 * 3600 + 50 * 60)
    let soon = try #require(Command.nextTimeOfDay("9:05", after: now, calendar: cal))
    #expect(soon.timeIntervalSince(now) == 1 * 3600 + 25 * 60)
    let tomorrow = try #require(Command.nextTimeOfDay("07:39", after: now, calendar: cal))
    #expect(tomorrow.timeIntervalSince(now) == 24 * 3600 - 60)
    for bad in [
      "24:00", "12:60", "-1:00", "1230", "12:3", "12:300", "", "１２:３０", "12:30:00",
      "9223372036854775808:00",
    ] {
      #expect(Command.nextTimeOfDay(bad, after: now, calendar: cal) == nil, "\(bad)")
    }
  }

  static let stateJSON = #"""
    {"phase":"running","spinner":true,"enabled":false,"label":"3","remaining":3,"duration":5,
     "endsAt":1796024364226,"viewers":2,"unknownField":[1,2]}
    """#

  /// A state decodes with every field, unknown fields ignored and absent ones nil.
  @Test func stateDecodes() throws {
    let s = try JSONDecoder().decode(SessionState.self, from: Data(Self.stateJSON.utf8))
    #expect(s.phase == .running && s.spinner && !s.enabled && s.label == "3")
    #expect(s.endsAt == 1_796_024_364_226 && s.remainingMs == nil && s.outcome == nil && !s.stale)
  }

  /// A value out of its range is refused while reading, before any arithmetic: ±2^63,
  /// 2^64, 1e308, 1e400, a fraction, a negative count, an unknown phase.
  @Test(arguments: [
    #""endsAt":9223372036854775807"#, #""endsAt":-9223372036854775808"#,
    #""endsAt":18446744073709551616"#, #""endsAt":1e308"#, #""endsAt":1e400"#,
    #""endsAt":1.5"#, #""endsAt":-1"#, #""endsAt":253402300800000"#, #""viewers":-1"#,
    #""remaining":2147483648"#, #""phase":"exploded""#, #""outcome":"maybe""#,
    #""label":null"#, #""spinner":"yes""#,
  ])
  func stateOutOfRange(field: String) {
    let key = String(field.split(separator: ":")[0])
    var object = Self.stateJSON.replacingOccurrences(
      of: #"(?m)\#(key):[^,}]*"#, with: "", options: .regularExpression)
    object = object.replacingOccurrences(of: "{", with: "{" + field + ",")
    #expect(throws: (any Error).self, "\(object)") {
      try JSONDecoder().decode(SessionState.self, from: Data(object.utf8))
    }
  }

  /// `-0` is the integer 0.
  @Test func negativeZero() throws {
    let json = Self.stateJSON.replacingOccurrences(of: #""viewers":2"#, with: #""viewers":-0"#)
    #expect(try JSONDecoder().decode(SessionState.self, from: Data(json.utf8)).viewers == 0)
  }

  /// A merge patch sets what it names, and its nulls clear the optional fields.
  @Test func patchApplies() throws {
    let s = try JSONDecoder().decode(SessionState.self, from: Data(Self.stateJSON.utf8))
    let frame = try JSONDecoder().decode(
      PatchFrame.self,
      from: Data(
        #"{"type":"patch","seq":9,"patch":{"phase":"finished","spinner":false,"enabled":true,"label":"Done","endsAt":null,"remaining":0,"outcome":"elapsed","x":1}}"#
          .utf8))
    let after = frame.patch.applied(to: s)
    #expect(frame.seq == 9)
    #expect(after.phase == .finished && !after.spinner && after.enabled && after.label == "Done")
    #expect(
      after.endsAt == nil && after.outcome == .elapsed && after.duration == 5 && after.viewers == 2)
    #expect(throws: (any Error).self) {
      try JSONDecoder().decode(
        PatchFrame.self, from: Data(#"{"seq":1,"patch":{"endsAt":1e400}}"#.utf8))
    }
  }

  /// Time left comes from the deadline and the server's clock, time elapsed from the
  /// wait's start; neither goes negative, even at the ends of Int64.
  @Test func timeFromDeadline() {
    var s = SessionState(
      phase: .running, spinner: true, enabled: false, label: "5", remaining: 5, duration: 5,
      endsAt: 10_000)
    #expect(s.millisecondsLeft(serverNow: 7_500) == 2_500)
    #expect(s.millisecondsElapsed(serverNow: 7_500) == 2_500)
    #expect(s.millisecondsLeft(serverNow: 20_000) == 0)
    #expect(s.millisecondsLeft(serverNow: Int64.min) == 0)  // overflow reported, not trapped
    s.phase = .waiting
    s.startedAt = 1_000
    #expect(s.millisecondsLeft(serverNow: 5_000) == nil)
    #expect(s.millisecondsElapsed(serverNow: 5_000) == 4_000)
    #expect(s.millisecondsElapsed(serverNow: 0) == 0)
    #expect(s.millisecondsElapsed(serverNow: Int64.min) == 0)
    s.phase = .idle
    #expect(s.millisecondsLeft(serverNow: 0) == nil && s.millisecondsElapsed(serverNow: 0) == nil)
  }

  /// The backoff stays within [0, min(cap, base × 2^n)) for any attempt and any random.
  @Test func backoffBounds() {
    let b = Backoff(base: 0.5, cap: 10)
    for attempt in [Int.min, -1, 0, 1, 3, 5, 62, 63, 64, Int.max] {
      for r in [0, 0.5, 0.999_999, 1, 2, -1, .nan, .infinity, -.infinity] {
        let d = b.delay(attempt: attempt, random: r)
        let ceiling = min(10, 0.5 * pow(2, Double(min(max(attempt, 0), 62))))
        #expect(d >= 0 && d < ceiling || (d == 0 && ceiling == 0), "\(attempt) \(r) → \(d)")
      }
    }
    #expect(b.delay(attempt: 0, random: 0.5) == 0.25)
    #expect(Backoff(base: .nan, cap: .infinity).delay(attempt: 3, random: 0.5) == 0)
    #expect(Backoff(base: 1e308, cap: 1e308).delay(attempt: 62, random: 0.5).isFinite)
  }

  /// The tightest round trip sets the offset; a looser one only once the other has aged.
  @Test func clockOffsetPrefersTightSamples() {
    var clock = ClockOffset()
    #expect(!clock.isEstimated && clock.milliseconds == 0)
    let t = Date(timeIntervalSince1970: 1_796_000_000)
    // Sent at t, answered 100 ms later; the server said t + 5 s + 50 ms.
    let first = clock.add(serverTime: 1_796_000_005_050, sentAt: t, receivedAt: t + 0.1)
    #expect(first)
    #expect(abs(clock.milliseconds - 5_000) < 0.001)
    #expect(clock.uncertainty == 50)
    // A second later, a 400 ms round trip: looser, not taken.
    let looser = clock.add(serverTime: 1_796_000_006_000, sentAt: t + 1, receivedAt: t + 1.4)
    #expect(!looser)
    #expect(abs(clock.milliseconds - 5_000) < 0.001)
    // Ten minutes on, the first sample's bound has grown past 200 ms: taken.
    let aged = clock.add(serverTime: 1_796_000_605_700, sentAt: t + 600, receivedAt: t + 600.4)
    #expect(aged)
    #expect(abs(clock.milliseconds - 5_500) < 0.001)
    #expect(clock.serverTime(at: t) == 1_796_000_005_500)
    // An answer "before" its request (a clock step) counts as a round trip of 0.
    let stepped = clock.add(serverTime: 1_796_000_000_000, sentAt: t + 601, receivedAt: t)
    #expect(stepped)
    #expect(clock.uncertainty == 0)
    clock.reset()
    #expect(!clock.isEstimated)
  }

  /// An error object becomes a refusal with its code; other answers say what they were.
  @Test func refusalMapping() {
    let busy = CountdownClient.refusal(
      status: 409, body: Data(#"{"type":"error","id":null,"code":"busy","message":"m"}"#.utf8),
      retryAfter: nil)
    #expect(busy == .refused(ServerRefusal(code: .busy, message: "m", status: 409)))
    let proxy = CountdownClient.refusal(status: 502, body: Data("<html>".utf8), retryAfter: 1)
    #expect(proxy.isTransient && proxy.code == .unavailable)
    let moved = CountdownClient.refusal(
      status: 307, body: Data(), retryAfter: nil, location: "http://elsewhere/")
    #expect(moved == .badResponse(status: 307, "a redirect to http://elsewhere/, not followed"))
    #expect(!moved.isTransient)
    let odd = CountdownClient.refusal(status: 418, body: Data(), retryAfter: nil)
    #expect(!odd.isTransient && odd.code == nil)
    #expect(CountdownClient.retryAfter("1") == 1)
    for bad in [
      "", "-1", "3601", "1.5", "99999999999999999999", "Wed, 21 Oct 2015 07:28:00 GMT", nil,
    ] {
      #expect(CountdownClient.retryAfter(bad) == nil)
    }
  }
}
