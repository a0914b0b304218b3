import CLibWebSockets
import CountdownCore
import Libev
import Observability
import Synchronization

#if canImport(Glibc)
  import Glibc
#endif

/// The libwebsockets side of the server: one context, one service thread (the
/// caller of `run`), one timer, and the mapping from hub connections to sockets.
///
/// Every lws call happens on the thread inside `run`. The entries from other
/// threads are `serviceQueue` (and `onServiceThread`'s functions, which post
/// to it) and, from a signal handler, `requestStop`; both call nothing but
/// `lws_cancel_service`. Work already on the service thread but outside lws's
/// callbacks (hiredis replies) uses `runOnServiceThread`.
///
/// The loop is lws's poll() or a `LibevLoop` the server creates and lends to
/// lws as a foreign loop (`ServerConfig.eventLoop`). Either way the loop is
/// driven by lws and by the server's timers (`ServiceTimer`), never by code
/// "once per iteration": with libev, `lws_service` returns only when the loop
/// is broken.
public final class CountdownServer {
  public static let subprotocol = "countdown.v1"

  let config: ServerConfig
  let hub: Hub
  let clock: any WallClock

  /// The socket side of each hub connection, and of refused and closing ones.
  var table = ConnectionTable()
  /// Who may connect, and how many are open of every kind and per address.
  var admission: Admission
  var openSockets: Int { admission.open }
  var echo = EchoRoute()
  /// Refusals any client may provoke are logged at most once a second.
  var originLogThrottle = LogThrottle()
  var headerLogThrottle = LogThrottle()
  var forwardedLogThrottle = LogThrottle()
  /// Set once a stop is requested: every socket is being closed with 1001.
  private(set) var stopping = false
  /// Set on SIGTERM or SIGINT: `/readyz` says 503 and new connections are refused.
  public var draining: Bool { admission.draining }
  /// Set once the listeners are up.
  private var listening = false
  /// Further conditions for `/readyz` (a storage load, for one), by name.
  private var readinessChecks: [(name: String, isMet: () -> Bool)] = []
  /// Every metric family `/metrics` renders; others register theirs here.
  public let metrics = MetricsRegistry()
  var network = NetworkStats()
  /// Public/404.html, read when the server starts: the body of every 404.
  var notFoundPage: [UInt8]?
  /// The last QR codes drawn for /qr.svg.
  var qrCodes = QRCodeAnswers()
  /// Bodies of HTTP answers waiting for their connection to be writable.
  var httpBodies: [Wsi: [UInt8]] = [:]
  /// `/api/v1` transactions and their answers (`CountdownServer+API.swift`).
  var api = APITable()
  /// The bound port of the `--metrics-port` listener.
  public private(set) var metricsListenPort: Int?
  /// That listener's vhost, which serves no WebSocket.
  private(set) var metricsVhost: Vhost?
  /// Set when the loop should end: every socket closed, or the deadline passed.
  private var finished = false

