import CountdownCore
import LWSServer
import Observability
import RedisCluster
import SQLiteStore

/// The command line and its `COUNTDOWN_*` environment variables, parsed by
/// hand (the toolchain ships no argument parser) from one table: each option
/// is one `OptionSpec`, which gives its flag, variable, help, parser and how
/// `--print-config` shows it. Adding a flag is adding an entry.
struct Options {
  var server = ServerConfig()
  var hub = HubConfig()
  var logLevel = LogLevel.info
  /// nil: text on a terminal, JSON otherwise.
  var logFormat: LogFormat?
  /// Test only: `/readyz` waits for this file to exist.
  var readyFile: String?
  /// Test only: this instance's wall clock runs this far ahead (ms).
  var testClockOffsetMs = 0
  /// Test only: in a cluster, a webhook entry idle this long (its holder
  /// taken for dead) is taken over by another instance (ms).
  var testWebhookClaimMs = 30_000
  /// The SQLite file that keeps sessions across restarts; `:memory:` keeps none.
  var dataPath = "countdown.db"
  var sync = SyncMode.full
  /// Uncommitted SQLite writes past which a command gets `unavailable`.
  var storeQueueLimit = SQLiteStore.defaultQueueLimit
  /// Cluster mode: sessions live in Redis, shared with other instances.
  var redis: RedisAddress?
  /// The file holding Redis's AUTH password; the password itself is read at
  /// start-up and never kept here, shown or logged.
  var redisPasswordFile: String?
  /// The file `server.apiTokens` was read from (the tokens are never shown).
  var apiTokenFile: String?
  var webhook = WebhookOptions()
  /// The Idempotency-Key answers a session, a client address and everyone may hold.
  var idempotency = IdempotencyLimits()

  /// Where each option's effective value came from.
  enum Source: Equatable, CustomStringConvertible {
    case byDefault
    case environment(String)
    case flag

    var description: String {
      switch self {
      case .byDefault: "default"
      case .environment(let name): name
      case .flag: "flag"
      }
    }
  }

  var sources: [String: Source] = [:]

  enum Outcome {
    case run(Options)
    case help
    case version
    case printConfig(Options)
  }

  struct UsageError: Error {
    let message: String
  }

  /// `COUNTDOWN_*` names among `environment` (as `NAME=value` entries) that no
  /// option reads: a misspelt one would otherwise be ignored without a word.
  static func unknownVariables(in environment: [String]) -> [String] {
    let known = Set(table.map(\.environmentName))
    return environment.compactMap { entry in
      let name = String(entry.prefix { $0 != "=" })
      return name.hasPrefix("COUNTDOWN_") && !known.contains(name) ? name : nil
    }.sorted()
  }

  /// Parses the environment first, then the arguments, so flags win.
  static func parse(_ arguments: [String], environment: (String) -> String?) throws(UsageError)
    -> Outcome
  {
    var options = Options()
    for spec in table {
      options.sources[spec.flag] = .byDefault
      guard let text = environment(spec.environmentName) else { continue }
      try spec.apply(&options, text, spec.environmentName)
      options.sources[spec.flag] = .environment(spec.environmentName)
    }
    var printConfig = false
    var remaining = arguments[...]
    while let argument = remaining.popFirst() {
      // Accept both "--port 80" and "--port=80".
      var name = argument
      var inlineValue: String?
      if argument.hasPrefix("--"), let equals = argument.firstIndex(of: "=") {
        name = String(argument[..<equals])
        inlineValue = String(argument[argument.index(after: equals)...])
      }
      switch name {
      case "-h", "--help": return .help
      case "--version": return .version
      case "--print-config":
        printConfig = true
        continue
      default: break
      }
      guard let spec = table.first(where: { $0.flag == name }) else {
        throw UsageError(message: "unknown option '\(argument)'")
      }
      let text: String
      if spec.valueName == nil {
        guard inlineValue == nil else { throw UsageError(message: "\(name) takes no value") }
        text = "on"
      } else if let inlineValue {
        text = inlineValue
      } else if let next = remaining.popFirst() {
        text = next
      } else {
        throw UsageError(message: "\(name) needs a value")
      }
      // A repeatable flag replaces what its variable said rather than adding to it.
      if options.sources[spec.flag] != .flag { spec.reset?(&options) }
      try spec.apply(&options, text, name)
      options.sources[spec.flag] = .flag
    }
    guard options.server.hangUpAfterSeconds > options.server.pingAfterSeconds else {
      throw UsageError(
        message:
          "--hangup-after (\(options.server.hangUpAfterSeconds), from \(options.sources["--hangup-after"]!)) "
          + "must be longer than --ping-after (\(options.server.pingAfterSeconds), from \(options.sources["--ping-after"]!))"
      )
    }
    if options.redis?.username != nil && options.redisPasswordFile == nil {
      throw UsageError(
        message: "--redis names an ACL user: give its password with --redis-password-file")
    }
    if options.redis != nil && options.server.eventLoop != .libev {
      throw UsageError(
        message: "--redis needs --event-loop libev: hiredis runs on the server's libev loop")
    }
    try options.checkWebhooks()
    // Events are recorded with their changes only when something delivers them.
    options.hub.recordsEvents = options.webhook.enabled
    return printConfig ? .printConfig(options) : .run(options)
  }

