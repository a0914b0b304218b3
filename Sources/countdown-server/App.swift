import CountdownCore
import LWSServer
import Observability
import RedisCluster
import SQLiteStore
import WebhookDelivery

#if canImport(Glibc)
  import Glibc
#endif

/// The composition root: makes the store or the cluster, the hub and the
/// server from the options, wires them together on one clock, and runs the
/// server on the calling thread, which becomes the service thread. Nothing
/// outside this type holds any of them.
final class App {
  static let version = "0.12.0"

  private let options: Options
  private let log: Logger
  /// This host's clock (shifted only by --test-clock-offset-ms); in a cluster
  /// the server runs on Redis's clock instead, measured against this one.
  private let wallClock: any WallClock
  /// 1 when cluster mode cannot go on: another instance made a new cluster
  /// epoch (a restart joins the cluster's history), or lws could not load libev.
  private var exitCode: Int32 = 0
  /// Made after the hub, which needs the cluster first; the cluster's
  /// results reach the hub through it.
  private var server: CountdownServer?

  /// Where sessions come from, and the clock the server runs on.
  private struct Sessions {
    var store: SQLiteStore?
    var cluster: RedisSequencer?
    var epoch: String?
    var stored: [StoredSession] = []
    /// Idempotency-Key answers remembered in the file, for the sequencer.
    var answers = IdempotencyCache()
    var clock: any WallClock
  }

  /// The options of a run; anything else (`--help`, `--version`,
  /// `--print-config`, a usage error) is answered here and exits.
  static func parseOptions(_ arguments: [String]) -> Options {
    do {
      switch try Options.parse(arguments, environment: { getenv($0).map { String(cString: $0) } }) {
      case .help:
        print(Options.usage)
        exit(0)
      case .version:
        print("countdown-server \(version)\nlibwebsockets \(CountdownServer.libraryVersion)")
        exit(0)
      case .printConfig(let parsed):
        print(parsed.printedConfig)
        exit(0)
      case .run(let parsed):
        return parsed
      }
    } catch {
      fail("\(error.message)\nTry 'countdown-server --help'.")
    }
  }

  /// Checks what must hold before anything starts, and installs the logger.
  init(options: Options) {
    self.options = options
    var isDirectory = stat()
    guard stat(options.server.publicDirectory + "/index.html", &isDirectory) == 0 else {
      let name: String =
        if case .environment(let variable) = options.sources["--public"] { variable } else {
          "--public"
        }
      Self.fail(
        "\(name) must be a directory with an index.html, not '\(options.server.publicDirectory)'")
    }
    Logger.shared = Logger(
      level: options.logLevel, format: options.logFormat ?? Logger.defaultFormat())
    log = Logger.shared
    wallClock =
      options.testClockOffsetMs == 0
      ? SystemClock() : ShiftedClock(byMs: Int64(options.testClockOffsetMs))
  }

  /// Serves until a stop signal; the process's exit status.
  func run() -> Int32 {
    logStart()
    warnUnknownVariables()
    signal(SIGPIPE, SIG_IGN)
    // A parent may hand down a mask that blocks the stop signals (a thread
    // of Foundation's `Process` does): a blocked SIGTERM would never stop
    // the server. Unblocked here, before any thread is made to inherit it.
    var stopSignals = sigset_t()
    sigemptyset(&stopSignals)
    for stopSignal in [SIGINT, SIGTERM] {
      sigaddset(&stopSignals, stopSignal)
      signal(stopSignal) { _ in CountdownServer.requestStop() }
    }
    pthread_sigmask(SIG_UNBLOCK, &stopSignals, nil)
    raiseOpenFileLimit(toServe: options.server.maxConnections)

    // Every session's durable facts are loaded, and the deadline heap
    // rebuilt, before the listener opens.
    var sessions = openSessions()
    var hubConfig = options.hub
    // With webhooks on, every change is recorded with its event (the outbox).
    hubConfig.recordsEvents = options.webhook.enabled
    let hub = Hub(
      config: hubConfig, epoch: sessions.epoch ?? Hub.randomEpoch(),
      sequencer: sessions.cluster
        ?? LocalSequencer(store: sessions.store, answers: sessions.answers))
    sessions.cluster?.hub = hub
    hub.observer = SessionEventLog(logger: log)
    hub.restore(sessions.stored, now: sessions.clock.nowMilliseconds())
    if let store = sessions.store {
      log.info(
        "storage_loaded",
        [
          "path": LogValue(store.path), "sync": LogValue(store.sync.rawValue),
          "sessions": LogValue(sessions.stored.count),
        ])
    }
    sessions.stored = []
    let server = CountdownServer(config: options.server, hub: hub, clock: sessions.clock)
    self.server = server
    if let store = sessions.store {
      // The writer thread's results reach the hub on the service thread.
      store.completeCommands(in: hub, clock: sessions.clock, through: server.onServiceThread)
      server.metrics.register { collectStoreStats(store.stats, into: &$0) }
    }
    if let cluster = sessions.cluster { wire(cluster, to: server) }
    registerMetrics(on: server, hub: hub)
    if let readyFile = options.readyFile {
      server.addReadinessCheck("ready_file") { access(readyFile, F_OK) == 0 }
    }
    let deliverer = makeDeliverer(sessions, server: server)
    deliverer?.start()

    do {
      try server.run { port in announce(port, server) }
    } catch {
      log.error("failed", ["error": LogValue("\(error)")])
      log.flush()
      return 1
    }
    // In-flight deliveries stay in the outbox, to be sent after a restart;
    // the outbox may be the store's, so this comes before it closes.
    deliverer?.stop()
    // Everything acknowledged is committed already; this commits what is still
    // queued (creations, deletions) and checkpoints the file.
    sessions.store?.close()
    log.info("stopped")
    log.flush()
    return exitCode
  }