  /// Work other threads hand to the service thread.
  public let serviceQueue = ServiceQueue()
  /// The handlers `onServiceThread` registered, by number.
  private var handlers: [(any Sendable) -> Void] = []
  /// Between the queue opening and closing: when `runOnServiceThread` runs work.
  private var serving = false
  /// A push of the hub's changes is due (`runOnServiceThread`).
  private var pushPending = false
  /// The loop `run` is running on; nil outside `run`. libev when it was asked
  /// for and its plugin loaded; poll otherwise.
  public private(set) var activeEventLoop: EventLoop?
  /// Called on the service thread once the server listens, before any event
  /// is serviced, with the libev loop when running on libev, nil on poll.
  /// Attach other descriptors and timers to that loop here (hiredis,
  /// `LoopTimer`s); they run on the service thread.
  public var onLoopReady: ((_ loop: LibevLoop?) -> Void)?
  /// Called on the service thread after the loop stopped for good, before the
  /// libev loop is destroyed: stop whatever `onLoopReady` attached.
  public var onLoopDone: (() -> Void)?
  /// Connections `flush` writes to directly, gathered during the hub's drain.
  private var writeNow: [ConnectionID] = []
  /// One reusable write buffer with `LWS_PRE` bytes of headroom.
  private var scratch: UnsafeMutableRawBufferPointer
  private lazy var timer = ServiceTimer { [unowned self] in timerDidFire() }
  /// The keepalive sweep when no tick has woken the loop for a while, and the
  /// shutdown deadline.
  private lazy var housekeeping = ServiceTimer { [unowned self] in housekeepingDidFire() }
  /// Ends a drain (`--drain-seconds`) and starts closing connections.
  private lazy var drainTimer = ServiceTimer { [unowned self] in beginStop() }
  /// Pushes the hub's changes after `runOnServiceThread`, once per iteration.
  private lazy var pushTimer = ServiceTimer { [unowned self] in
    pushPending = false
    flush()
  }
  /// The service-loop iteration metric on libev.
  private lazy var loopClock = LoopClock { [unowned self] in recordLoopIteration(seconds: $0) }
  /// On libev only: lws runs its own due timers (async kills, close-send,
  /// close-ack and flush timeouts) only after a socket event or when its one
  /// libev timer fires, and that timer cannot be brought forward (see
  /// ServiceTimer). Ticks written directly make few socket events, and lws's
  /// close path chains several such timeouts, so lateness added up past what
  /// clients wait for. Waking lws through its event pipe this often bounds
  /// how late any of its timers runs.
  private lazy var lwsTimers = ServiceTimer { [unowned self] in lwsTimersDidFire() }
  static let lwsTimerWakeMs: Int64 = 200
  private var timerDue: Int64?
  /// When the keepalive sweep last ran (ms).
  private var lastSweepAt: Int64 = 0
  private var context: LWSContext?
  /// The libev loop lent to lws, created by the server; it goes once the
  /// context has gone and nothing else attached to it holds it.
  private var libevLoop: LibevLoop?
  /// C strings and structs the context points into; freed after it is destroyed.
  private var retained: [UnsafeMutableRawPointer] = []

  public init(config: ServerConfig, hub: Hub, clock: any WallClock = SystemClock()) {
    self.config = config
    self.hub = hub
    self.clock = clock
    admission = Admission(config: config)
    scratch = .allocate(byteCount: cds_lws_pre() + 16 * 1024, alignment: 16)
    metrics.register { [unowned self] writer in self.collectNetwork(into: &writer) }
  }

  deinit {
    scratch.deallocate()
    for pointer in retained { free(pointer) }
  }

  // MARK: Lifecycle

  /// Listens, calls `onListening` with the bound port, then services the
  /// socket until `requestStop`. Runs on (and becomes) the service thread.
  public func run(onListening: (Int) -> Void) throws(LWSError) {
    routeLibraryLog(to: Logger.shared)
    var info = lws_context_creation_info()
    info.port = Int32(config.port)
    info.iface = retain(config.host)
    info.protocols = UnsafePointer(makeProtocols())
    info.mounts = UnsafePointer(makeMounts())
    notFoundPage = Self.readFile(config.publicDirectory + "/404.html")
    // The document is the API's contract; it outgrew the small-file limit once and was
    // then served as a silent 404.
    api.document = Self.readFile(
      config.publicDirectory + "/" + Self.openAPIFile, limit: Self.openAPILimit)
    if api.document == nil {
      Logger.shared.warn(
        "openapi_unreadable", ["path": LogValue(config.publicDirectory + "/" + Self.openAPIFile)])
    }
    info.retry_and_idle_policy = UnsafePointer(makeIdlePolicy())
    info.timeout_secs = UInt32(config.headerTimeoutSeconds)
    // fd_limit_per_thread stays unset on purpose: below the open-file limit,
    // lws 4.1 switches to a linear fd-to-wsi lookup that costs O(n) per event
    // (bench/PROFILE.md). Admission enforces --max-connections instead.
    info.options =
      cds_option_validate_utf8() | cds_option_explicit_vhosts() | cds_option_fallback_to_raw()
    // lws's security headers are all or nothing: to let named sites frame the
    // page, the same set is given as the vhost's own headers, minus the deny.
    if let ancestors = config.frameAncestors {
      info.headers = UnsafePointer(makeHeaders(ancestors.headers + Self.closeHeader))
    } else {
      info.headers = UnsafePointer(makeHeaders(Self.closeHeader))
      info.options |= cds_option_security_headers()
    }
    if !config.host.contains(":") { info.options |= cds_option_disable_ipv6() }
    info.user = Unmanaged.passUnretained(self).toOpaque()

    let created = try createContext(&info)
    context = created
    finished = false
    admission.restart()
    stopping = false
    ActiveContext.install(created)
    serviceQueue.open(created)
    serving = true
    for each in [timer, housekeeping, drainTimer, lwsTimers, pushTimer] {
      each.attach(context: created, loop: libevLoop)
    }
    if let libevLoop { loopClock.start(on: libevLoop) }
    defer {
      serviceQueue.close()
      serving = false
      ActiveContext.install(nil)
      onLoopDone?()
      for each in [timer, housekeeping, drainTimer, lwsTimers, pushTimer] { each.detach() }
      pushPending = false
      loopClock.stop()
      timerDue = nil
      lws_context_destroy(created.raw)
      context = nil
      libevLoop = nil
      activeEventLoop = nil
    }
    // The listening socket: a failure here is the address, not the loop.
    guard lws_create_vhost(created.raw, &info) != nil else {
      throw .contextCreationFailed(host: config.host, port: config.port)
    }
    if let port = config.metricsPort {
      metricsListenPort = try createMetricsListener(created, port: port)
    }
    let vhost = lws_get_vhost_by_name(created.raw, "default")
    listening = true
    onListening(vhost.map { Int(lws_get_vhost_listen_port($0)) } ?? config.port)
    onLoopReady?(libevLoop)
    lastSweepAt = clock.nowMilliseconds()
    scheduleHousekeeping(afterMs: Self.sweepIntervalMs)
    if libevLoop != nil { lwsTimers.schedule(afterMs: Self.lwsTimerWakeMs) }

    // On poll, each lws_service is one wait; on libev, one ev_run that
    // returns when `finish` breaks it.
    while !finished {
      let code = serviceOnce(created)
      if code < 0 { throw .serviceFailed(code: code) }
    }
  }

