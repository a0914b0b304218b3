import CountdownCore
import Observability

/// The command path's "sequence" step for a cluster: Redis orders every
/// command through one function call (`countdown_command`), so instances
/// behind a load balancer share sessions.
///
/// Everything here runs on one thread, the loop's: hiredis's callbacks,
/// timers, and the hub's calls into the sequencer. Results go back to the
/// hub through `deliver`, which runs them on the hub's thread and lets the
/// server push what changed (the server's service queue; inline in tests).
///
/// - A command goes out as one FCALL; its reply completes the ticket.
/// - A session created here is `.loading` until its hash is read
///   (`countdown_open`), which also settles its controller key.
/// - Every change is published with the cluster epoch, the channel's
///   position and the session's revision. A newer revision is adopted, a gap
///   or another epoch re-reads the session, and a position this instance
///   never saw re-reads every open session.
/// - On every (re)connect: subscribe, wait for the confirmation, then read
///   every open session and reconcile by revision. Until then commands get
///   `unavailable`, while running countdowns keep ticking from their known
///   deadlines.
public final class RedisSequencer: CommandSequencer {
  public struct Settings: Sendable {
    public var address: RedisAddress
    /// The cluster's epoch, as `prepare` agreed it with Redis.
    public var epoch: String
    /// A command without a reply by then fails as unavailable, and the
    /// connection is made anew.
    public var timeoutMs: Int64 = 2000
    /// How often the channel's position is compared with what arrived.
    public var checkIntervalMs: Int64 = 5000
    /// How often changed viewer counts go to Redis (the sum shown is
    /// patched at most 4 times a second anyway).
    public var viewerIntervalMs: Int64 = 250
    /// An instance whose heartbeat is older than this stops counting.
    public var heartbeatTTLMs: Int64 = 3000

    public init(address: RedisAddress, epoch: String) {
      self.address = address
      self.epoch = epoch
    }
  }

  /// Counters for metrics and tests.
  public struct Stats: Equatable, Sendable {
    public var commandsSent = 0
    public var commandsUnavailable = 0
    public var messages = 0
    /// Sessions read again (a gap, another epoch, a reconnect, a lost message).
    public var rereads = 0
    public var reconnects = 0
  }

  static let epochKey = "countdown:epoch"
  static let positionKey = "countdown:pos"
  /// Every instance's heartbeat: a sorted set scored by when it stops counting.
  static let instancesKey = "countdown:instances"
  static func sessionKey(_ session: String) -> String { "countdown:s:\(session)" }
  static func viewerKey(_ session: String) -> String { "countdown:v:\(session)" }
  /// The sessions an instance counts viewers in, so that its death costs a
  /// recount of those only.
  static func sessionIndexKey(_ instance: String) -> String { "countdown:iv:\(instance)" }
  /// Pub/Sub ignores the database number, so the channel carries it.
  static func channel(_ address: RedisAddress) -> String { "countdown:changes:\(address.database)" }

  static let unreachable = "the cluster cannot order commands right now; try again"

  /// Set once the hub exists (the hub holds the sequencer).
  public weak var hub: Hub?
  /// Another instance has made a new epoch (Redis lost its data and an
  /// instance started anew): this instance's sessions are another history.
  public var onEpochConflict: ((_ clusterEpoch: String) -> Void)?
  public private(set) var stats = Stats()

  public let settings: Settings
  private let channel: String
  private let deliver: (@escaping () -> Void) -> Void
  private let clock: any WallClock
  // A subscribed hiredis connection can send nothing else: two connections,
  // made by `start` on the loop it is given.
  private var commands: RedisConnection!
  private var subscriber: RedisConnection!
  private let log = Logger.shared

  private struct OpenSession {
    var revision: UInt64 = 0
    var loading = true
    var keyHash: KeyHash?
    /// The viewer count this instance last sent.
    var sentViewers: Int?
    /// The version of the last sum shown (see `showViewers`).
    var viewerVersion: Int64 = 0
  }

