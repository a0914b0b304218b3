import CountdownClient

/// What to do, with its operands, as the command line says it.
public enum Action: Equatable, Sendable {
  case help
  case watch(exitOnFinish: Bool)
  /// `until` is kept as typed (`18:30`): it is read against the clock when the command is sent.
  case start(
    seconds: Int?, until: String?, finishLabel: String?, options: StartOptions = .init())
  case stop
  /// nil clears the message (`--clear`).
  case message(text: String?)
  case blackout(on: Bool)
  case pause
  case resume
  case adjust(seconds: Int)
  case cancel
  case wait(label: String?, timeoutSeconds: Int?, timeoutLabel: String?)
  case done(label: String?)
  case fail(label: String?)
  case run(label: String?, timeoutSeconds: Int?, command: [String])
}

/// A parsed command line. Values are only spelled here; the server checks every range, so
/// the command line never disagrees with it about what is allowed.
public struct Invocation: Equatable, Sendable {
  public var action: Action
  /// The page's URL (`http://host:8080/?session=team-a`) or the server's base URL.
  public var url: String
  public var session: String?
  public var tokenFile: String?
  /// `--cacert`: the PEM certificates an https server is verified against.
  public var caFile: String?

  public init(
    action: Action, url: String = "", session: String? = nil, tokenFile: String? = nil,
    caFile: String? = nil
  ) {
    self.action = action
    self.url = url
    self.session = session
    self.tokenFile = tokenFile
    self.caFile = caFile
  }
}

public let usageText = """
  usage: countdown COMMAND URL [options]

  URL is the page's own address (http://host:8080/?session=team-a), or the server's
  base URL with --session ID.

  commands:
    watch URL [--exit-on-finish]          show the session live
    start URL [--seconds N | --until HH:MM] [--finish-label TEXT]
              [--overtime] [--warn S] [--danger S]
                                          --overtime counts on past zero; the level
                                          turns warning, then danger, S s before it
    stop URL                              end the run (or its overtime): stopped
    message URL TEXT | message URL --clear
                                          show TEXT on every screen (-- TEXT if it
                                          starts with -), or take it away
    blackout URL on|off                   blank every viewer's screen, or not
    pause URL | resume URL | cancel URL
    adjust URL --seconds N                N may be negative: --seconds -60
    wait URL [--label TEXT] [--timeout S] [--timeout-label TEXT]
    done URL [--label TEXT] | fail URL [--label TEXT]
    run URL [--label TEXT] [--timeout S] -- COMMAND [ARG...]
                                          wait, run COMMAND, then done or fail

  options for every command:
    --session ID        the session, when URL does not name it
    --token-file PATH   read the bearer token from PATH (or set COUNTDOWN_TOKEN)
    --cacert PATH       verify an https server against the PEM certificates in
                        PATH, not the system's (Linux)

  exit status: 0 done, 1 refused or failed, 2 usage, 3 server unreachable;
  run exits with its command's status.
  """

private enum Kind { case flag, value }

/// The options each command takes, beyond --session, --token-file and --cacert.
private func options(of command: String) -> [String: Kind]? {
  switch command {
  case "watch": return ["--exit-on-finish": .flag]
  case "start":
    return [
      "--seconds": .value, "--until": .value, "--finish-label": .value, "--overtime": .flag,
      "--warn": .value, "--danger": .value,
    ]
  case "stop", "blackout", "pause", "resume", "cancel": return [:]
  case "message": return ["--clear": .flag]
  case "adjust": return ["--seconds": .value]
  case "wait": return ["--label": .value, "--timeout": .value, "--timeout-label": .value]
  case "done", "fail": return ["--label": .value]
  case "run": return ["--label": .value, "--timeout": .value]
  default: return nil
  }
}