  /// The context on the loop the configuration asks for. When libev's plugin
  /// cannot be loaded (lws then says why on stderr), the server warns and
  /// falls back to poll rather than not serving at all.
  private func createContext(
    _ info: inout lws_context_creation_info
  ) throws(LWSError) -> LWSContext {
    if config.eventLoop == .libev {
      if let loop = LibevLoop.make() {
        var loops: [UnsafeMutableRawPointer?] = [UnsafeMutableRawPointer(loop.unsafeRawLoop), nil]
        let options = info.options
        info.options |= cds_option_libev()
        let created = loops.withUnsafeMutableBufferPointer { buffer in
          info.foreign_loops = buffer.baseAddress
          defer { info.foreign_loops = nil }
          return lws_create_context(&info)
        }
        info.options = options
        if let created {
          libevLoop = loop
          activeEventLoop = .libev
          if getenv("CDS_DEBUG") != nil {
            cds_log(LLL_NOTICE, "countdown-server: libev backend \(loop.backendName)")
          }
          return LWSContext(raw: created)
        }
      }
      cds_log(
        LLL_WARN,
        "countdown-server: warning: the libev event loop is unavailable "
          + "(libwebsockets-evlib_ev.so or libev missing?); running on poll(), "
          + "which costs more per wake-up with many sessions")
    }
    guard let created = lws_create_context(&info) else { throw .eventLoopFailed }
    activeEventLoop = .poll
    return LWSContext(raw: created)
  }

  /// One turn of the poll loop, timed by the thread's CPU clock so that the
  /// wait inside poll() does not count as work.
  private func serviceOnce(_ context: LWSContext) -> Int32 {
    // On libev one lws_service is the whole run: its iterations are timed by
    // watchers around each wait instead.
    guard activeEventLoop == .poll else { return lws_service(context.raw, 0) }
    let started = LoopClock.threadCPUSeconds()
    let code = lws_service(context.raw, 0)
    recordLoopIteration(seconds: LoopClock.threadCPUSeconds() - started)
    return code
  }

  // MARK: Readiness

  /// `/readyz` answers 200 only when every check passes, besides the listener
  /// being up and no drain under way. Checks run on the service thread at
  /// each request, so they must be cheap.
  public func addReadinessCheck(_ name: String, _ isMet: @escaping () -> Bool) {
    readinessChecks.append((name, isMet))
  }

  /// What `/readyz` is still waiting for; empty when ready.
  func unmetReadiness() -> [String] {
    var waiting: [String] = []
    if draining { waiting.append("draining") }
    if !listening { waiting.append("listener") }
    for check in readinessChecks where !check.isMet() { waiting.append(check.name) }
    return waiting
  }

