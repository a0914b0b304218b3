import CountdownCore
import Foundation
import Observability
import Testing

@testable import WebhookDelivery

#if canImport(Glibc)
  import Glibc
#endif

@Suite struct DelivererTests {
  /// The reference libraries' example key, twice over (24 bytes at least).
  static let secret = WebhookSecret(
    unchecked: Array("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSwMfKQ9r8GKYqr".utf8))

  static func now() -> Int64 { Int64(Date().timeIntervalSince1970 * 1000) }

  /// A deliverer with quick retries (jitter 0, 1 ms backoff) unless told otherwise.
  static func deliverer(
    _ urls: [String], outbox: MemoryOutbox, events: WebhookEventFilter = .all,
    policy: RetryPolicy = RetryPolicy(baseMs: 1, capMs: 1, windowMs: 60_000),
    timeoutMs: Int = 5000, maxInFlight: Int = 16,
    log: Logger = Logger(level: .error, format: .json),
    jitter: @escaping @Sendable () -> Double = { 0 }
  ) throws -> WebhookDeliverer {
    let settings = WebhookDeliverer.Settings(
      endpoints: try urls.map { try WebhookEndpoint(parsing: $0) }, secret: secret,
      events: events, policy: policy, timeoutMs: timeoutMs, maxInFlight: maxInFlight, pollMs: 50)
    return WebhookDeliverer(
      settings: settings, outbox: outbox, clock: { now() }, log: log, jitter: jitter)
  }

  static func isSettled(_ calls: [MemoryOutbox.Call]) -> Bool {
    calls.contains {
      if case .delivered = $0 { true } else if case .dead = $0 { true } else { false }
    }
  }