extension Invocation {
  /// Reads `arguments` (without the program's name).
  public static func parse(_ arguments: [String]) throws(UsageError) -> Invocation {
    guard let command = arguments.first else { throw UsageError("no command given") }
    if command == "help" || command == "--help" || command == "-h" {
      return Invocation(action: .help)
    }
    guard let allowed = options(of: command) else {
      throw UsageError("unknown command \(quoted(command))")
    }
    var values: [String: String] = [:]
    var flags: Set<String> = []
    var positional: [String] = []
    var child: [String]? = nil
    var i = 1
    while i < arguments.count {
      let arg = arguments[i]
      i += 1
      if arg == "--help" || arg == "-h" { return Invocation(action: .help) }
      if arg == "--" {
        // A message that starts with "-" ("-5 min") is text after --, not an option.
        if command == "message" {
          positional += arguments[i...]
          break
        }
        guard command == "run" else {
          throw UsageError("only run and message take arguments after --")
        }
        child = Array(arguments[i...])
        break
      }
      guard arg.hasPrefix("-"), arg.count > 1 else {
        positional.append(arg)
        continue
      }
      var name = arg
      var inline: String? = nil
      if let eq = arg.firstIndex(of: "=") {
        name = String(arg[..<eq])
        inline = String(arg[arg.index(after: eq)...])
      }
      if name == "--token" {
        throw UsageError(
          "a token is never taken as an argument (ps shows arguments to everyone): "
            + "set COUNTDOWN_TOKEN or use --token-file PATH")
      }
      let kind: Kind? =
        ["--session", "--token-file", "--cacert"].contains(name) ? .value : allowed[name]
      guard let kind else { throw UsageError("\(command) takes no option \(quoted(name))") }
      if values[name] != nil || flags.contains(name) {
        throw UsageError("\(name) is given twice")
      }
      switch kind {
      case .flag:
        guard inline == nil else { throw UsageError("\(name) takes no value") }
        flags.insert(name)
      case .value:
        if let inline {
          values[name] = inline
        } else {
          // The next argument is the value even when it starts with "-" (`--seconds -60`).
          guard i < arguments.count else { throw UsageError("\(name) needs a value") }
          values[name] = arguments[i]
          i += 1
        }
      }
    }
    let operands = Array(positional.dropFirst())
    let takes = operandCount(command, flags: flags)
    guard let url = positional.first, operands.count == takes else {
      throw positional.isEmpty
        ? UsageError("\(command) needs the session's URL")
        : command != "message" && command != "blackout"
          ? UsageError("\(command) takes one URL, not \(positional.count) arguments")
          : UsageError(
            "\(command) takes the URL and \(operandName(command)), not \(positional.count) "
              + "arguments")
    }
    let action = try makeAction(
      command, values: values, flags: flags, child: child, operand: operands.first)
    return Invocation(
      action: action, url: url, session: values["--session"], tokenFile: values["--token-file"],
      caFile: values["--cacert"])
  }

  /// Operands after the URL: a message's text (none with --clear), blackout's on or off.
  private static func operandCount(_ command: String, flags: Set<String>) -> Int {
    switch command {
    case "message": flags.contains("--clear") ? 0 : 1
    case "blackout": 1
    default: 0
    }
  }

  private static func operandName(_ command: String) -> String {
    command == "message" ? "the text (or --clear)" : "on or off"
  }

  private static func makeAction(
    _ command: String, values: [String: String], flags: Set<String>, child: [String]?,
    operand: String?
  ) throws(UsageError) -> Action {
    switch command {
    case "watch":
      return .watch(exitOnFinish: flags.contains("--exit-on-finish"))
    case "start":
      if values["--seconds"] != nil, values["--until"] != nil {
        throw UsageError("start takes --seconds or --until, not both")
      }
      let options = StartOptions(
        overtime: flags.contains("--overtime"), warnAtSeconds: try integer(values, "--warn"),
        dangerAtSeconds: try integer(values, "--danger"))
      return .start(
        seconds: try integer(values, "--seconds"), until: values["--until"],
        finishLabel: values["--finish-label"], options: options)
    case "stop": return .stop
    case "message": return .message(text: operand)
    case "blackout":
      switch operand {
      case "on": return .blackout(on: true)
      case "off": return .blackout(on: false)
      default: throw UsageError("blackout takes on or off, not \(quoted(operand ?? ""))")
      }
    case "pause": return .pause
    case "resume": return .resume
    case "cancel": return .cancel
    case "adjust":
      guard let seconds = try integer(values, "--seconds") else {
        throw UsageError("adjust needs --seconds N (N may be negative)")
      }
      return .adjust(seconds: seconds)
    case "wait":
      return .wait(
        label: values["--label"], timeoutSeconds: try integer(values, "--timeout"),
        timeoutLabel: values["--timeout-label"])
    case "done": return .done(label: values["--label"])
    case "fail": return .fail(label: values["--label"])
    default:
      guard let child, !child.isEmpty else {
        throw UsageError("run needs a command after --: countdown run URL -- make deploy")
      }
      return .run(
        label: values["--label"], timeoutSeconds: try integer(values, "--timeout"),
        command: child)
    }
  }

  /// A whole number of seconds: an optional sign and decimal digits that fit in 64 bits.
  /// `5.0`, `1e308` and anything past ±2^63 are refused here rather than rounded.
  private static func integer(_ values: [String: String], _ name: String) throws(UsageError)
    -> Int?
  {
    guard let text = values[name] else { return nil }
    let digits = text.first == "-" || text.first == "+" ? text.dropFirst() : Substring(text)
    guard !digits.isEmpty, digits.allSatisfy({ $0.isASCII && $0.isNumber }), let n = Int(text)
    else {
      throw UsageError("\(name) needs a whole number of seconds, not \(quoted(text))")
    }
    return n
  }
}

/// `text` quoted for a message, cut to 32 characters so a huge argument stays readable.
func quoted(_ text: String) -> String {
  let shown = text.count > 32 ? String(text.prefix(32)) + "…" : text
  return "\"" + shown + "\""
}