  var isReady: Bool { unmetReadiness().isEmpty }

  /// The libwebsockets build this process links.
  public static var libraryVersion: String {
    String(cString: lws_get_library_version())
  }

  /// Keepalive and stuck sockets are checked about this often: one pass over
  /// an array, instead of lws's per-connection timers (see `makeIdlePolicy`).
  static let sweepIntervalMs: Int64 = 1000

  /// A sweep rides on a tick's wake-up when one comes at least half an
  /// interval after the last sweep; the housekeeping timer is only the
  /// fallback, 1.5 intervals on. Each wake-up is a poll() over every open
  /// socket (about 13 ms at 19k), so a sweep with a wake-up of its own made
  /// the server 7 % dearer per frame than the C floor (bench/PROFILE.md).
  private func sweepIfDue(now: Int64, force: Bool) {
    guard force || now - lastSweepAt >= Self.sweepIntervalMs / 2 else { return }
    lastSweepAt = now
    let sweep = sweepConnections(now: now)
    if !sweep.close.isEmpty {
      Logger.shared.info("connections_timed_out", ["count": LogValue(sweep.close.count)])
    }
    for wsi in sweep.close {
      // Silent too long, or not writable for a minute: kill it from outside
      // its callbacks, the way lws allows.
      lws_set_timeout(wsi.raw, PENDING_TIMEOUT_USER_OK, LWS_TO_KILL_ASYNC)
    }
    for (id, wsi) in sweep.ping { requestWritable(id, wsi) }
    scheduleHousekeeping(afterMs: Self.sweepIntervalMs * 3 / 2)
  }

  private func scheduleHousekeeping(afterMs delay: Int64) {
    housekeeping.schedule(afterMs: delay)
  }

  private func lwsTimersDidFire() {
    if let context { lws_cancel_service(context.raw) }
    lwsTimers.schedule(afterMs: Self.lwsTimerWakeMs)
  }

  private func housekeepingDidFire() {
    if stopping {
      finish()  // the shutdown deadline: sockets still open are dropped
      return
    }
    sweepIfDue(now: clock.nowMilliseconds(), force: true)
  }

  /// A listener on its own port for `/metrics`, `/healthz` and `/readyz`,
  /// so metrics can stay on loopback while the page is served to the world.
  private func createMetricsListener(_ context: LWSContext, port: Int) throws(LWSError) -> Int {
    var info = lws_context_creation_info()
    info.port = Int32(port)
    info.iface = retain(config.metricsHost)
    info.vhost_name = retain("metrics")
    var http = lws_protocols()
    http.name = retain("http")
    http.callback = httpCallback
    info.protocols = UnsafePointer(retain([http, lws_protocols()]))
    info.mounts = UnsafePointer(makeEndpointMounts(["/healthz", "/readyz", "/metrics"], next: nil))
    info.headers = UnsafePointer(makeHeaders(Self.closeHeader))
    info.options = cds_option_security_headers() | cds_option_fallback_to_raw()
    if !config.metricsHost.contains(":") { info.options |= cds_option_disable_ipv6() }
    guard let vhost = lws_create_vhost(context.raw, &info) else {
      throw .contextCreationFailed(host: config.metricsHost, port: port)
    }
    metricsVhost = Vhost(raw: vhost)
    return Int(lws_get_vhost_listen_port(vhost))
  }

  /// Asks the service loop to finish. Safe from a signal handler.
  public static func requestStop() {
    ActiveContext.requestStop()
  }

  /// The loop was woken through lws's event pipe, by `serviceQueue` or by
  /// `requestStop`.
  func serviceWoken() {
    let work = serviceQueue.take()
    for item in work {
      switch item {
      case .work(let run): run()
      case .value(let value, let handler): handlers[handler](value)
      }
    }
    if !work.isEmpty { flush() }
    if ActiveContext.stopRequested && !draining { beginDrain() }
    if ActiveContext.stopRequestedAgain && !stopping { beginStop() }
  }

