import Foundation
import Testing

@testable import CountdownClient

/// The event-stream parser and the watch's state machine, without a network.
struct StreamValueTests {
  static let stream = Array(
    ("\u{FEFF}: hello\r\nevent: snapshot\r\nid: 7\r\ndata: {\"a\":\r\ndata:1}\r\n\r\n"
      + ": keepalive\n\nevent: patch\nid: 8\ndata: x\n\ndata: plain\rid: bad\u{0}id\r\r").utf8)

  /// Events come out the same however the bytes are cut, a CRLF split across chunks
  /// included: comments skipped, data lines joined, the id carried over.
  @Test(arguments: [1, 2, 3, 7, 1000])
  func parsesAnyChunking(size: Int) throws {
    var parser = EventStreamParser()
    var events: [ServerSentEvent] = []
    var i = 0
    while i < Self.stream.count {
      events += try parser.feed(Self.stream[i..<min(i + size, Self.stream.count)])
      i += size
    }
    #expect(
      events == [
        ServerSentEvent(type: "snapshot", data: "{\"a\":\n1}", id: "7"),
        ServerSentEvent(type: "patch", data: "x", id: "8"),
        // An id with a NUL is ignored; the last good one stays.
        ServerSentEvent(type: "message", data: "plain", id: "8"),
      ])
  }

  /// A line of 64 KB is read; one byte more is refused, so memory stays bounded.
  @Test func lineLimit() throws {
    var parser = EventStreamParser()
    let ok = "data: " + String(repeating: "x", count: EventStreamParser.maxLine - 6) + "\n\n"
    #expect(try parser.feed(Array(ok.utf8)).first?.data.count == EventStreamParser.maxLine - 6)
    #expect(throws: EventStreamParser.LineTooLong.self) {
      try parser.feed([UInt8](repeating: 0x61, count: EventStreamParser.maxLine + 1))
    }
  }

  /// An event's data lines add up to 256 KB at most, however short each line is: a stream
  /// that never sends a blank line is refused rather than held.
  @Test func eventLimit() throws {
    var parser = EventStreamParser()
    let line = "data: " + String(repeating: "x", count: 60_000) + "\n"
    var fed = 0
    #expect(throws: EventStreamParser.EventTooLong.self) {
      while fed < 2 * EventStreamParser.maxEvent {
        _ = try parser.feed(Array(line.utf8))
        fed += line.utf8.count
      }
    }
    #expect(fed < EventStreamParser.maxEvent)
    var fits = EventStreamParser()
    let whole = String(repeating: "data: " + String(repeating: "y", count: 1000) + "\n", count: 200)
    #expect(try fits.feed(Array((whole + "\n").utf8)).first?.data.utf8.count == 200 * 1001 - 1)
  }

  static func event(_ type: String, _ json: String) -> ServerSentEvent {
    ServerSentEvent(type: type, data: json, id: nil)
  }

  static func snapshot(
    seq: Int, epoch: String = "e1", serverTime: Int64 = 1_796_000_000_000, phase: String = "running"
  ) -> ServerSentEvent {
    event(
      "snapshot",
      #"{"type":"snapshot","session":"s","epoch":"\#(epoch)","seq":\#(seq),"serverTime":\#(serverTime),"state":{"phase":"\#(phase)","spinner":true,"enabled":false,"label":"9","remaining":9,"duration":10,"endsAt":1796000009000,"viewers":1}}"#
    )
  }

  /// Snapshots replace the state, newer patches apply, older ones are ignored, and the
  /// server's time sets the clock offset.
  @Test func snapshotsAndPatches() throws {
    var watch = SessionWatch(session: "s", backoff: Backoff(base: 0.5, cap: 10))
    #expect(watch.lastEventID == nil)
    let sent = Date(timeIntervalSince1970: 1_795_999_990)
    guard
      case .emit(let first) = watch.received(Self.snapshot(seq: 4), sentAt: sent, at: sent + 0.02)
    else { throw Unexpected() }
    #expect(first.connection == .connected && first.seq == 4 && first.phase == .running)
    #expect(abs(first.clock.milliseconds - 9_990) < 0.5)
    #expect(watch.lastEventID == 4)
    let tick = Self.event("patch", #"{"type":"patch","seq":5,"patch":{"label":"8","remaining":8}}"#)
    guard case .emit(let ticked) = watch.received(tick, sentAt: sent, at: sent + 1) else {
      throw Unexpected()
    }
    #expect(ticked.label == "8" && ticked.seq == 5 && ticked.state?.duration == 10)
    #expect(watch.received(tick, sentAt: sent, at: sent + 1) == .ignore)
    let old = Self.event("patch", #"{"type":"patch","seq":3,"patch":{"label":"x"}}"#)
    #expect(watch.received(old, sentAt: sent, at: sent + 1) == .ignore)
    #expect(watch.received(Self.event("ping", "{}"), sentAt: sent, at: sent) == .ignore)
    // A new epoch: the old clock sample is dropped even though the new one is looser.
    guard
      case .emit(let restarted) = watch.received(
        Self.snapshot(seq: 5, epoch: "e2", serverTime: 1_796_000_100_000), sentAt: sent + 100,
        at: sent + 101)
    else { throw Unexpected() }
    #expect(restarted.epoch == "e2" && abs(restarted.clock.milliseconds - 9_500) < 0.5)
  }

  struct Unexpected: Error {}

  /// What cannot be applied closes the stream: a patch before a snapshot, another
  /// session's snapshot, a value out of range, bad JSON.
  @Test(arguments: [
    event("patch", #"{"type":"patch","seq":5,"patch":{"label":"8"}}"#),
    snapshot(seq: 1).with {
      $0.data = $0.data.replacingOccurrences(of: #""session":"s""#, with: #""session":"t""#)
    },
    snapshot(seq: 1).with {
      $0.data = $0.data.replacingOccurrences(of: "1796000009000", with: "9223372036854775808")
    },
    snapshot(seq: -1),
    snapshot(seq: 1, serverTime: -1),
    snapshot(seq: 1, phase: "exploded"),
    event("snapshot", "{"),
    event("snapshot", ""),
  ])
  func unusableEventsDrop(event: ServerSentEvent) {
    var watch = SessionWatch(session: "s", backoff: Backoff(base: 0.5, cap: 10))
    guard case .drop(let error) = watch.received(event, sentAt: Date(), at: Date()) else {
      Issue.record("not dropped")
      return
    }
    #expect(!SessionWatch.isFinal(error))
    #expect(watch.update.state == nil)
  }

  /// Losses back off with growing attempts (a Retry-After waited out at least), a snapshot
  /// resets them, and a refusal retrying cannot change ends the watch.
  @Test func reconnectSchedule() {
    var watch = SessionWatch(session: "s", backoff: Backoff(base: 0.5, cap: 10))
    let lost = CountdownError.unreachable("refused")
    var ceilings: [Double] = []
    for n in 1...6 {
      guard case .retry(let after, let update) = watch.lost(lost, random: 0.999) else {
        Issue.record("no retry")
        return
      }
      #expect(update.connection == .reconnecting(attempt: n, retryIn: after, reason: lost))
      ceilings.append(after)
    }
    #expect(ceilings == ceilings.sorted() && ceilings.last! < 10 && ceilings.last! > 9.9)
    let busy = CountdownError.refused(
      ServerRefusal(code: .unavailable, message: "", status: 503, retryAfter: 5))
    guard case .retry(let wait, _) = watch.lost(busy, random: 0) else { return }
    #expect(wait == 5)
    // An hour's Retry-After is capped: the watch tries again after `maxRetryAfter`.
    let hour = CountdownError.refused(
      ServerRefusal(code: .unavailable, message: "", status: 503, retryAfter: 3600))
    guard case .retry(let capped, _) = watch.lost(hour, random: 0) else { return }
    #expect(capped == watch.maxRetryAfter && capped == 30)
    _ = watch.received(Self.snapshot(seq: 1), sentAt: Date(), at: Date())
    guard case .retry(let reset, _) = watch.lost(lost, random: 0.999) else { return }
    #expect(reset < 0.5)
    for final in [
      CountdownError.badResponse(status: 404, "no such route"),
      .refused(ServerRefusal(code: .forbidden, message: "origin", status: 403)),
      .invalidArgument("x"),
    ] {
      var w = watch
      #expect(w.lost(final, random: 0.5) == .stop(w.update))
      #expect(w.update.connection == .closed(final))
    }
    let notAStream = SessionWatch.refusesStream(status: 200, isEventStream: false)
    #expect(notAStream.map(SessionWatch.isFinal) == true)
    #expect(SessionWatch.refusesStream(status: 200, isEventStream: true) == nil)
    #expect(SessionWatch.refusesStream(status: 503, isEventStream: false) == nil)
    for transient in [
      CountdownError.badResponse(status: 502, "proxy"),
      .badResponse(status: 200, "garbled"),
      .refused(ServerRefusal(code: .rateLimited, message: "", status: 429)),
    ] {
      #expect(!SessionWatch.isFinal(transient))
    }
  }

  /// The clock label is the page's: seconds, m:ss, h:mm:ss, Nd hh:mm:ss, rounded up while
  /// counting down; the elapsed label counts up from 0:00.
  @Test func clockFormats() {
    let cases: [(Int64, String)] = [
      (0, "0"), (5, "5"), (59, "59"), (60, "1:00"), (65, "1:05"), (3599, "59:59"),
      (3600, "1:00:00"), (3725, "1:02:05"), (86399, "23:59:59"), (86400, "1d 00:00:00"),
      (93784, "1d 02:03:04"), (-5, "0"),
    ]
    for (s, text) in cases { #expect(ClockFormat.clock(seconds: s) == text) }
    #expect(ClockFormat.clock(seconds: Int64.max).hasSuffix("d 15:30:07"))
    #expect(ClockFormat.clock(seconds: Int64.min) == "0")
    #expect(ClockFormat.elapsed(seconds: 5) == "0:05")
    #expect(ClockFormat.elapsed(seconds: 75) == "1:15")
    var u = SessionUpdate(session: "s")
    #expect(u.clockLabel() == "" && u.timeLeft() == nil && !u.spinner && !u.enabled)
    u.state = SessionState(
      phase: .running, spinner: true, enabled: false, label: "3", remaining: 3, duration: 3,
      endsAt: 10_000)
    #expect(u.clockLabel(now: Date(timeIntervalSince1970: 7.001)) == "3")
    #expect(u.clockLabel(now: Date(timeIntervalSince1970: 7.0)) == "3")
    #expect(u.clockLabel(now: Date(timeIntervalSince1970: 8.5)) == "2")
    #expect(u.clockLabel(now: Date(timeIntervalSince1970: 11)) == "0")
  }
}

extension ServerSentEvent {
  func with(_ change: (inout ServerSentEvent) -> Void) -> ServerSentEvent {
    var e = self
    change(&e)
    return e
  }
}
