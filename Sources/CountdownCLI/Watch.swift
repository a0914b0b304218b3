import CountdownClient
import Foundation

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// The one line `watch` keeps: the latest state, drawn in place on a terminal (the spinner
/// turns between the server's changes, the time from the clock offset), or printed as a
/// plain line when it differs from the last one on a pipe.
final class WatchScreen: @unchecked Sendable {
  private let lock = NSLock()
  private let console: Console
  private let color: Bool
  private var state: SessionState? = nil
  private var connected = true
  private var clock: ClockOffset
  private var lastPlain: String? = nil
  private var ended = false

  init(console: Console, clock: ClockOffset) {
    self.console = console
    self.color = usesColor(isTerminal: console.outIsTerminal, environment: console.environment)
    self.clock = clock
  }

  func update(state: SessionState?, connected: Bool, clock: ClockOffset? = nil) {
    lock.withLock {
      if let state { self.state = state }
      self.connected = connected
      if let clock, clock.isEstimated { self.clock = clock }
      if console.outIsTerminal {
        drawLocked()
      } else if let current = self.state {
        let line = LineRenderer.plain(frame(of: current, serverNow: nil, connected: connected))
        if line != lastPlain {
          lastPlain = line
          console.out(line + "\n")
        }
      }
    }
  }

  /// Redraws the terminal line (the spinner's next frame, the next second).
  func tick() {
    lock.withLock { if console.outIsTerminal { drawLocked() } }
  }

  /// The last draw, then a line end so the shell's prompt starts on a line of its own.
  func end() {
    lock.withLock {
      guard !ended else { return }
      if console.outIsTerminal {
        drawLocked()
        console.out("\n")
      }
      ended = true
    }
  }

  private func drawLocked() {
    guard let state, !ended else { return }
    let now = Date()
    let f = frame(of: state, serverNow: clock.serverTime(at: now), connected: connected)
    let ms = Int64((now.timeIntervalSince1970 * 1000).rounded(.down))
    console.out(
      LineRenderer.terminal(
        f, atMilliseconds: ms, color: color, width: terminalColumns(STDOUT_FILENO)))
  }
}

/// `countdown watch`: the session live until Ctrl-C, or until it is finished with
/// `--exit-on-finish`.
func watch(_ client: CountdownClient, exitOnFinish: Bool, console: Console) async -> Int32 {
  // A first read: an unreachable server or a refused read ends here (3 or 1), rather than in
  // a reconnect loop that never had anything to show; it also seeds the clock offset.
  var clock = ClockOffset()
  let first: SessionSnapshot
  do {
    let sentAt = Date()
    first = try await client.fetch()
    _ = clock.add(serverTime: first.serverTime, sentAt: sentAt, receivedAt: Date())
  } catch {
    return report(error, console: console)
  }
  let screen = WatchScreen(console: console, clock: clock)
  let relay = SignalRelay([SIGINT, SIGTERM, SIGHUP]) { signo in
    screen.end()
    raiseDefault(signo)
  }
  let ticker = Task {
    while !Task.isCancelled {
      try? await Task.sleep(nanoseconds: UInt64(Spinner.frameMilliseconds) * 1_000_000)
      screen.tick()
    }
  }
  defer { ticker.cancel() }
  screen.update(state: first.state, connected: true)
  if exitOnFinish, let code = finishStatus(first.state) {
    screen.end()
    return code
  }
  // TEMP: poll until the SSE stream of CountdownClient lands.
  while true {
    try? await Task.sleep(nanoseconds: 200_000_000)
    do {
      let s = try await client.fetch()
      screen.update(state: s.state, connected: true)
      if exitOnFinish, let code = finishStatus(s.state) {
        screen.end()
        withExtendedLifetime(relay) {}
        return code
      }
    } catch {
      screen.update(state: nil, connected: false)
    }
  }
}

/// `--exit-on-finish`'s status for a finished state: 0 elapsed or done, 1 failed or timeout.
func finishStatus(_ state: SessionState) -> Int32? {
  guard state.phase == .finished else { return nil }
  return state.outcome == .elapsed || state.outcome == .done
    ? ExitCode.ok.rawValue : ExitCode.failed.rawValue
}