  /// A function any thread may call: each value it is given reaches `handle`
  /// on the service thread, through `serviceQueue` and in order with
  /// everything else posted there, and what `handle` changed in the hub is
  /// pushed to lws after. For a handler that cannot travel in a Sendable
  /// closure (it holds the hub). Call on the service thread or before `run`.
  public func onServiceThread<Value: Sendable>(
    _ handle: @escaping (Value) -> Void
  ) -> @Sendable (Value) -> Void {
    handlers.append { handle($0 as! Value) }
    let handler = handlers.count - 1
    return { [serviceQueue] value in serviceQueue.post(value, to: handler) }
  }

  /// Runs `work`, which is on the service thread already but outside lws's
  /// callbacks (a hiredis reply, another module's timer), at once, and
  /// pushes what it changed in the hub to lws before the loop next waits:
  /// many calls in one iteration cost one push. Outside `run` (the queue is
  /// closed) the work is dropped without running, as the queue drops it.
  public func runOnServiceThread(_ work: () -> Void) {
    guard serving else { return }
    work()
    guard !pushPending else { return }
    pushPending = true
    pushTimer.schedule(afterMs: 0)
  }

  /// SIGTERM or SIGINT: `/readyz` turns 503 at once. With `--drain-seconds`,
  /// the server keeps serving that long, so a load balancer sees it and moves
  /// traffic, before it closes every connection; a second signal cuts it short.
  private func beginDrain() {
    admission.beginDrain()
    guard config.drainSeconds > 0 else { return beginStop() }
    Logger.shared.info(
      "draining", ["seconds": LogValue(config.drainSeconds), "connections": LogValue(openSockets)])
    drainTimer.schedule(afterMs: Int64(config.drainSeconds) * 1000)
  }

  /// Closes every WebSocket with 1001 "going away", for at most 1.5 s.
  private func beginStop() {
    guard !stopping else { return }
    drainTimer.cancel()
    Logger.shared.info("closing_connections", ["connections": LogValue(openSockets)])
    stopping = true
    for slot in table.viewers.indices {
      if let wsi = table.viewers[slot].wsi { requestWritable(ConnectionID(slot), wsi) }
    }
    for wsi in echo.sockets { lws_callback_on_writable(wsi.raw) }
    if openSockets == 0 {
      finish()
    } else {
      scheduleHousekeeping(afterMs: 1500)
    }
  }

  /// A socket closed: during a stop, the last one ends the loop.
  func socketReleased() {
    if stopping && openSockets == 0 { finish() }
  }

  private func finish() {
    guard !finished else { return }
    finished = true
    if let libevLoop {
      libevLoop.breakRun()
    } else if let context {
      // Otherwise lws_service sleeps on until its next timer, seconds away.
      lws_cancel_service(context.raw)
    }
  }

  // MARK: Called from the callbacks, on the service thread

  /// Pushes what the hub has to write to lws, and re-arms the one timer.
  ///
  /// `writingNow` (from the tick's timer, outside every socket's callback)
  /// writes each connection's frame at once instead of asking lws for a
  /// WRITEABLE callback first. On libev each such request is an epoll_ctl to
  /// watch for writability and another to stop, plus a wake-up: most of what
  /// a frame cost beyond the write itself. A socket with unsent bytes, or a
  /// Close pending, still waits for WRITEABLE.
  func flush(writingNow: Bool = false) {
    let now = clock.nowMilliseconds()
    hub.drainWritable { connection in
      guard let wsi = table.viewers[Int(connection)].wsi else { return }
      // An event stream is no WebSocket: it has no Close to wait for (and
      // lws_get_close_length would read a WebSocket's state it lacks).
      if writingNow && lws_partial_buffered(wsi.raw) == 0
        && (table.viewers[Int(connection)].transport == .eventStream
          || lws_get_close_length(wsi.raw) == 0)
      {
        writeNow.append(connection)
      } else {
        markWaiting(connection, wsi, now: now)
      }
    }
    // After the drain: writing asks the hub for each frame.
    for connection in writeNow {
      guard let wsi = table.viewers[Int(connection)].wsi else { continue }
      if writable(wsi, connection: connection, now: now, direct: true) == .fail {
        lws_set_timeout(wsi.raw, PENDING_TIMEOUT_USER_OK, LWS_TO_KILL_ASYNC)
      }
    }
    writeNow.removeAll(keepingCapacity: true)
    deliverAPIAnswers()
    armTimer()
  }

  func requestWritable(_ wsi: Wsi) {
    lws_callback_on_writable(wsi.raw)
  }