  private var open: [String: OpenSession] = [:]
  private var subscribed = false
  /// A reply has come back on the commands connection since it (re)connected:
  /// a TCP connection alone proves nothing through a proxy that stopped forwarding.
  private var answering = false
  /// Redis's clock minus ours (ms), measured with TIME at each connect.
  private var redisClockOffsetMs: Int64 = 0
  /// The highest position seen on the channel (or read) since subscribing.
  private var position: Int64 = 0
  /// The position Redis had at the last check.
  private var checkedPosition: Int64?
  private var checkTimer: LoopTimer?
  private var viewerTimer: LoopTimer?
  /// Whether viewers here have been told their state cannot be confirmed.
  private var toldStale = false
  /// Tells them once the link has been down this long, so that a reconnect
  /// within it costs no patch.
  static let staleAfterMs: Int64 = 1000
  private var staleTimer: LoopTimer?
  /// When the probe now on its way through the channel was sent.
  private var probeSentAt: Int64?
  /// When the last heartbeat went out (ms); nil before the first.
  private var heartbeatAt: Int64?
  /// This instance's name in the viewer hashes and the instance set.
  public let instance = Hub.randomEpoch()
  /// The instances whose heartbeat had expired at the last heartbeat.
  private var expiredInstances: Set<String> = []

  public init(
    settings: Settings, clock: any WallClock = SystemClock(),
    deliver: @escaping (@escaping () -> Void) -> Void
  ) {
    self.settings = settings
    self.channel = Self.channel(settings.address)
    self.clock = clock
    self.deliver = deliver
  }

  /// Loads the function library and agrees on the cluster epoch: blocking,
  /// for start-up before the listener opens. `proposed` becomes the epoch
  /// when Redis has none; the answer is the cluster's.
  public static func prepare(
    _ address: RedisAddress, proposedEpoch proposed: String, timeoutMs: Int = 2000
  ) throws(RedisError) -> String {
    let redis = try BlockingRedis(address, timeoutMs: timeoutMs)
    if address.database != 0 { try redis.command(["SELECT", String(address.database)]) }
    try redis.command(["FUNCTION", "LOAD", "REPLACE", FunctionLibrary.source])
    try redis.command(["SET", epochKey, proposed, "NX"])
    guard let epoch = try redis.command(["GET", epochKey]).text else {
      throw RedisError(.protocolViolation, "GET \(epochKey) gave no string")
    }
    return epoch
  }

  /// Connects both connections on `loop`, whose thread must be the hub's
  /// (or `deliver` must take results there); they keep reconnecting until
  /// `stop`.
  public func start(on loop: LibevLoop) {
    commands = RedisConnection(
      name: "commands", address: settings.address, loop: loop, timeoutMs: settings.timeoutMs)
    subscriber = RedisConnection(
      name: "subscriber", address: settings.address, loop: loop, timeoutMs: settings.timeoutMs)
    commands.onUp = { [unowned self] in commandsUp() }
    subscriber.onUp = { [unowned self] in subscriberUp() }
    commands.onDown = { [unowned self] in
      answering = false
      down("commands", $0)
    }
    subscriber.onDown = { [unowned self] in
      subscribed = false
      probeSentAt = nil
      down("subscriber", $0)
    }
    commands.start()
    subscriber.start()
    checkTimer = LoopTimer(loop: loop) { [unowned self] in check() }
    checkTimer?.schedule(afterMs: settings.checkIntervalMs)
    staleTimer = LoopTimer(loop: loop) { [unowned self] in tellStale(!isConnected) }
    viewerTimer = LoopTimer(loop: loop) { [unowned self] in pushViewers() }
    viewerTimer?.schedule(afterMs: settings.viewerIntervalMs)
  }

  /// Closes both connections; call on the loop's thread before it goes.
  public func stop() {
    checkTimer = nil
    viewerTimer = nil
    staleTimer = nil
    subscriber?.stop()
    commands?.stop()
    subscriber = nil
    commands = nil
  }