  /// Every option with its effective value and where that came from.
  func effectiveConfig() -> [(flag: String, value: String, source: Source)] {
    Self.table.map { ($0.flag, $0.show(self), sources[$0.flag] ?? .byDefault) }
  }

  var printedConfig: String {
    effectiveConfig().map { flag, value, source in
      let shown = value.isEmpty ? "''" : value
      return flag.padding(30) + shown.padding(24) + " " + source.description
    }.joined(separator: "\n")
  }

  static var usage: String {
    var text = """
      USAGE: countdown-server [options]

      Runs shared countdown sessions and serves the page that shows them.
      Every option can also be set by the environment variable shown under it
      (COUNTDOWN_ and the flag's name); a flag wins over its variable.

      """
    for section in OptionSpec.Section.allCases {
      text += "\n\(section.rawValue):\n"
      for spec in table where spec.section == section {
        let head = "  \(spec.flag)" + (spec.valueName.map { " \($0)" } ?? "")
        let helpLines = spec.help.split(separator: "\n").map(String.init)
        if head.count < 30 {
          text += head.padding(30) + helpLines[0] + "\n"
        } else {
          text += head + "\n" + "".padding(30) + helpLines[0] + "\n"
        }
        for line in helpLines.dropFirst() { text += "".padding(30) + line + "\n" }
        text += "".padding(30) + "[\(spec.environmentName)]\n"
      }
    }
    text += """

      OTHER:
        --print-config              Print the effective configuration, with where each
                                    value came from, and exit.
        --version                   Print this server's and libwebsockets' versions.
        -h, --help                  Show this help.

      Open http://HOST:PORT/?session=NAME in any number of browsers: each NAME is
      one shared countdown. Stop the server with Ctrl-C or SIGTERM.
      """
    return text
  }
}

extension Options {
  /// Every option: these, then the webhook ones (WebhookOptions.swift).
  static let table = serverTable + webhookTable