  /// A hub connection's writable request, on either transport.
  func requestWritable(_ id: ConnectionID, _ wsi: Wsi) {
    if table.viewers[Int(id)].transport == .eventStream { streamWaits(wsi, toWrite: true) }
    lws_callback_on_writable(wsi.raw)
  }

  /// What lws 4.1.6 watches an event stream for. In mid-transaction it reads
  /// nothing from an HTTP/1 connection, yet keeps it in the poll set for
  /// input, so a client's FIN (or any byte) would wake the loop on every
  /// turn, for good; and once input is switched off (rx flow control) it no
  /// longer serves the connection's writable events either. So input is on
  /// only while a write waits: then a FIN costs one wake-up, not a spin. A
  /// client that left is found by writing to it: the first write draws the
  /// peer's reset, the second fails. Two ticks on a running session, two
  /// keepalive comments on a quiet one.
  func streamWaits(_ wsi: Wsi, toWrite: Bool) {
    lws_rx_flow_control(wsi.raw, toWrite ? 1 : 0)
  }

  /// An event stream was written and nothing more waits. Input goes off
  /// only in lws's writable callback, which has just cleared the request:
  /// off with a request still armed would spin. Bytes the socket did not
  /// take are a request lws armed itself, so input goes on for them.
  func streamWritten(_ wsi: Wsi, inCallback: Bool) {
    if lws_partial_buffered(wsi.raw) != 0 {
      streamWaits(wsi, toWrite: true)
    } else if inCallback {
      streamWaits(wsi, toWrite: false)
    }
  }

  /// Writes one frame to a connection that lws says is writable. False: close it.
  func write(_ frame: [UInt8], to wsi: Wsi, binary: Bool) -> Bool {
    guard send(frame, to: wsi, as: binary ? LWS_WRITE_BINARY : LWS_WRITE_TEXT) else {
      return false
    }
    network.framesSent += 1
    network.bytesSent += UInt64(frame.count)
    return true
  }

  /// Every write goes through here: lws wants `LWS_PRE` writable bytes before
  /// the payload, which the one reusable scratch buffer provides. lws keeps
  /// whatever the socket does not take and holds WRITEABLE until it drains.
  func send(_ bytes: [UInt8], to wsi: Wsi, as kind: lws_write_protocol) -> Bool {
    let pre = cds_lws_pre()
    if pre + bytes.count > scratch.count {
      scratch.deallocate()
      scratch = .allocate(byteCount: pre + bytes.count, alignment: 16)
    }
    bytes.withUnsafeBytes { source in
      UnsafeMutableRawBufferPointer(rebasing: scratch[pre...]).copyMemory(from: source)
    }
    let payload = scratch.baseAddress!.advanced(by: pre).assumingMemoryBound(to: UInt8.self)
    return lws_write(wsi.raw, payload, bytes.count, kind) >= 0
  }

  private func armTimer() {
    guard !stopping else { return }
    let due = hub.nextWakeup
    guard due != timerDue else { return }
    timerDue = due
    guard let due else {
      timer.cancel()
      return
    }
    // Rounded up: a timer that fired before `due` would only wake the loop twice.
    timer.schedule(afterMs: (due * 1000 - clock.nowMicroseconds() + 999) / 1000)
  }

  private func timerDidFire() {
    timerDue = nil
    let now = clock.nowMilliseconds()
    hub.advance(now: now)
    if !stopping { sweepIfDue(now: now, force: false) }
    flush(writingNow: !stopping)
  }

  // MARK: C structures that must outlive the context

  /// A small file's bytes, or nil when it cannot be read. Called before the
  /// loop runs, never while it serves.
  static func readFile(_ path: String, limit: Int = 64 * 1024) -> [UInt8]? {
    guard let file = fopen(path, "rb") else { return nil }
    defer { fclose(file) }
    var bytes = [UInt8](repeating: 0, count: limit + 1)
    let count = bytes.withUnsafeMutableBytes { fread($0.baseAddress, 1, limit + 1, file) }
    guard count <= limit, ferror(file) == 0 else { return nil }
    return Array(bytes[0..<count])
  }

  private func retain(_ string: String) -> UnsafePointer<CChar> {
    let copy = strdup(string)!
    retained.append(UnsafeMutableRawPointer(copy))
    return UnsafePointer(copy)
  }

