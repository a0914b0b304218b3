import CountdownClient
import Foundation
import Testing

/// `changes()` against the real server binary: the event stream, its reconnects, the clock.
@Suite(.serialized)
struct WatchTests {
  static var quick: CountdownClient.Configuration {
    var c = CountdownClient.Configuration()
    c.reconnectBackoff = Backoff(base: 0.2, cap: 0.5)
    c.commandBackoff = Backoff(base: 0.1, cap: 0.3)
    return c
  }

  /// A short countdown is seen from idle through every second to its finish, with the
  /// spinner, the button and the outcome as the server sets them.
  @Test func followsACountdownToItsEnd() async throws {
    let server = try ServerProcess()
    let client = try CountdownClient(base: server.base, session: "watch")
    let rec = Recorder(client.changes())
    let first = try await rec.next("the first element") { _ in true }
    #expect(first.connection == .connecting || first.isConnected)
    let idle = try await rec.next("idle snapshot") { $0.isConnected }
    #expect(idle.phase == .idle && idle.enabled && !idle.spinner && idle.label == "Ready")
    #expect(idle.epoch?.count == 16)
    #expect(idle.clock.isEstimated)

    _ = try await client.send(.start(seconds: 3, finishLabel: "Go"))
    let running = try await rec.next("running") { $0.phase == .running }
    #expect(running.spinner && !running.enabled)
    #expect(running.seq > idle.seq)
    // However late a loaded machine shows it, the time left is still counting
    // down from the run's own 3 s (give or take the clock offset's error, up
    // to half a round trip), and the label says the same second at the same
    // moment.
    let now = Date()
    let left = try #require(running.timeLeft(now: now))
    #expect(left > 0 && left <= 3.2)
    #expect(running.clockLabel(now: now) == String(Int(left.rounded(.up))))
    let one = try await rec.next("the tick at 1") { $0.label == "1" }
    #expect(one.phase == .running && one.seq > running.seq)
    let done = try await rec.next("finished") { $0.phase == .finished }
    #expect(done.outcome == .elapsed && done.label == "Go" && done.enabled && !done.spinner)
    #expect(done.timeLeft() == nil && done.clockLabel() == "Go")
    await rec.cancel()
  }

  /// A consumer that stops iterating closes its stream: another watcher sees the server
  /// count one viewer less.
  @Test func stoppingClosesTheStream() async throws {
    let server = try ServerProcess()
    let client = try CountdownClient(base: server.base, session: "leave")
    _ = try await client.send(.start(seconds: 60))  // ticks, so the server writes and notices
    let stays = Recorder(client.changes())
    let leaves = Recorder(client.changes())
    _ = try await leaves.next("connected") { $0.isConnected }
    _ = try await stays.next("two viewers") { $0.state?.viewers == 2 }
    await leaves.cancel()
    _ = try await stays.next("one viewer", within: 10) { $0.state?.viewers == 1 }
    await stays.cancel()
  }

  /// A wait's elapsed time counts up from its `startedAt`; done ends it with its outcome.
  @Test func followsAWait() async throws {
    let server = try ServerProcess()
    let client = try CountdownClient(base: server.base, session: "job")
    let rec = Recorder(client.changes())
    _ = try await rec.next("connected") { $0.isConnected }
    _ = try await client.send(.wait(label: "Building"))
    let waiting = try await rec.next("waiting") { $0.phase == .waiting }
    #expect(waiting.label == "Building" && waiting.spinner)
    let elapsed = try #require(waiting.elapsed())
    #expect(elapsed >= 0 && elapsed < 2)
    #expect(waiting.elapsedLabel()?.hasPrefix("0:0") == true)
    let startedAt = try #require(waiting.state?.startedAt)
    let later =
      Date(timeIntervalSince1970: Double(startedAt) / 1000 + 75) - waiting.clock.milliseconds / 1000
    #expect(waiting.elapsedLabel(now: later) == "1:15")
    _ = try await client.send(.fail(label: "Broke"))
    let failed = try await rec.next("failed") { $0.phase == .finished }
    #expect(failed.outcome == .failed && failed.label == "Broke")
    await rec.cancel()
  }

  /// A `kill -9` of the server is seen as reconnecting; the server started again on the same
  /// port from the same database is followed again: the same run, and its later changes.
  @Test func reconnectsAcrossARestart() async throws {
    let first = try ServerProcess()
    let port = first.port
    let client = try CountdownClient(
      base: first.base, session: "restart", configuration: Self.quick)
    let ack = try await client.send(.start(seconds: 600))
    let rec = Recorder(client.changes())
    let before = try await rec.next("running") {
      $0.isConnected && $0.phase == .running
    }
    #expect(before.state?.endsAt == ack.state.endsAt)

    first.kill()
    let lost = try await rec.next("reconnecting") { $0.isReconnecting }
    #expect(lost.phase == .running)  // the last state is kept meanwhile
    // Several tries fail while the server is down; the attempts count up.
    let again = try await rec.next("a second failed try") {
      if case .reconnecting(let n, _, _) = $0.connection { return n >= 2 }
      return false
    }
    #expect(again.state == lost.state)

    let second = try ServerProcess(port: port, dataDir: first.dataDir)
    let back = try await rec.next("connected again") { $0.isConnected }
    #expect(back.state?.endsAt == ack.state.endsAt)
    #expect(back.seq >= before.seq)
    _ = try await client.send(.pause)
    let paused = try await rec.next("the pause, on the new stream") { $0.phase == .paused }
    #expect(paused.seq > back.seq)
    await rec.cancel()
    second.kill()
  }

