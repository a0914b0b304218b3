import CountdownCore
import LWSServer
import Observability

#if canImport(Glibc)
  import Glibc
#endif

// Wires the pure hub to the libwebsockets server; this thread becomes the service thread.

let serverVersion = "0.12.0"

/// Writes to standard error without touching C's global `stderr` (not Sendable).
/// Only for what comes before the logger is configured: usage errors.
func report(_ message: String) {
  let line = Array("countdown-server: \(message)\n".utf8)
  _ = line.withUnsafeBytes { write(STDERR_FILENO, $0.baseAddress, $0.count) }
}

func fail(_ message: String) -> Never {
  report(message)
  exit(2)
}

let options: Options
do {
  let arguments = Array(CommandLine.arguments.dropFirst())
  switch try Options.parse(arguments, environment: { getenv($0).map { String(cString: $0) } }) {
  case .help:
    print(Options.usage)
    exit(0)
  case .version:
    print("countdown-server \(serverVersion)\nlibwebsockets \(CountdownServer.libraryVersion)")
    exit(0)
  case .printConfig(let parsed):
    print(parsed.printedConfig)
    exit(0)
  case .run(let parsed):
    options = parsed
  }
} catch {
  fail("\(error.message)\nTry 'countdown-server --help'.")
}

var isDirectory = stat()
guard stat(options.server.publicDirectory + "/index.html", &isDirectory) == 0 else {
  let name: String =
    if case .environment(let variable) = options.sources["--public"] { variable } else {
      "--public"
    }
  fail("\(name) must be a directory with an index.html, not '\(options.server.publicDirectory)'")
}

Logger.shared = Logger(
  level: options.logLevel, format: options.logFormat ?? Logger.defaultFormat())
let log = Logger.shared
let effective = options.effectiveConfig()
func names(from wanted: (Options.Source) -> Bool) -> String {
  effective.filter { wanted($0.source) }.map { String($0.flag.dropFirst(2)) }
    .joined(separator: ",")
}
log.info(
  "starting",
  fields: [
    ("version", LogValue(serverVersion)), ("lws", LogValue(CountdownServer.libraryVersion)),
  ]
    + effective.map { flag, value, _ in
      (String(flag.dropFirst(2)).replacing("-", with: "_"), LogValue(value))
    } + [
      ("set_by_env", LogValue(names { if case .environment = $0 { true } else { false } })),
      ("set_by_flag", LogValue(names { $0 == .flag })),
    ])

/// Every allowed connection needs a descriptor, plus a few for files and the listener.
func raiseOpenFileLimit(toServe connections: Int) {
  let needed = rlim_t(connections + 64)
  var limit = rlimit()
  guard getrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limit) == 0, limit.rlim_cur < needed
  else { return }
  let target = min(needed, limit.rlim_max)
  limit.rlim_cur = target
  if setrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limit) != 0 || target < needed {
    let current =
      getrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limit) == 0 ? limit.rlim_cur : 0
    log.warn(
      "open_file_limit_low",
      [
        "limit": LogValue(current), "needed": LogValue(needed),
        "max_connections": LogValue(connections),
        "msg": LogValue(
          "the open-file limit is \(current), but --max-connections \(connections) needs "
            + "\(needed); connections past it will fail"),
      ])
  }
}

signal(SIGPIPE, SIG_IGN)
for stopSignal in [SIGINT, SIGTERM] {
  signal(stopSignal) { _ in CountdownServer.requestStop() }
}

raiseOpenFileLimit(toServe: options.server.maxConnections)

let hub = Hub(config: options.hub)
hub.observer = SessionEventLog(logger: log)
let server = CountdownServer(config: options.server, hub: hub)
let processMetrics = ProcessMetrics()
server.metrics.register { collectHubStats(hub, into: &$0) }
server.metrics.register { processMetrics.collect(into: &$0) }
server.metrics.register { log.collect(into: &$0) }
server.metrics.register { writer in
  writer.family(
    "countdown_build_info", .gauge, help: "Versions of the server and of lws; always 1.")
  writer.sample(
    "countdown_build_info", ["version": serverVersion, "lws": CountdownServer.libraryVersion], 1)
}
if let readyFile = options.readyFile {
  server.addReadinessCheck("ready_file") { access(readyFile, F_OK) == 0 }
}

do {
  try server.run { port in
    let host = options.server.host.contains(":") ? "[\(options.server.host)]" : options.server.host
    // Start-up lines come before the listening line, for whoever reads both.
    log.flush()
    print("countdown-server listening on http://\(host):\(port)/")
    fflush(nil)  // tests and supervisors read this line through a pipe
    let metricsWhere =
      options.server.metricsOnMainPort
      ? "main port" : (server.metricsListenPort == nil ? "off" : "")
    var fields: [(String, LogValue)] = [
      ("url", LogValue("http://\(host):\(port)/")), ("port", LogValue(port)),
    ]
    if let metricsPort = server.metricsListenPort {
      fields.append(("metrics_port", LogValue(metricsPort)))
      fields.append(("metrics_host", LogValue(options.server.metricsHost)))
    }
    if !metricsWhere.isEmpty { fields.append(("metrics", LogValue(metricsWhere))) }
    log.info("listening", fields: fields)
  }
} catch {
  log.error("failed", ["error": LogValue("\(error)")])
  log.flush()
  exit(1)
}
log.info("stopped")
log.flush()
exit(0)
