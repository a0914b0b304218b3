import CountdownClient
import Foundation
import Testing

/// Commands and reads against the real server binary.
@Suite(.serialized)
struct CommandTests {
  /// Fast retries, so that a test of the retry path takes a second, not ten.
  static var quick: CountdownClient.Configuration {
    var c = CountdownClient.Configuration()
    c.commandBackoff = Backoff(base: 0.1, cap: 0.3)
    c.requestTimeout = 5
    return c
  }

  /// A start is acked with the running state, and a read afterwards shows the same run.
  @Test func startThenFetch() async throws {
    let server = try ServerProcess()
    let client = try CountdownClient(base: server.base, session: "team-a")
    let before = Date()
    let ack = try await client.send(.start(seconds: 90, finishLabel: "Lunch"))
    #expect(ack.state.phase == .running)
    #expect(ack.state.spinner && !ack.state.enabled)
    #expect(ack.state.duration == 90)
    let endsAt = try #require(ack.state.endsAt)
    let expected = Int64(before.timeIntervalSince1970 * 1000) + 90_000
    #expect(abs(endsAt - expected) < 5_000)

    let snap = try await client.fetch()
    #expect(snap.session == "team-a")
    #expect(snap.seq >= ack.seq)
    #expect(snap.state.endsAt == endsAt)
    #expect(snap.epoch.count == 16)

    let paused = try await client.send(.pause)
    #expect(paused.seq > ack.seq)
    #expect(paused.state.phase == .paused)
    #expect(paused.state.endsAt == nil)
    let left = try #require(paused.state.remainingMs)
    #expect(left > 80_000 && left <= 90_000)
    #expect(try await client.send(.resume).state.phase == .running)
    let adjusted = try await client.send(.adjust(seconds: -60))
    #expect(adjusted.state.duration == 30)
    #expect(try await client.send(.cancel).state.phase == .idle)
  }

  /// A wait, then done and fail, carry their labels and outcomes.
  @Test func waitDoneFail() async throws {
    let server = try ServerProcess()
    let client = try CountdownClient(base: server.base, session: "ci")
    let waiting = try await client.send(.wait(label: "Deploying", timeoutSeconds: 900))
    #expect(waiting.state.phase == .waiting)
    #expect(waiting.state.label == "Deploying")
    #expect(waiting.state.spinner)
    let started = try #require(waiting.state.startedAt)
    #expect(waiting.state.timeoutAt == started + 900_000)
    let done = try await client.send(.done(label: "Deployed"))
    #expect(done.state.phase == .finished)
    #expect(done.state.outcome == .done)
    #expect(done.state.label == "Deployed")
    _ = try await client.send(.wait())
    let failed = try await client.send(.fail())
    #expect(failed.state.outcome == .failed)
    #expect(failed.state.label == "Failed")
  }