  private func retain<T>(_ values: [T]) -> UnsafeMutablePointer<T> {
    let memory = calloc(values.count, MemoryLayout<T>.stride)!
    retained.append(memory)
    let typed = memory.bindMemory(to: T.self, capacity: values.count)
    for (index, value) in values.enumerated() { (typed + index).initialize(to: value) }
    return typed
  }

  private func makeProtocols() -> UnsafeMutablePointer<lws_protocols> {
    var http = lws_protocols()
    http.name = retain("http")
    http.callback = httpCallback
    var countdown = lws_protocols()
    countdown.name = retain(Self.subprotocol)
    countdown.callback = countdownCallback
    // Client messages are small and reassembled across reads anyway; lws's
    // default 4 KiB per connection would double the memory of each viewer.
    countdown.rx_buffer_size = 512
    // Ours comes first, so a client that names no subprotocol is ours: lws
    // binds it to index 0 until its deferred protocol init has run, and on a
    // busy libev loop that can be after the first upgrade (a pvo "default"
    // only takes effect then).
    return retain([countdown, http, lws_protocols()])
  }

  private func makeMounts() -> UnsafeMutablePointer<lws_http_mount> {
    var mimeTypes: UnsafeMutablePointer<lws_protocol_vhost_options>?
    // Suffixes lws does not know would otherwise be refused with 415.
    for (suffix, type) in [
      (".mjs", "text/javascript"), (".webmanifest", "application/manifest+json"),
      (".map", "application/json"), (".wasm", "application/wasm"), (".txt", "text/plain"),
      (".wav", "audio/wav"),
    ] {
      var option = lws_protocol_vhost_options()
      option.next = UnsafePointer(mimeTypes)
      option.name = retain(suffix)
      option.value = retain(type)
      mimeTypes = retain([option])
    }
    var files = lws_http_mount()
    files.mountpoint = retain("/")
    files.mountpoint_len = 1
    files.origin = retain(config.publicDirectory)
    files.def = retain("index.html")
    files.origin_protocol = UInt8(LWSMPRO_FILE.rawValue)
    files.extra_mimetypes = UnsafePointer(mimeTypes)
    let filesMount = retain([files])

    let endpoints =
      ["/healthz", "/readyz", "/qr.svg", Self.originCheckPath, APIRequest.prefix]
      + (config.metricsOnMainPort ? ["/metrics"] : [])
    return makeEndpointMounts(endpoints, next: filesMount)
  }

  /// Every answer lws writes says the connection ends with it: the server
  /// answers one request per connection (`Callbacks.swift` says why), and
  /// the header is how a client learns so before it sends another.
  private static let closeHeader = [(name: "connection:", value: "close")]

  /// lws's list of canned headers, in `headers`' order.
  private func makeHeaders(
    _ headers: [(name: String, value: String)]
  ) -> UnsafeMutablePointer<lws_protocol_vhost_options>? {
    var head: UnsafeMutablePointer<lws_protocol_vhost_options>?
    for (name, value) in headers.reversed() {
      var option = lws_protocol_vhost_options()
      option.next = UnsafePointer(head)
      option.name = retain(name)
      option.value = retain(value)
      head = retain([option])
    }
    return head
  }

  /// Mounts that hand each of `paths` to `httpCallback`.
  private func makeEndpointMounts(
    _ paths: [String], next: UnsafeMutablePointer<lws_http_mount>?
  ) -> UnsafeMutablePointer<lws_http_mount> {
    var head = next
    for path in paths.reversed() {
      var mount = lws_http_mount()
      mount.mount_next = UnsafePointer(head)
      mount.mountpoint = retain(path)
      mount.mountpoint_len = UInt8(path.utf8.count)
      mount.protocol = retain("http")
      mount.origin_protocol = UInt8(LWSMPRO_CALLBACK.rawValue)
      head = retain([mount])
    }
    return head!
  }

  /// lws's own keepalive is switched off (both values 0). It re-arms a timer
  /// per connection on every frame and pong, in one sorted list, so a ping
  /// round over 19k quiet viewers cost O(n²) and stalled ticks for seconds
  /// (bench/PROFILE.md). `sweepConnections` does the same job in one pass.
  private func makeIdlePolicy() -> UnsafeMutablePointer<lws_retry_bo_t> {
    retain([lws_retry_bo_t()])
  }