  // MARK: Start-up

  private func logStart() {
    let effective = options.effectiveConfig()
    func names(from wanted: (Options.Source) -> Bool) -> String {
      effective.filter { wanted($0.source) }.map { String($0.flag.dropFirst(2)) }
        .joined(separator: ",")
    }
    log.info(
      "starting",
      fields: [
        ("version", LogValue(Self.version)), ("lws", LogValue(CountdownServer.libraryVersion)),
      ]
        + effective.map { flag, value, _ in
          (String(flag.dropFirst(2)).replacing("-", with: "_"), LogValue(value))
        } + [
          ("set_by_env", LogValue(names { if case .environment = $0 { true } else { false } })),
          ("set_by_flag", LogValue(names { $0 == .flag })),
        ])
  }

  /// Names only: a value could be anything, a secret among them.
  private func warnUnknownVariables() {
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
        [
          "names": LogValue(unknownVariables.joined(separator: ",")),
          "hint": "no option reads them",
        ])
    }
  }

  /// Every allowed connection needs a descriptor, plus a few for files and the listener.
  private func raiseOpenFileLimit(toServe connections: Int) {
    let needed = rlim_t(connections + 64)
    var limit = rlimit()
    guard getrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limit) == 0,
      limit.rlim_cur < needed
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

  /// Cluster mode (Redis holds the sessions, and SQLite is not used for
  /// them), the SQLite file, or nothing (`--data :memory:`).
  private func openSessions() -> Sessions {
    if let redis = options.redis { return joinCluster(redis) }
    if options.dataPath == SQLiteStore.inMemory {
      log.warn(
        "storage_off",
        [
          "msg": LogValue(
            "--data :memory:: sessions are kept in memory only and a restart loses them")
        ])
      return Sessions(answers: IdempotencyCache(limits: options.idempotency), clock: wallClock)
    }
    return openStore()
  }

  private func joinCluster(_ redis: RedisAddress) -> Sessions {
    do {
      // Blocking is fine here: the listener is not open yet.
      let password = try options.redisPasswordFile.map { (file) throws(RedisError) in
        try RedisPassword.read(file: file)
      }
      let redisClock = RedisClock(local: wallClock)
      let epoch = try RedisSequencer.prepare(
        redis, password: password, proposedEpoch: Hub.randomEpoch(), clock: redisClock)
      var settings = RedisSequencer.Settings(address: redis, epoch: epoch, password: password)
      // Each command records its event in the events stream, in its own call.
      settings.recordsEvents = options.webhook.enabled
      settings.idempotencyLimits = options.idempotency
      // hiredis runs on the service thread's loop, outside lws's callbacks:
      // its results change the hub at once, and the server pushes them.
      let cluster = RedisSequencer(settings: settings, clock: redisClock)
      // Events reach the hub directly; the server then pushes them, coalesced.
      cluster.onHubChanged = { [unowned self] in server?.runOnServiceThread {} }
      log.info("cluster_joined", ["redis": LogValue(redis.description), "epoch": LogValue(epoch)])
      return Sessions(cluster: cluster, epoch: epoch, clock: redisClock)
    } catch {
      log.error(
        error.kind == .authentication ? "redis_auth_failed" : "redis_unreachable",
        ["redis": LogValue(redis.description), "error": LogValue(error.description)])
      log.flush()
      Self.report("\(error.description)")
      exit(1)
    }
  }

  private func openStore() -> Sessions {
    do throws(StoreError) {
      let store = try SQLiteStore.open(
        path: options.dataPath, sync: options.sync, queueLimit: options.storeQueueLimit)
      let loaded = try store.load(now: wallClock.nowMilliseconds())
      for entry in loaded.setAside {
        log.warn(
          "session_set_aside",
          [
            "session": LogValue(entry.session), "reason": LogValue(entry.reason),
            "msg": LogValue("a damaged row was moved to the damaged_sessions table"),
          ])
      }
      let remembered = try store.loadAnswers(
        now: wallClock.nowMilliseconds(), into: IdempotencyCache(limits: options.idempotency))
      for entry in remembered.damaged {
        log.warn(
          "idempotency_answer_dropped",
          [
            "session": LogValue(entry.session), "reason": LogValue(entry.reason),
            "msg": LogValue("a damaged row of the idempotency table was deleted"),
          ])
      }
      var epoch = loaded.epoch
      if epoch == nil {
        let made = Hub.randomEpoch()
        try store.saveEpoch(made)
        epoch = made
      }
      return Sessions(
        store: store, epoch: epoch, stored: loaded.sessions, answers: remembered.answers,
        clock: wallClock)
    } catch {
      log.error("storage_refused", ["error": LogValue(error.description)])
      log.flush()
      // A file in use is not a bad configuration: the other server may stop.
      guard error.kind == .inUse else { Self.fail("\(error.description)") }
      Self.report("\(error.description)")
      exit(1)
    }
  }

  /// The cluster's connections live on the server's libev loop, from when it
  /// is ready until it is done.
  private func wire(_ cluster: RedisSequencer, to server: CountdownServer) {
    server.onLoopReady = { [unowned self] loop in
      guard let loop else {
        // --redis requires --event-loop libev; this is lws failing to load it.
        log.error("redis_needs_libev", ["msg": LogValue("the libev loop is unavailable")])
        exitCode = 1
        CountdownServer.requestStop()
        return
      }
      cluster.start(on: loop)
    }
    server.onLoopDone = { cluster.stop() }
    cluster.onEpochConflict = { [unowned self] _ in
      exitCode = 1
      CountdownServer.requestStop()
    }
    // A load balancer stops sending viewers to an instance that cannot reach Redis.
    server.addReadinessCheck("redis") { cluster.isConnected }
    server.metrics.register { collectClusterStats(cluster, into: &$0) }
  }

  // MARK: Webhooks

  /// The deliverer, when `--webhook` is given, reading the outbox of the
  /// store or the cluster on its own thread.
  private func makeDeliverer(_ sessions: Sessions, server: CountdownServer) -> WebhookDeliverer? {
    guard let settings = options.webhook.settings else { return nil }
    guard let outbox = makeOutbox(sessions) else {
      Self.fail("--webhook: this storage keeps no webhook outbox")
    }
    let clock = sessions.clock
    let deliverer = WebhookDeliverer(
      settings: settings, outbox: outbox, clock: { clock.nowMilliseconds() }, log: log)
    // The writer thread wakes it after each commit that recorded an event.
    sessions.store?.onEventsRecorded = { deliverer.wake() }
    server.metrics.register { collectWebhookStats(deliverer.stats, into: &$0) }
    sessions.cluster?.onEventsRecorded = { deliverer.wake() }
    log.info(
      "webhooks_on",
      [
        "endpoints": LogValue(settings.endpoints.map(\.description).joined(separator: ",")),
        "events": LogValue(settings.events.description),
      ])
    return deliverer
  }

  /// Where events wait for delivery: the SQLite store's outbox table, or the
  /// cluster's Redis stream. The recorder wakes the deliverer after a commit.
  private func makeOutbox(_ sessions: Sessions) -> sending (any WebhookOutbox)? {
    if let store = sessions.store { return store }
    if let cluster = sessions.cluster { return streamOutbox(cluster) }
    return nil
  }

  /// The cluster's: the events stream, read in the group under this
  /// instance's name, on the delivery thread's own connection.
  private func streamOutbox(_ cluster: RedisSequencer) -> sending StreamOutbox {
    var settings = StreamOutbox.Settings(
      address: cluster.settings.address, password: cluster.settings.password,
      consumer: cluster.instance)
    settings.claimAfterMs = Int64(options.testWebhookClaimMs)
    return StreamOutbox(settings: settings, config: SessionConfig.Shared(options.hub.session))
  }

  private func registerMetrics(on server: CountdownServer, hub: Hub) {
    let processMetrics = ProcessMetrics()
    let log = log
    server.metrics.register { collectHubStats(hub, into: &$0) }
    server.metrics.register { processMetrics.collect(into: &$0) }
    server.metrics.register { log.collect(into: &$0) }
    server.metrics.register { writer in
      writer.family(
        "countdown_build_info", .gauge, help: "Versions of the server and of lws; always 1.")
      writer.sample(
        "countdown_build_info", ["version": Self.version, "lws": CountdownServer.libraryVersion],
        1)
    }
  }

  /// The listening line on stdout, for tests and supervisors, then the log's.
  private func announce(_ port: Int, _ server: CountdownServer) {
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

  // MARK: Usage errors

  /// Writes to standard error without touching C's global `stderr` (not
  /// Sendable). Only for what comes before the logger is configured, or
  /// after it is flushed: usage errors.
  static func report(_ message: String) {
    let line = Array("countdown-server: \(message)\n".utf8)
    _ = line.withUnsafeBytes { write(STDERR_FILENO, $0.baseAddress, $0.count) }
  }

  static func fail(_ message: String) -> Never {
    report(message)
    exit(2)
  }
}