  /// Both connections are up and the subscription confirmed: commands can be ordered.
  public var isConnected: Bool { commands?.isUp == true && answering && subscribed }

  // MARK: CommandSequencer

  public func sequence(_ request: SequenceRequest) -> SequenceResult {
    guard isConnected else {
      stats.commandsUnavailable += 1
      return .done(.unavailable(Self.unreachable))
    }
    let (op, first, second, label) = Self.arguments(of: request.command)
    let arguments =
      [
        "FCALL", "countdown_command", "3", Self.sessionKey(request.session), Self.epochKey,
        Self.positionKey, settings.epoch, channel, request.session, op, first, second, label,
      ] + RecordMessage.arguments(of: request.current) + [String(redisDeadline())]
    let ticket = request.ticket
    let session = request.session
    let sent = commands.send(arguments) { [weak self] result in
      self?.commandAnswered(ticket, session: session, result)
    }
    guard sent else {
      stats.commandsUnavailable += 1
      return .done(.unavailable(Self.unreachable))
    }
    stats.commandsSent += 1
    return .pending
  }

  public func created(session: String, record: SessionRecord, keyHash: KeyHash?) -> SessionLoad {
    open[session] = OpenSession(keyHash: keyHash)
    if isConnected { read(session) }
    return .loading
  }

  public func forgot(session: String) {
    open[session] = nil
  }

  // MARK: Replies and messages

  private func commandAnswered(
    _ ticket: Ticket, session: String, _ result: Result<RedisReply, RedisError>
  ) {
    let outcome: SequenceOutcome
    switch result {
    case .success(let reply):
      let parts = reply.elements?.compactMap(\.text) ?? []
      switch (parts.first, parts.count) {
      case ("ok", 2):
        guard let message = RecordMessage.parse(parts[1]) else {
          outcome = .unavailable(Self.unreachable)
          break
        }
        outcome = .applied(message.record)
        if open[session] != nil, !open[session]!.loading {
          open[session]!.revision = max(open[session]!.revision, message.record.revision)
        }
      case ("rejected", 2):
        outcome = .rejected(ErrorCode(rawValue: parts[1]) ?? .badRequest)
      case ("expired", 1):
        outcome = .unavailable(Self.unreachable)
      case ("epoch", 2):
        outcome = .unavailable(Self.unreachable)
        epochConflict(parts[1])
      default:
        outcome = .unavailable(Self.unreachable)
      }
    case .failure(let error):
      log.warn("redis_command_failed", ["error": LogValue(error.description)])
      outcome = .unavailable(Self.unreachable)
    }
    if case .unavailable = outcome { stats.commandsUnavailable += 1 }
    let now = clock.nowMilliseconds()
    deliver { [weak self] in self?.hub?.complete(ticket, outcome, now: now) }
  }

  /// Reads a session's hash (`countdown_open`, which in key mode settles
  /// its key) and hands it to the hub: its first state, or a reconciliation.
  private func read(_ session: String) {
    guard let entry = open[session] else { return }
    stats.rereads += 1
    let arguments = [
      "FCALL", "countdown_open", "3", Self.sessionKey(session), Self.epochKey, Self.positionKey,
      settings.epoch, session, entry.keyHash?.hex ?? "",
    ]
    commands.send(arguments) { [weak self] result in self?.readAnswered(session, result) }
  }

  private func readAnswered(_ session: String, _ result: Result<RedisReply, RedisError>) {
    guard case .success(let reply) = result, let parts = reply.elements?.compactMap(\.text),
      parts.count == 2, let message = RecordMessage.parse(parts[0]),
      var entry = open[session]
    else {
      // A failure drops the connection; the reconnect reads every session again.
      return
    }
    let record = message.record
    let storedKey = KeyHash(hex: parts[1])
    let wasLoading = entry.loading
    entry.loading = false
    entry.revision = max(entry.revision, record.revision)
    open[session] = entry
    let now = clock.nowMilliseconds()
    deliver { [weak self] in
      guard let hub = self?.hub else { return }
      if wasLoading {
        hub.loaded(session: session, record: record, keyHash: storedKey, now: now)
      } else {
        hub.adoptRemote(session: session, record: record, now: now)
      }
    }
  }

