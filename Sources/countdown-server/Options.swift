import CountdownCore
import LWSServer

/// The command line, parsed by hand: the toolchain ships no argument parser.
struct Options {
  var server = ServerConfig()
  var defaultSeconds = 5

  static let usage = """
    USAGE: countdown-server [options]

    Runs shared countdown sessions and serves the page that shows them.

    OPTIONS:
      --host ADDRESS          Address to listen on (default 127.0.0.1).
      --port PORT             TCP port, 0-65535; 0 picks a free one (default 8080).
                              The URL printed at start-up has the real port.
      --public DIR            Directory of the web page to serve (default ./Public).
      --default-seconds N     Length of a countdown whose start names none,
                              1-86400 (default 5, as in the original demo).
      -h, --help              Show this help.

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
        options.defaultSeconds = try integer(in: SessionConfig.secondsRange)
      default:
        throw UsageError(message: "unknown option '\(argument)'")
      }
    }
    return .run(options)
  }
}
