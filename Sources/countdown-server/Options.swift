import CountdownCore
import LWSServer

/// The command line, parsed by hand: the toolchain ships no argument parser.
struct Options {
  var server = ServerConfig()
  var hub = HubConfig()

  static let usage = """
    USAGE: countdown-server [options]

    Runs shared countdown sessions and serves the page that shows them.

    OPTIONS:
      --host ADDRESS              Address to listen on (default 127.0.0.1).
      --port PORT                 TCP port, 0-65535; 0 picks a free one (default 8080).
                                  The URL printed at start-up has the real port.
      --public DIR                Directory of the web page to serve (default ./Public).
      --default-seconds N         Length of a countdown whose start names none,
                                  1-86400 (default 5, as in the original demo).
      --control open|key          Who may start and cancel: anyone (open, default), or
                                  only holders of the session's controller key (key).

    LIMITS:
      --max-connections N         WebSocket connections in all (default 19500);
                                  past it an upgrade gets HTTP 503.
      --max-connections-per-ip N  WebSocket connections from one address (default
                                  1024); past it an upgrade gets HTTP 429.
      --max-sessions N            Live sessions (default 100000); joining a new one
                                  past it gets too_many_sessions and close 1013.
      --max-commands-per-second N Commands per connection per second (default 20);
                                  past it rate_limited, and close 1008 after 5 s.
      --ping-after SECONDS        Ping a silent connection after this long (default 20).
      --hangup-after SECONDS      Hang up when nothing valid arrived for this long,
                                  pongs included (default 30).
      --unwritable-timeout SECONDS
                                  Close a connection that could not be written for
                                  this long while it had data waiting (default 60).
      --allow-origin LIST         Comma-separated origins (e.g. https://a.example)
                                  whose pages may connect, besides the server's own;
                                  '*' allows any. Repeatable.
      --event-loop poll|libev     What waits for socket events: libev (epoll; the
                                  default on Linux) or lws's poll(). Without the
                                  libev plugin the server warns and uses poll.
      --autobahn-echo             Test only: serve an echo WebSocket at /echo for the
                                  Autobahn|Testsuite conformance run. Off by default.
      -h, --help                  Show this help.

    Open http://HOST:PORT/?session=NAME in any number of browsers: each NAME is
    one shared countdown. Stop the server with Ctrl-C or SIGTERM.
    """

  enum Outcome {
    case run(Options)
    case help
  }

  struct UsageError: Error {
    let message: String
  }

  static func parse(_ arguments: [String]) throws(UsageError) -> Outcome {
    var options = Options()
    var remaining = arguments[...]
    while let argument = remaining.popFirst() {
      // Accept both "--port 80" and "--port=80".
      var name = argument
      var inlineValue: String?
      if argument.hasPrefix("--"), let equals = argument.firstIndex(of: "=") {
        name = String(argument[..<equals])
        inlineValue = String(argument[argument.index(after: equals)...])
      }
      func value() throws(UsageError) -> String {
        if let inlineValue { return inlineValue }
        guard let next = remaining.popFirst() else {
          throw UsageError(message: "\(name) needs a value")
        }
        return next
      }
      func integer(in range: ClosedRange<Int>) throws(UsageError) -> Int {
        let text = try value()
        guard let number = Int(text), range.contains(number) else {
          throw UsageError(
            message:
              "\(name) must be a whole number from \(range.lowerBound) to \(range.upperBound), not '\(text)'"
          )
        }
        return number
      }
      switch name {
      case "-h", "--help":
        return .help
      case "--host":
        let host = try value()
        guard !host.isEmpty else { throw UsageError(message: "--host must not be empty") }
        options.server.host = host
      case "--port":
        options.server.port = try integer(in: 0...65_535)
      case "--public":
        options.server.publicDirectory = try value()
      case "--default-seconds":
        options.hub.session.defaultSeconds = try integer(in: SessionConfig.secondsRange)
      case "--control":
        let text = try value()
        guard let mode = ControlMode(rawValue: text) else {
          throw UsageError(message: "--control must be 'open' or 'key', not '\(text)'")
        }
        options.hub.control = mode
      case "--max-connections":
        options.server.maxConnections = try integer(in: 1...1_000_000)
      case "--max-connections-per-ip":
        options.server.maxConnectionsPerIP = try integer(in: 1...1_000_000)
      case "--max-sessions":
        options.hub.maxSessions = try integer(in: 1...10_000_000)
      case "--max-commands-per-second":
        options.hub.commandsPerSecond = Double(try integer(in: 1...100_000))
      case "--ping-after":
        options.server.pingAfterSeconds = try integer(in: 1...3600)
      case "--hangup-after":
        options.server.hangUpAfterSeconds = try integer(in: 1...3600)
      case "--unwritable-timeout":
        options.server.unwritableTimeoutSeconds = try integer(in: 1...3600)
      case "--allow-origin":
        let origins = try value().split(separator: ",").map {
          String($0.trimmingPrefix(" ")).lowercased()
        }
        guard !origins.isEmpty else { throw UsageError(message: "--allow-origin needs origins") }
        options.server.allowedOrigins += origins
      case "--event-loop":
        let text = try value()
        guard let loop = EventLoop(rawValue: text) else {
          throw UsageError(message: "--event-loop must be 'poll' or 'libev', not '\(text)'")
        }
        options.server.eventLoop = loop
      case "--autobahn-echo":
        options.server.echoRoute = true
      default:
        throw UsageError(message: "unknown option '\(argument)'")
      }
    }
    guard options.server.hangUpAfterSeconds > options.server.pingAfterSeconds else {
      throw UsageError(message: "--hangup-after must be longer than --ping-after")
    }
    return .run(options)
  }
}