  /// A receiver that answers 500 twice gets the event a third time, signed, with the same id, and the outbox learns of each try.
  @Test func deliveredOnTheThirdTry() throws {
    let receiver = try Receiver { _, before in before < 2 ? 500 : 200 }
    let outbox = MemoryOutbox()
    let event = sampleEvent(at: Self.now())
    outbox.add(event, handle: "1")
    let deliverer = try Self.deliverer([receiver.url], outbox: outbox)
    deliverer.start()
    defer { deliverer.stop() }
    #expect(outbox.state.wait { Self.isSettled($0.calls) })
    let settlements = outbox.settlements
    #expect(settlements.count == 3)
    guard settlements.count == 3 else { return }
    if case .retry("1", 1, _) = settlements[0] {} else { Issue.record("first: \(settlements[0])") }
    if case .retry("1", 2, _) = settlements[1] {} else { Issue.record("second: \(settlements[1])") }
    #expect(settlements[2] == .delivered("1"))
    let requests = receiver.requests.value
    #expect(requests.count == 3)
    let signer = StandardWebhookSigner(secret: Self.secret)
    for request in requests {
      #expect(request.method == "POST" && request.path == "/hook")
      #expect(request.body == event.body)
      #expect(request.headers["content-type"] == "application/json")
      #expect(request.headers["user-agent"] == "countdown-server")
      #expect(request.headers["expect"] == nil)
      #expect(request.headers["webhook-id"] == event.id)
      let timestamp = Int64(request.headers["webhook-timestamp"] ?? "") ?? -1
      #expect(abs(timestamp - Self.now() / 1000) < 60)
      #expect(
        request.headers["webhook-signature"]
          == signer.signature(id: event.id, timestamp: timestamp, body: event.body))
    }
    let stats = deliverer.stats
    #expect(stats.delivered == 1 && stats.retried == 2 && stats.dead == 0)
    #expect(stats.latencyMs.count == 1)
  }

  /// A receiver that never answers costs one timeout, then a retry, and the event still arrives.
  @Test func timeoutIsRetried() throws {
    let receiver = try Receiver { _, before in before == 0 ? nil : 204 }
    let outbox = MemoryOutbox()
    outbox.add(sampleEvent(at: Self.now()), handle: "slow")
    let deliverer = try Self.deliverer([receiver.url], outbox: outbox, timeoutMs: 300)
    let started = ProcessInfo.processInfo.systemUptime
    deliverer.start()
    defer { deliverer.stop() }
    #expect(outbox.state.wait { Self.isSettled($0.calls) })
    #expect(
      outbox.settlements.first.map { if case .retry("slow", 1, _) = $0 { true } else { false } }
        == true)
    #expect(outbox.settlements.last == .delivered("slow"))
    let requests = receiver.requests.value
    #expect(requests.count == 2)
    if requests.count == 2 {
      // The second try waited for the first to time out (the receiver's own
      // delay only adds to the arrival, so the bound holds on a loaded machine).
      #expect(requests[1].arrivedAt - started >= 0.3)
    }
  }

  /// A failure after the retry window gives the event up: `dead` in the outbox, a counter, and a webhook_dead line naming it.
  @Test func deadAfterTheWindow() throws {
    let receiver = try Receiver { _, _ in 503 }
    let outbox = MemoryOutbox()
    let event = sampleEvent(at: Self.now())
    outbox.add(event, handle: "gone")
    let captured = try CapturedLog()
    let log = captured.logger
    let deliverer = try Self.deliverer(
      [receiver.url], outbox: outbox, policy: RetryPolicy(baseMs: 1, capMs: 1, windowMs: 0),
      log: log)
    deliverer.start()
    defer { deliverer.stop() }
    #expect(outbox.state.wait { Self.isSettled($0.calls) })
    #expect(outbox.settlements == [.dead("gone")])
    #expect(receiver.requests.value.count == 1)
    #expect(deliverer.stats.dead == 1 && deliverer.stats.delivered == 0)
    let line = try captured.text()
    #expect(line.contains("\"webhook_dead\""))
    #expect(line.contains(event.id) && line.contains("HTTP 503") && line.contains("\"attempts\":1"))
  }

  /// A refused connection is a failure like any other: retried, then dead, with curl's reason.
  @Test func connectionRefusedIsRetried() throws {
    let port = closedPort()
    let outbox = MemoryOutbox()
    outbox.add(sampleEvent(at: Self.now() - 100), handle: "x")
    let deliverer = try Self.deliverer(
      ["http://127.0.0.1:\(port)/"], outbox: outbox,
      policy: RetryPolicy(baseMs: 1, capMs: 1, windowMs: 300))
    deliverer.start()
    defer { deliverer.stop() }
    #expect(outbox.state.wait { Self.isSettled($0.calls) })
    #expect(outbox.settlements.last == .dead("x"))
    #expect(deliverer.stats.retried >= 1)
  }

  /// With two endpoints the entry is settled once both took it, and the one that took it first is not sent it again.
  @Test func everyEndpointTakesItOnce() throws {
    let good = try Receiver { _, _ in 200 }
    let flaky = try Receiver { _, before in before == 0 ? 500 : 200 }
    let outbox = MemoryOutbox()
    outbox.add(sampleEvent(at: Self.now()), handle: "both")
    let deliverer = try Self.deliverer([good.url, flaky.url], outbox: outbox)
    deliverer.start()
    defer { deliverer.stop() }
    #expect(outbox.state.wait { Self.isSettled($0.calls) })
    #expect(outbox.settlements.last == .delivered("both"))
    #expect(good.requests.value.count == 1)
    #expect(flaky.requests.value.count == 2)
  }

  /// A type the filter leaves out is settled without a request; one it lets through is sent.
  @Test func filteredTypesAreSettledUnsent() throws {
    let receiver = try Receiver { _, _ in 200 }
    let outbox = MemoryOutbox()
    outbox.add(sampleEvent(.finished, at: Self.now()), handle: "finished")
    let started = sampleEvent(.started, seq: 4, at: Self.now())
    outbox.add(started, handle: "started")
    let deliverer = try Self.deliverer(
      [receiver.url], outbox: outbox, events: WebhookEventFilter(types: [.started]))
    deliverer.start()
    defer { deliverer.stop() }
    #expect(
      outbox.state.wait {
        $0.calls.filter { $0 == .delivered("finished") || $0 == .delivered("started") }.count == 2
      })
    let requests = receiver.requests.value
    #expect(requests.count == 1)
    #expect(requests.first?.headers["webhook-id"] == started.id)
  }

  /// At most maxInFlight entries are held: with two slots and a receiver that hangs, the third event waits for a slot.
  @Test func inFlightIsBounded() throws {
    let receiver = try Receiver { _, before in before < 2 ? nil : 200 }
    let outbox = MemoryOutbox()
    for index in 0..<5 {
      outbox.add(sampleEvent(seq: UInt64(index + 1), at: Self.now()), handle: "\(index)")
    }
    let deliverer = try Self.deliverer(
      [receiver.url], outbox: outbox, timeoutMs: 400, maxInFlight: 2)
    let started = ProcessInfo.processInfo.systemUptime
    deliverer.start()
    defer { deliverer.stop() }
    #expect(
      outbox.state.wait {
        $0.calls.filter { if case .delivered = $0 { true } else { false } }.count == 5
      })
    let takes = outbox.state.value.calls.compactMap {
      if case .take(let limit) = $0 { limit } else { nil }
    }
    #expect(takes.allSatisfy { $0 >= 0 && $0 <= 2 })
    let requests = receiver.requests.value
    #expect(requests.count == 7)
    if requests.count == 7 {
      #expect(Set(requests[0..<2].map { $0.headers["webhook-id"] ?? "" }).count == 2)
      // Nothing else was sent until the two hung requests timed out.
      #expect(requests[2].arrivedAt - started >= 0.4)
    }
    #expect(deliverer.stats.queued == 0)
  }

  /// Stopping drops the transfers under way without settling them: their entries are handed back, not delivered or dead.
  @Test func stopLeavesInFlightEntriesInTheOutbox() throws {
    let receiver = try Receiver { _, _ in nil }
    let outbox = MemoryOutbox()
    outbox.add(sampleEvent(at: Self.now()), handle: "kept")
    let deliverer = try Self.deliverer([receiver.url], outbox: outbox)
    deliverer.start()
    #expect(receiver.requests.wait { $0.count == 1 })
    #expect(deliverer.stats.queued == 1)
    deliverer.stop()
    #expect(outbox.settlements == [.handBack(["kept"])])
    #expect(deliverer.stats.queued == 0)
  }

  /// Stopping hands back, in one last call, every entry it held unsettled (one in flight, one waiting a minute for its retry), and not one it delivered.
  @Test func stopHandsBackWhatItHeld() throws {
    let receiver = try Receiver { request, _ in
      let body = String(decoding: request.body, as: UTF8.self)
      if body.contains(#""session":"ok""#) { return 200 }
      return body.contains(#""session":"retry""#) ? 503 : nil
    }
    let outbox = MemoryOutbox()
    for session in ["ok", "retry", "hang"] {
      outbox.add(sampleEvent(session: session, at: Self.now()), handle: session)
    }
    let deliverer = try Self.deliverer(
      [receiver.url], outbox: outbox,
      policy: RetryPolicy(baseMs: 60_000, capMs: 60_000, windowMs: 3_600_000), jitter: { 0.99 })
    deliverer.start()
    #expect(outbox.state.wait { $0.calls.contains { if case .retry = $0 { true } else { false } } })
    #expect(receiver.requests.wait { $0.count == 3 })
    #expect(outbox.state.wait { Self.isSettled($0.calls) })
    deliverer.stop()
    #expect(outbox.settlements.last == .handBack(["hang", "retry"]))
    #expect(outbox.settlements.filter { if case .handBack = $0 { true } else { false } }.count == 1)
    #expect(outbox.settlements.contains(.delivered("ok")))
  }

  /// A wake-up makes the deliverer ask the outbox at once rather than at its next poll.
  @Test func wakeAsksTheOutboxAtOnce() throws {
    let receiver = try Receiver { _, _ in 200 }
    let outbox = MemoryOutbox()
    let settings = WebhookDeliverer.Settings(
      endpoints: [try WebhookEndpoint(parsing: receiver.url)], secret: Self.secret,
      pollMs: 60_000)
    let deliverer = WebhookDeliverer(
      settings: settings, outbox: outbox, clock: { Self.now() },
      log: Logger(level: .error, format: .json))
    deliverer.start()
    defer { deliverer.stop() }
    // The first poll happens at start; after it, only a wake-up asks again.
    #expect(outbox.state.wait { $0.calls.count >= 1 })
    outbox.add(sampleEvent(at: Self.now()), handle: "woken")
    deliverer.wake()
    #expect(outbox.state.wait(seconds: 5) { $0.calls.contains(.delivered("woken")) })
  }

  /// After a full batch the outbox is asked again as soon as a slot frees, not at the next poll.
  @Test func aFullBatchIsFollowedAtOnce() throws {
    let receiver = try Receiver { _, _ in 200 }
    let outbox = MemoryOutbox()
    for index in 0..<5 {
      outbox.add(sampleEvent(seq: UInt64(index + 1), at: Self.now()), handle: "\(index)")
    }
    let settings = WebhookDeliverer.Settings(
      endpoints: [try WebhookEndpoint(parsing: receiver.url)], secret: Self.secret,
      maxInFlight: 2, pollMs: 60_000)
    let deliverer = WebhookDeliverer(
      settings: settings, outbox: outbox, clock: { Self.now() },
      log: Logger(level: .error, format: .json))
    deliverer.start()
    defer { deliverer.stop() }
    // With a minute between polls, only the follow-up takes can deliver all five in time.
    #expect(
      outbox.state.wait(seconds: 10) {
        $0.calls.filter { if case .delivered = $0 { true } else { false } }.count == 5
      })
  }

  /// A take that fails is logged and tried again at the next poll, not in a busy loop.
  @Test func aFailingTakeIsRetriedAtThePoll() throws {
    let outbox = MemoryOutbox()
    outbox.state.update { $0.failTakes = true }
    let captured = try CapturedLog()
    let log = captured.logger
    let deliverer = try Self.deliverer(["http://127.0.0.1:9/"], outbox: outbox, log: log)
    let started = Date()
    deliverer.start()
    #expect(outbox.state.wait { $0.calls.count >= 4 })
    deliverer.stop()
    // Four takes with the 50 ms poll between them take about 150 ms (less a
    // little: the poll counts whole ms); a busy loop would take microseconds.
    #expect(Date().timeIntervalSince(started) >= 0.12)
    let text = try captured.text()
    #expect(text.contains("\"webhook_outbox_failed\"") && text.contains("\"operation\":\"take\""))
  }

  /// A full deliverer still asks the outbox at every poll, for nothing, so the outbox can store settlements and keep its claims.
  @Test func aFullDelivererStillPollsTheOutbox() throws {
    let receiver = try Receiver { _, _ in nil }
    let outbox = MemoryOutbox()
    outbox.add(sampleEvent(at: Self.now()), handle: "stuck")
    let deliverer = try Self.deliverer([receiver.url], outbox: outbox, maxInFlight: 1)
    deliverer.start()
    defer { deliverer.stop() }
    #expect(receiver.requests.wait { $0.count == 1 })
    #expect(outbox.state.wait { $0.calls.filter { $0 == .take(limit: 0) }.count >= 2 })
    #expect(outbox.settlements.isEmpty)
  }
}