  private func subscriptionMessage(_ reply: RedisReply) {
    guard let parts = reply.elements?.compactMap(\.text), parts.count == 3 else { return }
    switch parts[0] {
    case "subscribe":
      subscribed = true
      log.info("redis_subscribed", ["channel": LogValue(channel)])
      reconcile()
    case "message":
      stats.messages += 1
      if parts[2] == "probe \(instance)" {
        probeSentAt = nil
        return
      }
      if parts[2].hasPrefix("viewers ") {
        viewersMessage(parts[2])
        return
      }
      guard let message = RecordMessage.parse(parts[2]) else { return }
      changed(message)
    default:
      break
    }
  }

  private func changed(_ message: RecordMessage) {
    let missed = position != 0 && message.position > position + 1
    position = max(position, message.position)
    if missed {
      reconcile()
      return
    }
    guard let entry = open[message.session] else { return }
    guard message.epoch == settings.epoch else {
      read(message.session)
      return
    }
    let revision = message.record.revision
    // Loading: the read in flight may predate this change, so read again after it.
    if entry.loading || revision > entry.revision + 1 {
      read(message.session)
      return
    }
    guard revision > entry.revision else { return }
    open[message.session]!.revision = revision
    let now = clock.nowMilliseconds()
    let record = message.record
    deliver { [weak self] in
      self?.hub?.adoptRemote(session: message.session, record: record, now: now)
    }
  }

  // MARK: Viewer counts

  /// Sends the counts that changed here, and about once a second beats the
  /// heartbeat. Runs on the hub's thread (the loop's), so it reads the hub
  /// directly.
  private func pushViewers() {
    viewerTimer?.schedule(afterMs: settings.viewerIntervalMs)
    guard isConnected, let hub else { return }
    // Each heartbeat renews a third of the TTL or a second, whichever is
    // shorter, so that one late beat does not let the instance lapse.
    let now = clock.nowMilliseconds()
    if now - (heartbeatAt ?? .min / 2) >= min(1000, settings.heartbeatTTLMs / 3) {
      heartbeat(first: heartbeatAt == nil)
      heartbeatAt = now
    }
    for (session, entry) in open where !entry.loading {
      let local = hub.localViewers(of: session) ?? 0
      guard local != entry.sentViewers else { continue }
      sendViewers(session, local)
    }
  }

  /// Sends this instance's count of `session` (0 for one it does not have
  /// open, which only recounts the sum) and shows the sum that comes back.
  private func sendViewers(_ session: String, _ local: Int) {
    open[session]?.sentViewers = local
    let arguments = [
      "FCALL", "countdown_viewers", "3", Self.viewerKey(session), Self.instancesKey,
      Self.sessionIndexKey(instance), instance, String(local), channel, session,
      String(settings.heartbeatTTLMs),
    ]
    commands.send(arguments) { [weak self] result in
      guard case .success(.array(let parts)) = result, parts.count == 2,
        case .integer(let sum) = parts[0], case .integer(let version) = parts[1]
      else { return }
      self?.showViewers(session, sum: Int(sum), version: version)
    }
  }