  /// The reconnect sends `Last-Event-ID`: a server that restarted with nothing stored (so
  /// its session is new, at seq 0) answers with a snapshot at least at the seq held.
  @Test func resumesWithLastEventID() async throws {
    let first = try ServerProcess(["--data", ":memory:"])
    let port = first.port
    let client = try CountdownClient(base: first.base, session: "resume", configuration: Self.quick)
    for _ in 0..<3 {
      _ = try await client.send(.start(seconds: 60))
      _ = try await client.send(.cancel)
    }
    let rec = Recorder(client.changes())
    let before = try await rec.next("connected") { $0.isConnected }
    #expect(before.seq >= 5)
    first.kill()
    _ = try await rec.next("reconnecting") { $0.isReconnecting }
    let second = try ServerProcess(["--data", ":memory:"], port: port)
    let back = try await rec.next("connected again") { $0.isConnected }
    #expect(back.seq >= before.seq)
    #expect(back.phase == .idle)
    await rec.cancel()
    second.kill()
  }

  /// A stream that goes silent (the server stopped with SIGSTOP: the socket stays open) is
  /// given up after the idle timeout, and followed again once the server runs.
  @Test func silentStreamIsReopened() async throws {
    let server = try ServerProcess()
    var config = Self.quick
    config.streamIdleTimeout = 1.5
    let client = try CountdownClient(base: server.base, session: "quiet", configuration: config)
    let rec = Recorder(client.changes())
    _ = try await rec.next("connected") { $0.isConnected }
    kill(server.process.processIdentifier, SIGSTOP)
    let t0 = Date()
    let lost = try await rec.next("reconnecting", within: 10) { $0.isReconnecting }
    #expect(Date().timeIntervalSince(t0) >= 1.2)
    if case .reconnecting(_, _, let reason) = lost.connection {
      #expect(reason.description.contains("nothing from the server"))
    }
    kill(server.process.processIdentifier, SIGCONT)
    _ = try await rec.next("connected again", within: 15) { $0.isConnected }
    await rec.cancel()
  }

  /// A server that answers the stream with 404 (no API under that path) ends the sequence
  /// with `.closed`, instead of retrying for ever.
  @Test func refusalClosesTheSequence() async throws {
    let server = try ServerProcess()
    let client = try CountdownClient(
      base: server.base.appendingPathComponent("no/such/prefix/"), session: "x",
      configuration: Self.quick)
    let rec = Recorder(client.changes())
    let closed = try await rec.next("closed") {
      if case .closed = $0.connection { return true }
      return false
    }
    guard case .closed(let error) = closed.connection else { return }
    #expect(!error.isTransient)
    do {
      _ = try await rec.next("nothing more", within: 2) { _ in true }
      Issue.record("an element after .closed")
    } catch is Recorder.Ended {}
  }

  /// A base URL under which the server has a file where the stream would be (lws refuses
  /// its unknown type with 415) ends the sequence with `.closed`: retrying cannot help.
  @Test func notAnEventStreamClosesTheSequence() async throws {
    let dir = try ServerProcess.freshDataDir()
    let fake = dir.appendingPathComponent("public/p/api/v1/sessions/x")
    try FileManager.default.createDirectory(at: fake, withIntermediateDirectories: true)
    try Data("event: snapshot\ndata: {}\n\n".utf8).write(to: fake.appendingPathComponent("events"))
    try Data("<!doctype html>".utf8).write(to: dir.appendingPathComponent("public/index.html"))
    let server = try ServerProcess(
      ["--public", dir.appendingPathComponent("public").path], dataDir: dir)
    let client = try CountdownClient(
      base: server.base.appendingPathComponent("p/"), session: "x", configuration: Self.quick)
    let rec = Recorder(client.changes())
    let closed = try await rec.next("closed") {
      if case .closed = $0.connection { return true }
      return false
    }
    #expect(closed.state == nil)
  }

  /// The time left is the server's, through the clock offset: a server whose clock runs an
  /// hour ahead still shows the 90 s it counts, not 90 s less an hour.
  @Test func clockOffsetKeepsTimeLeftTrue() async throws {
    let server = try ServerProcess(["--test-clock-offset-ms", "3600000"])
    let client = try CountdownClient(base: server.base, session: "skew")
    _ = try await client.send(.start(seconds: 90))
    let rec = Recorder(client.changes())
    let live = try await rec.next("running") {
      $0.isConnected && $0.phase == .running
    }
    #expect(abs(live.clock.milliseconds - 3_600_000) < 1_000)
    #expect(try #require(live.clock.uncertainty) < 1_000)
    let left = try #require(live.timeLeft())
    #expect(left > 85 && left <= 90)
    let label = live.clockLabel()
    #expect(label.hasPrefix("1:2") || label == "1:30")
    var clock = ClockOffset()
    try await client.measureClock(into: &clock)
    #expect(abs(clock.milliseconds - 3_600_000) < 1_000)
    await rec.cancel()
  }
}
