import CountdownCore
import LWSServer
import Observability
import RedisCluster
import SQLiteStore

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

// Names only: a value could be anything, a secret among them.
var environmentEntries: [String] = []
var entry = environ
while let pointer = entry.pointee {
  environmentEntries.append(String(cString: pointer))
  entry += 1
}
let unknownVariables = Options.unknownVariables(in: environmentEntries)
if !unknownVariables.isEmpty {
  log.warn(
    "unknown_variables",
    ["names": LogValue(unknownVariables.joined(separator: ",")), "hint": "no option reads them"])
}

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

// Storage: every session's durable facts are loaded, and the deadline heap
// rebuilt, before the listener opens.
let store: SQLiteStore?
var stored: (epoch: String?, sessions: [StoredSession]) = (nil, [])
// Cluster mode: Redis holds the sessions, and SQLite is not used for them.
var cluster: RedisSequencer?
/// This host's clock (shifted only by --test-clock-offset-ms); in a cluster
/// the server runs on Redis's clock instead, measured against this one.
let wallClock: any WallClock =
  options.testClockOffsetMs == 0
  ? SystemClock() : ShiftedClock(byMs: Int64(options.testClockOffsetMs))
var serverClock = wallClock
if let redis = options.redis {
  store = nil
  do {
    // Blocking is fine here: the listener is not open yet.
    let password = try options.redisPasswordFile.map { (file) throws(RedisError) in
      try RedisPassword.read(file: file)
    }
    let redisClock = RedisClock(local: wallClock)
    let epoch = try RedisSequencer.prepare(
      redis, password: password, proposedEpoch: Hub.randomEpoch(), clock: redisClock)
    stored.epoch = epoch
    serverClock = redisClock
    let settings = RedisSequencer.Settings(address: redis, epoch: epoch, password: password)
    cluster = RedisSequencer(settings: settings, clock: redisClock)
    log.info("cluster_joined", ["redis": LogValue(redis.description), "epoch": LogValue(epoch)])
  } catch {
    log.error(
      error.kind == .authentication ? "redis_auth_failed" : "redis_unreachable",
      ["redis": LogValue(redis.description), "error": LogValue(error.description)])
    log.flush()
    report("\(error.description)")
    exit(1)
  }
} else if options.dataPath == SQLiteStore.inMemory {
  store = nil
  log.warn(
    "storage_off",
    ["msg": LogValue("--data :memory:: sessions are kept in memory only and a restart loses them")])
} else {
  do throws(StoreError) {
    let opened = try SQLiteStore.open(
      path: options.dataPath, sync: options.sync, queueLimit: options.storeQueueLimit)
    let loaded = try opened.load(now: SystemClock().nowMilliseconds())
    stored = (loaded.epoch, loaded.sessions)
    for entry in loaded.setAside {
      log.warn(
        "session_set_aside",
        [
          "session": LogValue(entry.session), "reason": LogValue(entry.reason),
          "msg": LogValue("a damaged row was moved to the damaged_sessions table"),
        ])
    }
    if stored.epoch == nil {
      stored.epoch = Hub.randomEpoch()
      try opened.saveEpoch(stored.epoch!)
    }
    store = opened
  } catch {
    log.error("storage_refused", ["error": LogValue(error.description)])
    log.flush()
    // A file in use is not a bad configuration: the other server may stop.
    guard error.kind == .inUse else { fail("\(error.description)") }
    report("\(error.description)")
    exit(1)
  }
}

let hub = Hub(
  config: options.hub, epoch: stored.epoch ?? Hub.randomEpoch(),
  sequencer: cluster ?? LocalSequencer(store: store))
cluster?.hub = hub
hub.observer = SessionEventLog(logger: log)
hub.restore(stored.sessions, now: serverClock.nowMilliseconds())
if let store {
  log.info(
    "storage_loaded",
    [
      "path": LogValue(store.path), "sync": LogValue(store.sync.rawValue),
      "sessions": LogValue(stored.sessions.count),
    ])
}
stored.sessions = []
let server = CountdownServer(config: options.server, hub: hub, clock: serverClock)
// hiredis runs on the service thread's loop, outside lws's callbacks: what
// a Redis reply changed in the hub is pushed to lws at once.
cluster?.onHubChanged = { server.pushHubChanges() }
// The writer thread's results reach the hub on the service thread, which is
// this (the main) thread: `run` below is called from here.
store?.onCompleted = { [queue = server.serviceQueue] completions in
  queue.post {
    MainActor.assumeIsolated {
      let now = serverClock.nowMilliseconds()
      for completion in completions {
        if case .unavailable(let message) = completion.outcome {
          log.warn(
            "command_not_stored",
            ["session": LogValue(completion.session), "error": LogValue(message)])
        }
        hub.complete(completion.ticket, completion.outcome, now: now)
      }
    }
  }
}
if let store {
  server.metrics.register { collectStoreStats(store.stats, into: &$0) }
}
/// 1 when cluster mode cannot go on: another instance made a new cluster
/// epoch (a restart joins the cluster's history), or lws could not load libev.
var clusterExitCode: Int32 = 0
if let cluster {
  server.onLoopReady = { libevLoop in
    guard let libevLoop else {
      // --redis requires --event-loop libev; this is lws failing to load it.
      log.error("redis_needs_libev", ["msg": LogValue("the libev loop is unavailable")])
      clusterExitCode = 1
      CountdownServer.requestStop()
      return
    }
    cluster.start(on: LibevLoop(borrowing: libevLoop))
  }
  server.onLoopDone = { cluster.stop() }
  cluster.onEpochConflict = { _ in
    clusterExitCode = 1
    CountdownServer.requestStop()
  }
  // A load balancer stops sending viewers to an instance that cannot reach Redis.
  server.addReadinessCheck("redis") { cluster.isConnected }
  server.metrics.register { collectClusterStats(cluster, into: &$0) }
}
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
// Everything acknowledged is committed already; this commits what is still
// queued (creations, deletions) and checkpoints the file.
store?.close()
log.info("stopped")
log.flush()
exit(clusterExitCode)