  /// A refusal comes back as the server's code, message and HTTP status.
  @Test func refusalCarriesCodeAndStatus() async throws {
    let server = try ServerProcess()
    let client = try CountdownClient(base: server.base, session: "s1")
    await #expect(throws: CountdownError.self) { try await client.send(.pause) }
    do {
      _ = try await client.send(.pause)
      Issue.record("pause while idle was acked")
    } catch let CountdownError.refused(r) {
      #expect(r.code == .notRunning)
      #expect(r.status == 409)
      #expect(!r.message.isEmpty)
    }
    _ = try await client.send(.start(seconds: 10))
    let busy = await #expect(throws: CountdownError.self) {
      try await client.send(.start(seconds: 10))
    }
    #expect(busy?.code == .busy)
    #expect(busy?.isTransient == false)
    let notWaiting = await #expect(throws: CountdownError.self) { try await client.send(.done()) }
    #expect(notWaiting?.code == .notWaiting)
  }

  /// Values at and past the edges reach the server as given and come back as
  /// `bad_request` (or the 413 of a body over 4 KB), never as a crash or a rounding.
  @Test(arguments: [
    Command.start(seconds: Int.max),
    .start(seconds: Int.min),
    .start(seconds: 0),
    .start(seconds: 86401),
    .adjust(seconds: 0),
    .adjust(seconds: 86401),
    .startUntil(epochMs: Int64.max),
    .startUntil(epochMs: -1),
    .wait(timeoutSeconds: 0),
    .wait(label: "a\u{0}b"),
    .wait(label: String(repeating: "x", count: 65)),
    .start(seconds: 5, finishLabel: String(repeating: "é", count: 4096)),
    .done(label: "line\nbreak"),
    .rotateKey,  // open mode: bad_request
  ])
  func badValuesAreRefused(command: Command) async throws {
    let server = try ServerProcess()
    let client = try CountdownClient(base: server.base, session: "edges")
    if case .done = command { _ = try await client.send(.wait()) }
    let error = await #expect(throws: CountdownError.self) { try await client.send(command) }
    guard case .refused(let r)? = error else {
      Issue.record("not a refusal: \(String(describing: error))")
      return
    }
    #expect(r.code == .badRequest)
    #expect([400, 413].contains(r.status))
    // Nothing applied.
    let snap = try await client.fetch()
    #expect(snap.state.phase == (command.op == "done" ? .waiting : .idle))
  }

  /// The same Idempotency-Key twice: the second answer is the first, and the command
  /// applies once (a second start would be `busy`).
  @Test func idempotencyKeyReplays() async throws {
    let server = try ServerProcess()
    let client = try CountdownClient(base: server.base, session: "idem")
    let first = try await client.send(.start(seconds: 60), idempotencyKey: "job-42")
    let again = try await client.send(.start(seconds: 60), idempotencyKey: "job-42")
    #expect(again == first)
    let other = await #expect(throws: CountdownError.self) {
      try await client.send(.start(seconds: 30), idempotencyKey: "job-42")
    }
    #expect(other?.code == .badRequest)
    #expect(try await client.fetch().state.duration == 60)
  }

  /// Keys and session ids the server would refuse are refused before any request.
  @Test func badKeysAndIdsNeverLeave() async throws {
    let base = URL(string: "http://127.0.0.1:9/")!
    for id in ["", String(repeating: "a", count: 65), "a/b", "a b", "a\u{0}", "é", "../x"] {
      #expect(throws: CountdownError.self) { try CountdownClient(base: base, session: id) }
    }
    #expect(throws: CountdownError.self) {
      try CountdownClient(base: base, session: "s", token: "two words")
    }
    #expect(throws: CountdownError.self) {
      try CountdownClient(base: base, session: "s", token: "a\r\nX-Evil: 1")
    }
    #expect(throws: CountdownError.self) {
      try CountdownClient(base: URL(string: "ftp://h/")!, session: "s")
    }
    #expect(CountdownClient.isValidSession(String(repeating: "a", count: 64)))
    let client = try CountdownClient(base: base, session: "s")
    for key in ["", String(repeating: "k", count: 256), "has space", "nul\u{0}", "é"] {
      let error = await #expect(throws: CountdownError.self) {
        try await client.send(.pause, idempotencyKey: key)
      }
      guard case .invalidArgument? = error else {
        Issue.record("\(key.debugDescription): \(String(describing: error))")
        continue
      }
    }
    #expect(CountdownClient.isValidIdempotencyKey(String(repeating: "~", count: 255)))
  }

  /// A client of a server that was started and killed: nothing listens on its port.
  func clientOfKilledServer(session: String, attempts: Int) throws -> (
    CountdownClient, ServerProcess
  ) {
    let server = try ServerProcess()
    server.kill()
    var config = Self.quick
    config.commandAttempts = attempts
    config.reconnectBackoff = Backoff(base: 0.05, cap: 0.1)
    let client = try CountdownClient(
      base: URL(string: "http://127.0.0.1:\(server.port)/")!, session: session,
      configuration: config)
    return (client, server)
  }

  /// A server that is down answers nothing: `unreachable`, after the configured tries.
  @Test func unreachableAfterRetries() async throws {
    let (client, _) = try clientOfKilledServer(session: "gone", attempts: 3)
    let error = await #expect(throws: CountdownError.self) { try await client.send(.start()) }
    guard case .unreachable? = error else {
      Issue.record("not unreachable: \(String(describing: error))")
      return
    }
  }

  /// A command sent while the server is down is retried with the same key until the
  /// server is back on the same port, and then applies once.
  @Test func retriesUntilServerIsBack() async throws {
    let (client, first) = try clientOfKilledServer(session: "back", attempts: 100)
    let sending = Task { try await client.send(.start(seconds: 120)) }
    // A watch's second failed try: the server has been seen down for a while, after the
    // command's first try went out.
    let rec = Recorder(client.changes())
    _ = try await rec.next("two failed tries") {
      if case .reconnecting(let n, _, _) = $0.connection { return n >= 2 }
      return false
    }
    await rec.cancel()
    let second = try ServerProcess(port: first.port, dataDir: first.dataDir)
    let ack = try await sending.value
    #expect(ack.state.phase == .running)
    #expect(try await client.fetch().seq >= ack.seq)
    second.kill()
  }

  /// `429 rate_limited` is waited out (its Retry-After) and retried, not thrown.
  @Test func rateLimitIsRetried() async throws {
    let server = try ServerProcess(["--max-commands-per-second", "1"])
    let client = try CountdownClient(
      base: server.base, session: "rl", configuration: Self.quick)
    _ = try await client.send(.start(seconds: 60))
    let t0 = Date()
    let paused = try await client.send(.pause)
    #expect(paused.state.phase == .paused)
    // The second command could only go through after the server's second was over.
    #expect(Date().timeIntervalSince(t0) > 0.2)
  }

  /// With `--control key`, a command needs the controller key or a token; the ack of a
  /// `rotate_key` carries the new key, and the old one stops working.
  @Test func controllerKeyAndToken() async throws {
    let dir = try ServerProcess.freshDataDir()
    let tokenFile = dir.appendingPathComponent("tokens")
    let token = "tok-0123456789abcdef"
    try (token + "\n").write(to: tokenFile, atomically: true, encoding: .utf8)
    let server = try ServerProcess(
      ["--control", "key", "--api-token-file", tokenFile.path], dataDir: dir)
    let anonymous = try CountdownClient(base: server.base, session: "k")
    let refused = await #expect(throws: CountdownError.self) {
      try await anonymous.send(.start(seconds: 5))
    }
    #expect(refused?.code == .forbidden)
    let admin = try CountdownClient(base: server.base, session: "k", token: token)
    let rotated = try await admin.send(.rotateKey)
    let key = try #require(rotated.key)
    let host = try CountdownClient(base: server.base, session: "k", token: key)
    #expect(try await host.send(.start(seconds: 5)).state.phase == .running)
    _ = try await admin.send(.rotateKey)
    let stale = await #expect(throws: CountdownError.self) { try await host.send(.cancel) }
    #expect(stale?.code == .forbidden)
    // Watching needs no credential: a stale one does not stop it.
    let rec = Recorder(host.changes())
    let live = try await rec.next("connected") { $0.connection == .connected }
    #expect(live.phase == .running)
    await rec.cancel()
  }
}