  static let serverTable: [OptionSpec] = [
    .text(
      "--host", "ADDRESS", .options, \.server.host,
      help: "Address to listen on (default 127.0.0.1)."),
    .integer(
      "--port", "PORT", .options, 0...65_535, \.server.port,
      help: "TCP port, 0-65535; 0 picks a free one (default 8080).\n"
        + "The URL printed at start-up has the real port."),
    .text(
      "--public", "DIR", .options, \.server.publicDirectory,
      help: "Directory of the web page to serve (default ./Public)."),
    .integer(
      "--default-seconds", "N", .options, SessionConfig.secondsRange,
      \.hub.session.defaultSeconds,
      help: "Length of a countdown whose start names none,\n"
        + "1-86400 (default 5, as in the original demo)."),
    .choice(
      "--control", .options, \.hub.control,
      help: "Who may start and cancel: anyone (open, default), or\n"
        + "only holders of the session's controller key (key)."),
    .choice(
      "--event-loop", .options, \.server.eventLoop,
      help: "What waits for socket events: libev (epoll; the\n"
        + "default on Linux) or lws's poll(). Without the\nlibev plugin the server warns and uses poll."
    ),

    .integer(
      "--max-connections", "N", .limits, 1...1_000_000, \.server.maxConnections,
      help: "WebSocket connections in all (default 19500);\npast it an upgrade gets HTTP 503."),
    .integer(
      "--max-connections-per-ip", "N", .limits, 1...1_000_000, \.server.maxConnectionsPerIP,
      help: "WebSocket connections from one address (default\n"
        + "4096, for audiences behind one NAT); past it an\nupgrade gets HTTP 429."),
    .integer(
      "--ipv6-prefix", "BITS", .limits, AddressBudget.ipv6PrefixRange, \.server.ipv6Prefix,
      help: "Leading bits of an IPv6 client address that name its\n"
        + "per-address budgets, 32-128 (default 64: one /64\nis one client); IPv4 counts per address."
    ),
    .integer(
      "--max-sessions", "N", .limits, 1...10_000_000, \.hub.maxSessions,
      help: "Live sessions (default 100000); joining a new one\n"
        + "past it gets too_many_sessions and close 1013."),
    .integer(
      "--max-sessions-per-address", "N", .limits, 1...10_000_000, \.hub.maxSessionsPerAddress,
      help: "Running or paused sessions started from one client\n"
        + "address (default 1000); a start past it gets\ntoo_many_sessions."),
    .integer(
      "--max-idempotency-keys-per-session", "N", .limits, 1...10_000_000,
      \.idempotency.perSession,
      help: "Idempotency-Key answers one session holds (a day\n"
        + "each; default 1000); a new key past it gets\nrate_limited (429) and is not applied."),
    .integer(
      "--max-idempotency-keys-per-address", "N", .limits, 1...10_000_000,
      \.idempotency.perAddress,
      help: "Idempotency-Key answers one client address holds\n"
        + "(default 1000); a new key past it gets rate_limited."),
    .integer(
      "--max-idempotency-keys", "N", .limits, 1...100_000_000, \.idempotency.total,
      help: "Idempotency-Key answers held in all (default\n"
        + "100000); a new key past it gets rate_limited."),
    .integer(
      "--max-commands-per-second", "N", .limits, 1...100_000, \.commandsPerSecond,
      help: "Commands per connection per second (default 20);\n"
        + "past it rate_limited, and close 1008 after 5 s."),
    .integer(
      "--ping-after", "SECONDS", .limits, 1...3600, \.server.pingAfterSeconds,
      help: "Ping a silent connection after this long (default 20)."),
    .integer(
      "--hangup-after", "SECONDS", .limits, 1...3600, \.server.hangUpAfterSeconds,
      help: "Hang up when nothing valid arrived for this long,\npongs included (default 30)."),
    .integer(
      "--unwritable-timeout", "SECONDS", .limits, 1...3600, \.server.unwritableTimeoutSeconds,
      help: "Close a connection that could not be written for\n"
        + "this long while it had data waiting (default 60)."),
    OptionSpec(
      flag: "--allow-origin", valueName: "LIST", section: .limits,
      help: "Comma-separated origins (e.g. https://a.example)\n"
        + "whose pages may connect, besides the server's own;\n'*' allows any. Repeatable.",
      apply: { o, v, n throws(UsageError) in
        do throws(AllowedOrigins.ParseError) {
          o.server.allowedOrigins += try AllowedOrigins.parse(v)
        } catch {
          throw UsageError(message: "\(n) \(error.description)")
        }
      },
      show: { $0.server.allowedOrigins.joined(separator: ",") },
      reset: { $0.server.allowedOrigins = [] }),
    OptionSpec(
      flag: "--frame-ancestors", valueName: "LIST", section: .limits,
      help: "Comma-separated origins (https://a.example) or 'self'\n"
        + "whose pages may show this page in an iframe (CSP\nframe-ancestors; no X-Frame-Options). Default: none.",
      apply: { o, v, n throws(UsageError) in
        do throws(FrameAncestors.ParseError) {
          o.server.frameAncestors = try FrameAncestors(parsing: v)
        } catch {
          throw UsageError(message: "\(n) \(error.description)")
        }
      },
      show: { $0.server.frameAncestors?.sources.joined(separator: ",") ?? "" }),

    OptionSpec(
      flag: "--api-token-file", valueName: "PATH", section: .limits,
      help: "Bearer tokens for the HTTP API, one a line (at least\n"
        + "16 printable characters, no spaces): each may command\nand read any session, and list them.",
      apply: { o, v, n throws(UsageError) in
        o.server.apiTokens = try loadFile(v, n, APITokens.init(file:))
        o.apiTokenFile = v
      },
      show: { $0.apiTokenFile ?? "" }),

    OptionSpec(
      flag: "--trusted-proxy", valueName: "CIDR", section: .limits,
      help: "Comma-separated ranges (10.0.0.0/8, ::1) of proxies\n"
        + "whose X-Forwarded-For names the client, for the\nper-IP cap and the logs. Repeatable.",
      apply: { o, v, n throws(UsageError) in
        for part in v.split(separator: ",", omittingEmptySubsequences: false) {
          let text = part.trimmingPrefix(" ")
          guard let range = CIDR(text) else {
            throw UsageError(
              message: "\(n) must be IP addresses or ranges like 10.0.0.0/8 or fd00::/8, not '\(v)'"
            )
          }
          o.server.trustedProxies.ranges.append(range)
        }
      },
      show: { $0.server.trustedProxies.ranges.map(\.description).joined(separator: ",") },
      reset: { $0.server.trustedProxies.ranges = [] }),

    .integer(
      "--forget-after", "SECONDS", .limits, 1...86_400, \.forgetAfterSeconds,
      help: "Forget an idle or finished session this long after\n"
        + "its last viewer left (default 60); it is deleted\nfrom storage too."),

    .text(
      "--data", "PATH", .storage, \.dataPath,
      help: "The SQLite file that keeps sessions across restarts\n"
        + "and crashes (default ./countdown.db); ':memory:'\nkeeps nothing."),
    .choice(
      "--sync", .storage, \.sync,
      help: "full (default): every acked command survives power\n"
        + "loss; normal: it survives a crash of the process,\nnot of the machine."),
    .integer(
      "--store-queue-limit", "N", .storage, 1...10_000_000, \.storeQueueLimit,
      help: "Writes that may wait for the disk (default 10000);\n"
        + "past it a command gets unavailable."),

    OptionSpec(
      flag: "--redis", valueName: "URL", section: .storage,
      help: "Cluster mode: share sessions with other instances\n"
        + "through Redis at redis://IP:PORT[/DB] (an IP address,\n"
        + "not a host name) or unix:///PATH. --data is then unused.",
      apply: { o, v, n throws(UsageError) in
        do throws(RedisError) {
          o.redis = try RedisAddress.parse(v)
        } catch {
          throw UsageError(message: "\(n): \(error.description)")
        }
      },
      show: { $0.redis?.description ?? "" }),
    OptionSpec(
      flag: "--redis-password-file", valueName: "PATH", section: .storage,
      help: "Authenticate to Redis (AUTH, as the user in --redis\n"
        + "if it names one: redis://USER@IP:PORT) with the\npassword in this file.",
      apply: { o, v, n throws(UsageError) in o.redisPasswordFile = try parseNonEmpty(v, n) },
      show: { $0.redisPasswordFile ?? "" }),

    OptionSpec(
      flag: "--log-format", valueName: "json|text", section: .operating,
      help: "One JSON object per line, or text (default: text\n"
        + "when stderr is a terminal, json otherwise).",
      apply: { o, v, n throws(UsageError) in o.logFormat = try parseChoice(v, n) as LogFormat },
      show: { $0.logFormat?.rawValue ?? "auto" }),
    .choice(
      "--log-level", .operating, \.logLevel,
      help: "debug, info (default), warn or error. debug adds\n"
        + "every tick and libwebsockets' own detail."),
    .choice(
      "--metrics", .operating, \.server.metrics,
      help: "/metrics on the main port: auto (default) serves it\n"
        + "only when --host is loopback and no --metrics-port\nis given; main always; off never."),
    OptionSpec(
      flag: "--metrics-port", valueName: "PORT", section: .operating,
      help: "Also listen on this port for /metrics, /healthz and\n"
        + "/readyz only (none by default; 0 picks a free one).",
      apply: { o, v, n throws(UsageError) in
        o.server.metricsPort = try parseInteger(v, n, in: 0...65_535)
      },
      show: { $0.server.metricsPort.map(String.init) ?? "" }),
    .text(
      "--metrics-host", "ADDRESS", .operating, \.server.metricsHost,
      help: "Address of the --metrics-port listener (default\n127.0.0.1, this machine only)."),
    .integer(
      "--drain-seconds", "SECONDS", .operating, 0...3600, \.server.drainSeconds,
      help: "On SIGTERM, keep serving this long with /readyz at\n"
        + "503 before closing every WebSocket with 1001\n(default 0). A second signal ends the wait."
    ),

    OptionSpec(
      flag: "--autobahn-echo", valueName: nil, section: .testing,
      help: "Serve an echo WebSocket at /echo for the\n"
        + "Autobahn|Testsuite conformance run. Off by default.",
      apply: { o, v, n throws(UsageError) in o.server.echoRoute = try parseSwitch(v, n) },
      show: { $0.server.echoRoute ? "on" : "off" }),
    OptionSpec(
      flag: "--ready-file", valueName: "PATH", section: .testing,
      help: "/readyz answers 503 until PATH exists: a stand-in\n"
        + "for a load step at start-up. Unset by default.",
      apply: { o, v, n throws(UsageError) in o.readyFile = try parseNonEmpty(v, n) },
      show: { $0.readyFile ?? "" }),
    .integer(
      "--test-clock-offset-ms", "MS", .testing, -86_400_000...86_400_000, \.testClockOffsetMs,
      help: "Shift this instance's wall clock by MS (negative:\n"
        + "behind), as if its host's clock were off. Default 0."),
    .integer(
      "--test-webhook-claim-ms", "MS", .testing, 100...86_400_000, \.testWebhookClaimMs,
      help: "In a cluster, take over a webhook event another\n"
        + "instance has held idle for MS. Default 30000."),
  ]

  var forgetAfterSeconds: Int {
    get { Int(hub.session.idleExpiryMs / 1000) }
    set { hub.session.idleExpiryMs = Int64(newValue) * 1000 }
  }

  /// The hub's rate is a Double; the flag takes whole numbers.
  var commandsPerSecond: Int {
    get { Int(hub.commandsPerSecond) }
    set { hub.commandsPerSecond = Double(newValue) }
  }
}

extension String {
  fileprivate func padding(_ width: Int) -> String {
    count >= width ? self + " " : self + String(repeating: " ", count: width - count)
  }
}
