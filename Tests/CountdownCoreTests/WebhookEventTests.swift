import Testing

@testable import CountdownCore

@Suite struct WebhookEventTests {
  let config = SessionConfig.Shared(SessionConfig())

  /// Each op reports its own event, an adjust that ends the run and a done or fail report finished, and a key rotation reports nothing.
  @Test func typeFollowsOpAndResult() {
    let running = SessionRecord(.running(endsAt: 10_000), duration: 5, seq: 3, updatedAt: 5_000)
    let finished = SessionRecord(.finished(.elapsed), duration: 5, seq: 4, updatedAt: 5_000)
    let idle = SessionRecord(.idle, seq: 5, updatedAt: 5_000)
    #expect(WebhookEventType.of(.start, result: running) == .started)
    #expect(WebhookEventType.of(.pause, result: running) == .paused)
    #expect(WebhookEventType.of(.resume, result: running) == .resumed)
    #expect(WebhookEventType.of(.adjust, result: running) == .adjusted)
    #expect(WebhookEventType.of(.adjust, result: finished) == .finished)
    #expect(WebhookEventType.of(.cancel, result: idle) == .cancelled)
    #expect(WebhookEventType.of(.wait, result: running) == .waiting)
    #expect(WebhookEventType.of(.done, result: finished) == .finished)
    #expect(WebhookEventType.of(.fail, result: finished) == .finished)
    #expect(WebhookEventType.of(.rotateKey, result: running) == nil)
    #expect(WebhookEventType.of(.rotateKey, result: finished) == nil)
  }

  /// The timestamp is the UTC time of the epoch ms, at both ends of the range a record may hold and on a leap day.
  @Test func iso8601Edges() {
    #expect(WebhookEvent.iso8601(0) == "1970-01-01T00:00:00.000Z")
    #expect(WebhookEvent.iso8601(951_825_600_250) == "2000-02-29T12:00:00.250Z")
    #expect(WebhookEvent.iso8601(1_796_149_800_000) == "2026-12-01T18:30:00.000Z")
    #expect(WebhookEvent.iso8601(253_402_300_799_999) == "9999-12-31T23:59:59.999Z")
    // Outside the range (a broken clock), clamped rather than trapping.
    #expect(WebhookEvent.iso8601(Int64.min) == "1970-01-01T00:00:00.000Z")
    #expect(WebhookEvent.iso8601(Int64.max) == "9999-12-31T23:59:59.999Z")
  }

  /// The same change gives the same id and body; another type, seq or time gives another id.
  @Test func idIsDeterministicAndDistinct() {
    let record = SessionRecord(.running(endsAt: 10_000), duration: 5, seq: 3, updatedAt: 5_000)
    let a = WebhookEvent(.started, session: "team-a", record: record, at: 5_000, config: config)
    let b = WebhookEvent(.started, session: "team-a", record: record, at: 5_000, config: config)
    #expect(a == b)
    #expect(a.id.hasPrefix("msg_") && a.id.count == 36)
    var later = record
    later.updatedAt = 5_001
    var next = record
    next.seq = 4
    let ids: Set = [
      a.id,
      WebhookEvent(.finished, session: "team-a", record: record, at: 10_000, config: config).id,
      WebhookEvent(.started, session: "team-b", record: record, at: 5_000, config: config).id,
      WebhookEvent(.started, session: "team-a", record: later, at: 5_001, config: config).id,
      WebhookEvent(.started, session: "team-a", record: next, at: 5_000, config: config).id,
    ]
    #expect(ids.count == 5)
  }

  /// A run that elapsed reports finished with its outcome and the state at the deadline, counting no viewers.
  @Test func finishedBodyCarriesOutcomeAndState() throws {
    let record = SessionRecord(.running(endsAt: 10_000), duration: 5, seq: 3, updatedAt: 5_000)
    let event = WebhookEvent(
      .finished, session: "team-a", record: record, at: 10_000, config: config)
    guard case .object(let body) = try JSONParser.parse(event.body),
      case .object(let data)? = body["data"], case .object(let state)? = data["state"]
    else {
      Issue.record("body is not an object with data.state")
      return
    }
    #expect(body["type"] == .string("session.finished"))
    #expect(body["timestamp"] == .string("1970-01-01T00:00:10.000Z"))
    #expect(data["session"] == .string("team-a"))
    #expect(data["seq"] == .number("3"))
    #expect(data["outcome"] == .string("elapsed"))
    #expect(state["phase"] == .string("finished"))
    #expect(state["viewers"] == .number("0"))
    #expect(event.timestamp == 10_000)
    #expect(event.seq == 3)
  }

  /// A start's body has no outcome, and a session id with quotes and control characters stays valid JSON.
  @Test func startedBodyEscapesAndHasNoOutcome() throws {
    let record = SessionRecord(.running(endsAt: 10_000), duration: 5, seq: 1, updatedAt: 5_000)
    let session = "a\"b\\c\u{1}"
    let event = WebhookEvent(.started, session: session, record: record, at: 5_000, config: config)
    guard case .object(let body) = try JSONParser.parse(event.body),
      case .object(let data)? = body["data"]
    else {
      Issue.record("body is not an object with data")
      return
    }
    #expect(data["session"] == .string(session))
    #expect(data["outcome"] == nil)
  }
}