  /// One call a second, whatever the session count. When this instance's own
  /// heartbeat had lapsed (a stalled link), others may have dropped its counts:
  /// it sends them all again. When another instance's has newly expired, this
  /// one tries to reap it: the first instance to do so recounts the sessions
  /// the dead one counted viewers in, once, and the others do nothing.
  private func heartbeat(first: Bool) {
    let arguments = [
      "FCALL", "countdown_heartbeat", "1", Self.instancesKey, instance,
      String(settings.heartbeatTTLMs),
    ]
    commands.send(arguments) { [weak self] result in
      guard let self, let hub, case .success(.array(let parts)) = result, parts.count == 2,
        case .integer(let lapsed) = parts[0], let list = parts[1].elements
      else { return }
      let expired = Set(list.compactMap(\.text))
      let newly = expired.subtracting(expiredInstances)
      expiredInstances = expired
      if !newly.isEmpty {
        log.warn(
          "cluster_instance_expired", ["instances": LogValue(newly.sorted().joined(separator: ","))]
        )
      }
      if lapsed == 1 && !first {
        log.warn("cluster_heartbeat_lapsed", ["instance": LogValue(instance)])
      }
      for dead in newly { reap(dead) }
      guard lapsed == 1 else { return }
      for (session, entry) in open where !entry.loading {
        sendViewers(session, hub.localViewers(of: session) ?? 0)
      }
    }
  }

  private func reap(_ dead: String) {
    let arguments = [
      "FCALL", "countdown_reap", "2", Self.instancesKey, Self.sessionIndexKey(dead), dead,
    ]
    commands.send(arguments) { [weak self] result in
      guard let self, let hub, case .success(.array(let sessions)) = result else { return }
      for session in sessions.compactMap(\.text) {
        // A session still loading keeps the count last sent, if any.
        let entry = open[session]
        let loaded = entry.map { !$0.loading } ?? false
        let local = loaded ? hub.localViewers(of: session) ?? 0 : entry?.sentViewers ?? 0
        sendViewers(session, local)
      }
    }
  }

  /// `viewers <session> <sum> <instance> <version>`: the sum changed elsewhere.
  private func viewersMessage(_ payload: String) {
    let parts = payload.split(separator: " ")
    guard parts.count == 5, parts[3] != instance, let sum = Int(parts[2]),
      let version = Int64(parts[4])
    else { return }
    let session = String(parts[1])
    guard let entry = open[session], !entry.loading else { return }
    showViewers(session, sum: sum, version: version)
  }

  /// A sum arrives both as a reply and as a message, on two connections: the
  /// version keeps an older one from overwriting a newer.
  private func showViewers(_ session: String, sum: Int, version: Int64) {
    guard let entry = open[session], version > entry.viewerVersion else { return }
    open[session]!.viewerVersion = version
    let others = max(0, sum - (entry.sentViewers ?? 0))
    let now = clock.nowMilliseconds()
    deliver { [weak self] in
      self?.hub?.setRemoteViewers(session: session, count: others, now: now)
    }
  }

  // MARK: Connections

  private func commandsUp() {
    log.info("redis_connected", ["connection": LogValue("commands")])
    // Redis may have restarted without persistence: the library and the
    // epoch come back first, in order on this connection, before any read.
    commands.send(["FUNCTION", "LOAD", "REPLACE", FunctionLibrary.source]) { [weak self] result in
      if case .failure(let error) = result {
        self?.log.error("redis_function_load_failed", ["error": LogValue(error.description)])
      }
    }
    let asked = clock.nowMilliseconds()
    commands.send(["TIME"]) { [weak self] result in
      guard let self, case .success(let reply) = result, let parts = reply.elements,
        parts.count == 2, let seconds = Int64(parts[0].text ?? ""),
        let micros = Int64(parts[1].text ?? "")
      else { return }
      // Redis read its clock about halfway through the round trip.
      let answered = clock.nowMilliseconds()
      redisClockOffsetMs = seconds * 1000 + micros / 1000 - (asked + answered) / 2
    }
    commands.send(["SET", Self.epochKey, settings.epoch, "NX"]) { _ in }
    commands.send(["GET", Self.epochKey]) { [weak self] result in
      guard let self, case .success(let reply) = result else { return }
      if let epoch = reply.text, epoch != settings.epoch {
        epochConflict(epoch)
        return
      }
      answering = true
      reconcile()
    }
  }

