import CountdownClient
import Foundation

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// Where `countdown` writes, and what it knows of its terminal.
struct Console: Sendable {
  let environment: [String: String]
  let outIsTerminal: Bool

  /// Writes what `LineRenderer` drew (every part from the server already through
  /// `LineRenderer.printable`) or the usage text.
  func out(_ text: String) {
    FileHandle.standardOutput.write(Data(text.utf8))
  }

  /// Writes `text` on stderr as `errorText` makes it.
  func err(_ text: String) {
    FileHandle.standardError.write(Data(Self.errorText(text).utf8))
  }

  /// An error or warning as written to stderr: prefixed, each line through
  /// `LineRenderer.printable`. Error texts carry what a server said (a refusal's message, a
  /// body's first bytes, a redirect's target), so none is written without it.
  static func errorText(_ text: String) -> String {
    "countdown: "
      + text.split(separator: "\n", omittingEmptySubsequences: false)
      .map { LineRenderer.printable(String($0)) }.joined(separator: "\n") + "\n"
  }
}

/// Runs the command line and returns the exit status (`run` may die of a signal instead,
/// as its command did).
public func countdownMain(arguments: [String], environment: [String: String]) async -> Int32 {
  let console = Console(environment: environment, outIsTerminal: isatty(STDOUT_FILENO) == 1)
  let invocation: Invocation
  let client: CountdownClient
  do {
    invocation = try Invocation.parse(arguments)
    if invocation.action == .help {
      console.out(usageText + "\n")
      return ExitCode.ok.rawValue
    }
    var configuration = CountdownClient.Configuration()
    if case .run = invocation.action {
      // A job's end must not wait long on a server that does not answer.
      configuration.requestTimeout = 5
      configuration.commandAttempts = 3
    }
    client = try makeClient(invocation, environment: environment, configuration: configuration)
  } catch {
    console.err("\(error)\nrun 'countdown --help' for usage")
    return ExitCode.usage.rawValue
  }
  switch invocation.action {
  case .help:
    return ExitCode.ok.rawValue
  case .watch(let exitOnFinish):
    return await watch(client, exitOnFinish: exitOnFinish, console: console)
  case .run(let label, let timeout, let command):
    return await run(client, label: label, timeout: timeout, command: command, console: console)
  default:
    do {
      let command = try oneShot(invocation.action, now: Date())
      let ack = try await client.send(command)
      console.out(LineRenderer.plain(frame(of: ack.state, connected: true)) + "\n")
      return ExitCode.ok.rawValue
    } catch {
      return report(error, console: console)
    }
  }
}

/// The client for the command line's URL and token.
func makeClient(
  _ invocation: Invocation, environment: [String: String],
  configuration: CountdownClient.Configuration = .init()
) throws -> CountdownClient {
  var configuration = configuration
  if let path = invocation.caFile {
    guard FileManager.default.isReadableFile(atPath: path) else {
      throw UsageError("cannot read the certificate file \(quoted(path))")
    }
    configuration.caFile = path
  }
  var fileText: String? = nil
  if let path = invocation.tokenFile {
    guard let data = FileManager.default.contents(atPath: path), data.count <= 65_536 else {
      throw UsageError("cannot read the token file \(quoted(path)) (or it is over 64 KB)")
    }
    guard let text = String(data: data, encoding: .utf8) else {
      throw UsageError("the token file \(quoted(path)) is not UTF-8 text")
    }
    fileText = text
  }
  let token = try resolveToken(
    fileText: fileText, fileName: invocation.tokenFile, environment: environment)
  guard let url = URL(string: invocation.url), url.scheme != nil, url.host != nil else {
    throw UsageError("not an http or https URL: \(quoted(invocation.url))")
  }
  if let session = invocation.session {
    let named = URLComponents(url: url, resolvingAgainstBaseURL: true)?.queryItems?
      .last(where: { $0.name == "session" })?.value
    if let named, named != session {
      throw UsageError(
        "the URL names session \(quoted(named)) but --session says \(quoted(session))")
    }
    return try CountdownClient(
      base: url, session: session, token: token, configuration: configuration)
  }
  return try CountdownClient(pageURL: url, token: token, configuration: configuration)
}

/// The command a one-shot action sends. `--until HH:MM` is read against `now`.
func oneShot(_ action: Action, now: Date, calendar: Calendar = .current) throws -> Command {
  switch action {
  case .start(let seconds, let until?, let label, let options):
    _ = seconds
    guard let date = Command.nextTimeOfDay(until, after: now, calendar: calendar) else {
      throw UsageError("--until needs a time of day as HH:MM (24-hour), not \(quoted(until))")
    }
    return .start(until: date, finishLabel: label, options: options)
  case .start(let seconds, nil, let label, let options):
    return .start(seconds: seconds, finishLabel: label, options: options)
  case .stop: return .stop
  case .message(let text): return .message(text)
  case .blackout(let on): return .blackout(on)
  case .pause: return .pause
  case .resume: return .resume
  case .adjust(let seconds): return .adjust(seconds: seconds)
  case .cancel: return .cancel
  case .wait(let label, let timeout, let timeoutLabel):
    return .wait(label: label, timeoutSeconds: timeout, timeoutLabel: timeoutLabel)
  case .done(let label): return .done(label: label)
  case .fail(let label): return .fail(label: label)
  case .help, .watch, .run: throw UsageError("not a one-shot command")
  }
}

/// Says what went wrong on stderr, in words with the server's code, and returns the status.
func report(_ error: any Error, console: Console) -> Int32 {
  switch error {
  case let usage as UsageError:
    console.err("\(usage)\nrun 'countdown --help' for usage")
    return ExitCode.usage.rawValue
  case CountdownError.refused(let r):
    console.err("\(r.code): \(r.message)")
    return ExitCode.failed.rawValue
  case CountdownError.unreachable(let why):
    console.err("the server cannot be reached: \(why)")
    return ExitCode.unreachable.rawValue
  case CountdownError.invalidArgument(let why):
    console.err("\(why)\nrun 'countdown --help' for usage")
    return ExitCode.usage.rawValue
  default:
    console.err("\(error)")
    return ExitCode.failed.rawValue
  }
}

/// A session state as a line shows it without a clock: the server's own whole seconds
/// (`remaining`), so what is printed does not depend on when it is printed.
func frame(of state: SessionState, connected: Bool) -> Frame {
  let counting = state.phase == .running || state.phase == .paused
  return Frame.of(
    phase: state.phase.rawValue, spinner: state.spinner,
    label: counting ? ClockFormat.clock(seconds: Int64(state.remaining)) : state.label,
    elapsed: nil, outcome: state.outcome?.rawValue, stale: state.stale, connected: connected,
    level: state.level.rawValue, message: state.message, blackout: state.blackout)
}

/// A watched state at `now`: the time left or elapsed from the deadline and the clock offset.
func frame(of update: SessionUpdate, now: Date) -> Frame? {
  guard let state = update.state else { return nil }
  return Frame.of(
    phase: state.phase.rawValue, spinner: state.spinner, label: update.clockLabel(now: now),
    elapsed: update.elapsedLabel(now: now), outcome: state.outcome?.rawValue, stale: state.stale,
    connected: update.connection == .connected, level: state.level.rawValue,
    message: state.message, blackout: state.blackout)
}