  private static let pingPayload = Array("ka".utf8)
  static let snapshotEvent = Array("event: snapshot\nid: ".utf8)
  static let patchEvent = Array("event: patch\nid: ".utf8)
  private static let eventData = Array("\ndata: ".utf8)
  private static let eventComment = Array(": keepalive\n\n".utf8)

  /// One Server-Sent Event: `event: <kind>`, `id: <seq>`, `data: <frame>`,
  /// composed straight into the write buffer. The frame is the WebSocket's
  /// JSON, which holds no line break.
  func writeEvent(_ head: [UInt8], _ frame: [UInt8], seq: UInt64, to wsi: Wsi) -> Bool {
    var digitCount = 1
    var power: UInt64 = 10
    while digitCount < 20 && seq >= power {
      digitCount += 1
      power = power &* 10
    }
    let count = head.count + digitCount + Self.eventData.count + frame.count + 2
    let pre = cds_lws_pre()
    if pre + count > scratch.count {
      scratch.deallocate()
      scratch = .allocate(byteCount: pre + count, alignment: 16)
    }
    var cursor = pre
    func put(_ bytes: [UInt8]) {
      bytes.withUnsafeBytes { source in
        UnsafeMutableRawBufferPointer(rebasing: scratch[cursor...]).copyMemory(from: source)
      }
      cursor += bytes.count
    }
    put(head)
    // The seq's digits, written from the last (no buffer per event).
    var rest = seq
    for index in stride(from: cursor + digitCount - 1, through: cursor, by: -1) {
      scratch[index] = UInt8(ascii: "0") + UInt8(rest % 10)
      rest /= 10
    }
    cursor += digitCount
    put(Self.eventData)
    put(frame)
    scratch[cursor] = UInt8(ascii: "\n")
    scratch[cursor + 1] = UInt8(ascii: "\n")
    let payload = scratch.baseAddress!.advanced(by: pre).assumingMemoryBound(to: UInt8.self)
    guard lws_write(wsi.raw, payload, count, LWS_WRITE_HTTP) >= 0 else { return false }
    network.framesSent += 1
    network.bytesSent += UInt64(count)
    return true
  }

  /// The comment that keeps an idle event stream's proxies from timing it out.
  func writeEventComment(to wsi: Wsi) -> Bool {
    guard send(Self.eventComment, to: wsi, as: LWS_WRITE_HTTP) else { return false }
    network.framesSent += 1
    network.bytesSent += UInt64(Self.eventComment.count)
    return true
  }

  /// Sends the ping a connection is owed. It carries a payload because lws
  /// 4.1.6 reports only non-empty pongs to the protocol callback.
  func writePing(_ wsi: Wsi) -> Bool {
    guard send(Self.pingPayload, to: wsi, as: LWS_WRITE_PING) else { return false }
    network.framesSent += 1
    network.bytesSent += 2
    return true
  }

}

/// The one running context, reachable from a signal handler: lock-free
/// atomics, which a handler may touch where it may not take a lock.
private enum ActiveContext {
  /// The running context's address (0: none); an address because a pointer
  /// is not Sendable, and it is only ever passed to lws_cancel_service.
  static let contextAddress = Atomic<UInt>(0)
  /// How many stop signals arrived (counting stops at 2).
  static let stopCount = Atomic<Int>(0)

  static var stopRequested: Bool { stopCount.load(ordering: .sequentiallyConsistent) != 0 }
  static var stopRequestedAgain: Bool { stopCount.load(ordering: .sequentiallyConsistent) > 1 }

  /// A stop requested before the context existed is kept and acted on at
  /// once; the count clears when the context goes, for the next `run`.
  static func install(_ newContext: LWSContext?) {
    contextAddress.store(UInt(bitPattern: newContext?.raw), ordering: .sequentiallyConsistent)
    if let newContext {
      if stopRequested { lws_cancel_service(newContext.raw) }
    } else {
      stopCount.store(0, ordering: .sequentiallyConsistent)
    }
  }

  static func requestStop() {
    _ = stopCount.compareExchange(expected: 1, desired: 2, ordering: .sequentiallyConsistent)
    _ = stopCount.compareExchange(expected: 0, desired: 1, ordering: .sequentiallyConsistent)
    // lws_service sleeps in poll() until an event: wake it so it sees the count.
    let address = contextAddress.load(ordering: .sequentiallyConsistent)
    if let context = OpaquePointer(bitPattern: address) { lws_cancel_service(context) }
  }
}