  private func subscriberUp() {
    log.info("redis_connected", ["connection": LogValue("subscriber")])
    subscriber.subscribe(channel) { [weak self] result in
      if case .success(let reply) = result { self?.subscriptionMessage(reply) }
    }
  }

  private func down(_ name: String, _ error: RedisError) {
    staleTimer?.schedule(afterMs: Self.staleAfterMs)
    stats.reconnects += 1
    log.warn(
      "redis_disconnected", ["connection": LogValue(name), "error": LogValue(error.description)])
  }

  /// Subscribed and able to send: read the position, then every open
  /// session, and adopt what is newer. Changes after the position read
  /// arrive as messages.
  private func reconcile() {
    guard isConnected else { return }
    staleTimer?.cancel()
    tellStale(false)
    commands.send(["GET", Self.positionKey]) { [weak self] result in
      guard let self, case .success(let reply) = result else { return }
      position = max(position, Int64(reply.text ?? "0") ?? 0)
    }
    for session in open.keys { read(session) }
  }

  /// Pub/Sub drops messages silently (a slow subscriber, a brief partition):
  /// a position Redis had one check ago that never arrived means a lost one.
  private func check() {
    checkTimer?.schedule(afterMs: settings.checkIntervalMs)
    guard isConnected else {
      checkedPosition = nil
      return
    }
    if let checkedPosition, position < checkedPosition { reconcile() }
    // A subscribed connection hears nothing when nothing changes, and
    // hiredis 0.14 loses the answer to a PING sent on one: so this instance
    // publishes a probe to itself, and a probe that has not come back by the
    // next check means the subscription is dead.
    if let probe = probeSentAt, monotonicMs() - probe > settings.timeoutMs {
      probeSentAt = nil
      subscribed = false
      subscriber.reset(RedisError(.timeout, "subscriber: a probe did not come back"))
      return
    }
    if probeSentAt == nil {
      probeSentAt = monotonicMs()
      commands.send(["PUBLISH", channel, "probe \(instance)"]) { _ in }
    }
    commands.send(["GET", Self.positionKey]) { [weak self] result in
      guard case .success(let reply) = result else { return }
      self?.checkedPosition = Int64(reply.text ?? "0") ?? 0
    }
  }

  private func tellStale(_ stale: Bool) {
    guard stale != toldStale else { return }
    toldStale = stale
    log.info("cluster_state", ["stale": LogValue(stale ? "yes" : "no")])
    let now = clock.nowMilliseconds()
    deliver { [weak self] in self?.hub?.setStale(stale, now: now) }
  }

  private func epochConflict(_ clusterEpoch: String) {
    log.error(
      "cluster_epoch_changed",
      ["ours": LogValue(settings.epoch), "cluster": LogValue(clusterEpoch)])
    onEpochConflict?(clusterEpoch)
  }

  /// The Redis time after which a command must not be applied: half the
  /// timeout on, so that the offset's error (within a round trip) cannot
  /// let Redis apply a command after this instance answered unavailable.
  private func redisDeadline() -> Int64 {
    clock.nowMilliseconds() + redisClockOffsetMs + settings.timeoutMs / 2
  }

  /// A command's op and arguments as `countdown_command` takes them.
  static func arguments(of command: SessionCommand) -> (String, String, String, String) {
    switch command {
    case .start(.seconds(let seconds), let label):
      ("start", "seconds", String(seconds), label ?? "")
    case .start(.until(let deadline), let label):
      ("start", "until", String(deadline), label ?? "")
    case .cancel: ("cancel", "", "", "")
    case .pause: ("pause", "", "", "")
    case .resume: ("resume", "", "", "")
    case .adjust(let seconds): ("adjust", String(seconds), "", "")
    case .rotateKey(let hash): ("rotate_key", hash.hex, "", "")
    }
  }
}
