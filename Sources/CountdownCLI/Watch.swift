import CountdownClient
import Foundation

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// The one line `watch` keeps: the latest update, drawn in place on a terminal (the spinner
/// turns and the clock moves between the server's changes), or printed as a plain line when
/// it differs from the last one on a pipe.
final class WatchScreen: @unchecked Sendable {
  private let lock = NSLock()
  private let console: Console
  private let color: Bool
  private var latest: SessionUpdate? = nil
  private var lastPlain: String? = nil
  private var ended = false

  init(console: Console) {
    self.console = console
    self.color = usesColor(isTerminal: console.outIsTerminal, environment: console.environment)
  }

  func show(_ update: SessionUpdate) {
    lock.withLock {
      latest = update
      if console.outIsTerminal {
        drawLocked()
      } else if let state = update.state {
        let line = LineRenderer.plain(
          frame(of: state, connected: update.connection == .connected))
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
      if console.outIsTerminal, latest?.state != nil {
        drawLocked()
        console.out("\n")
      }
      ended = true
    }
  }

  private func drawLocked() {
    let now = Date()
    guard !ended, let latest, let f = frame(of: latest, now: now) else { return }
    let ms = Int64((now.timeIntervalSince1970 * 1000).rounded(.down))
    console.out(
      LineRenderer.terminal(
        f, atMilliseconds: ms, color: color, width: terminalColumns(STDOUT_FILENO)))
  }
}

/// `countdown watch`: the session live over its event stream until Ctrl-C, or until it is
/// finished with `--exit-on-finish`. A server that cannot be reached before the first
/// snapshot ends it (3, or 1 for a refusal); once connected, it reconnects as the page does.
func watch(_ client: CountdownClient, exitOnFinish: Bool, console: Console) async -> Int32 {
  let screen = WatchScreen(console: console)
  let relay = SignalRelay([SIGINT, SIGTERM, SIGHUP]) { signo in
    screen.end()
    raiseDefault(signo)
  }
  // Only a terminal's line moves between the server's changes; a pipe's waits for them.
  let ticker = Task {
    while !Task.isCancelled && console.outIsTerminal {
      try? await Task.sleep(nanoseconds: UInt64(Spinner.frameMilliseconds) * 1_000_000)
      screen.tick()
    }
  }
  defer {
    ticker.cancel()
    withExtendedLifetime(relay) {}
  }
  var everConnected = false
  for await update in client.changes() {
    switch update.connection {
    case .connected:
      everConnected = true
    case .reconnecting(_, _, let reason) where !everConnected:
      return report(reason, console: console)
    case .closed(let reason):
      screen.end()
      return report(reason, console: console)
    default:
      break
    }
    screen.show(update)
    if exitOnFinish, update.connection == .connected, let state = update.state,
      let code = finishStatus(state)
    {
      screen.end()
      return code
    }
  }
  screen.end()
  return ExitCode.failed.rawValue
}

/// `--exit-on-finish`'s status for a finished state: 0 elapsed, done or stopped, 1 failed or
/// timeout.
func finishStatus(_ state: SessionState) -> Int32? {
  guard state.phase == .finished else { return nil }
  return [.elapsed, .done, .stopped].contains(state.outcome)
    ? ExitCode.ok.rawValue : ExitCode.failed.rawValue
}
