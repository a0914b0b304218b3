import CountdownCore
import Libev
import Observability

/// The command path's "sequence" step for a cluster: Redis orders every
/// command through one function call (`countdown_v2_command`), so instances
/// behind a load balancer share sessions.
///
/// Everything here runs on one thread, the loop's: hiredis's callbacks,
/// timers, and the hub's calls into the sequencer. Results go back to the
/// hub through `deliver`, which runs them on the hub's thread and lets the
/// server push what changed (the server's service queue; inline in tests).
///
/// - A command goes out as one FCALL; its reply completes the ticket.
/// - A session created here is `.loading` until its hash is read
///   (`countdown_v2_open`), which also settles its controller key.
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
    /// A command whose reply was lost and that cannot be looked up this
    /// long after it was sent (Redis still unreachable) is answered
    /// `outcome_unknown`: so no client waits longer than this for an answer.
    public var resolveWithinMs: Int64 = 5000

    /// AUTH's password (with `address.username`, an ACL user), from
    /// `--redis-password-file`; never logged or shown.
    public var password: String?

    public init(address: RedisAddress, epoch: String, password: String? = nil) {
      self.address = address
      self.epoch = epoch
      self.password = password
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
    /// Commands whose reply was lost, resolved by reading the session back:
    /// found applied, found not applied, or not knowable.
    public var lostRepliesApplied = 0
    public var lostRepliesNotApplied = 0
    public var lostRepliesUnknown = 0
    /// The most bulk reads and counts that were in flight at once.
    public var peakBulkInFlight = 0
    /// Records from Redis that were out of range (dropped or reset), each logged.
    public var damagedRecords = 0
  }

  /// The function library's name, with its version: a release that changes
  /// what a function takes or answers gets a new one, so old and new
  /// instances each call their own through a rolling upgrade.
  static let library = "countdown_v2"
  static func function(_ name: String) -> String { "\(library)_\(name)" }
  /// A full round of renewals (see `renew`) takes about this long, well
  /// inside the few minutes the function keeps viewer hashes (VIEW_MS in
  /// countdown.lua); at least this many sessions go in each call.
  static let renewRoundMs: Int64 = 60_000
  static let renewBatch = 1000

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
  static let unknowable =
    "the cluster lost the reply to this command and cannot tell whether it applied; "
    + "look at the countdown before you try again"

  /// Reads and recounts for many sessions at once (a reconcile, a recount
  /// after a lapse) go out this many at a time, the next as replies come
  /// back: one loop iteration then costs a window, not the session count,
  /// and a command queues behind a window at most.
  static let bulkWindow = 256

  /// Set once the hub exists (the hub holds the sequencer).
  public weak var hub: Hub?
  /// Another instance has made a new epoch (Redis lost its data and an
  /// instance started anew): this instance's sessions are another history.
  public var onEpochConflict: ((_ clusterEpoch: String) -> Void)?
  public private(set) var stats = Stats()

  public let settings: Settings
  private let channel: String
  private let deliver: (@escaping () -> Void) -> Void
  /// This instance's own clock, which `redisClock` is measured against.
  private let clock: any WallClock
  /// Redis's clock: every time handed to the hub is on it (see `RedisClock`).
  public let redisClock: RedisClock
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
  /// Sessions whose viewer hash the next renewals renew (see `renew`).
  private var renewQueue: [String] = []

  private enum BulkItem {
    case read(String)
    /// This instance's count of a session, as `viewersToSend` says it.
    case viewers(String)
  }
  /// Waiting bulk work, from `bulkHead` on, and how much of it is sent.
  private var bulk: [BulkItem] = []
  private var bulkHead = 0
  private var bulkInFlight = 0
  /// Sessions with a bulk read or count waiting, so none is queued twice.
  private var bulkReads: Set<String> = []
  private var bulkViewers: Set<String> = []

  /// Each command carries a nonce that the function keeps with the session,
  /// so that a command whose reply was lost can be looked up.
  private var nextNonce: UInt64 = 0
  private struct LostReply {
    var ticket: Ticket
    var session: String
    var nonce: String
    /// The revision the instance had when it sent the command.
    var base: UInt64
    /// The command's deadline on Redis's clock.
    var deadline: Int64
    /// When it was sent (monotonic ms).
    var sentAt: Int64
    /// Past this (monotonic ms) it is answered `outcome_unknown`.
    var giveUpAt: Int64 { sentAt + resolveWithinMs }
    var resolveWithinMs: Int64
  }
  /// Commands whose reply was lost, by nonce, until resolved.
  private var lostReplies: [String: LostReply] = [:]
  private var lostReplyTimer: LoopTimer?

  /// `clock` is this instance's wall clock, or a `RedisClock` on it (one
  /// `prepare` measured already).
  public init(
    settings: Settings, clock: any WallClock = SystemClock(),
    deliver: @escaping (@escaping () -> Void) -> Void
  ) {
    self.settings = settings
    self.channel = Self.channel(settings.address)
    redisClock = clock as? RedisClock ?? RedisClock(local: clock)
    self.clock = redisClock.local
    self.deliver = deliver
  }

  /// Loads the function library and agrees on the cluster epoch: blocking,
  /// for start-up before the listener opens. `proposed` becomes the epoch
  /// when Redis has none; the answer is the cluster's. `clock`, if given,
  /// gets its first offset, so the first sessions are on Redis's time.
  public static func prepare(
    _ address: RedisAddress, password: String? = nil, proposedEpoch proposed: String,
    timeoutMs: Int = 2000, clock: RedisClock? = nil
  ) throws(RedisError) -> String {
    let redis = try BlockingRedis(address, timeoutMs: timeoutMs)
    if let password { try redis.authenticate(username: address.username, password: password) }
    // A small command first: a Redis that wants a password answers NOAUTH
    // to it, where it would cut the library's upload short with a protocol error.
    try redis.command(["PING"])
    if address.database != 0 { try redis.command(["SELECT", String(address.database)]) }
    if let clock {
      let asked = clock.local.nowMicroseconds()
      if let micros = RedisClock.micros(ofTime: try redis.command(["TIME"])) {
        clock.measured(
          redisMicros: micros, asked: asked, answered: clock.local.nowMicroseconds(), fresh: true)
      }
    }
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
      name: "commands", address: settings.address, loop: loop, timeoutMs: settings.timeoutMs,
      password: settings.password)
    subscriber = RedisConnection(
      name: "subscriber", address: settings.address, loop: loop, timeoutMs: settings.timeoutMs,
      password: settings.password)
    commands.onUp = { [unowned self] in commandsUp() }
    subscriber.onUp = { [unowned self] in subscriberUp() }
    commands.onDown = { [unowned self] in
      answering = false
      dropBulk()
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
    lostReplyTimer = LoopTimer(loop: loop) { [unowned self] in giveUpLostReplies() }
    viewerTimer = LoopTimer(loop: loop) { [unowned self] in pushViewers() }
    viewerTimer?.schedule(afterMs: settings.viewerIntervalMs)
  }

  /// Closes both connections; call on the loop's thread before it goes.
  public func stop() {
    checkTimer = nil
    viewerTimer = nil
    staleTimer = nil
    lostReplyTimer = nil
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
    let deadline = redisDeadline()
    nextNonce += 1
    let lost = LostReply(
      ticket: request.ticket, session: request.session, nonce: "\(instance)-\(nextNonce)",
      base: request.current.revision, deadline: deadline, sentAt: monotonicMs(),
      resolveWithinMs: settings.resolveWithinMs)
    let arguments = CommandCall.argv(
      request, epoch: settings.epoch, channel: channel, deadline: deadline, nonce: lost.nonce)
    var rotated: KeyHash?
    if case .rotateKey(let hash) = request.command { rotated = hash }
    let sent = commands.send(arguments) { [weak self] result in
      self?.commandAnswered(lost, rotated: rotated, result)
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
    // Its keys go once no instance has it open; when Redis cannot be
    // reached now, their TTLs see to it.
    guard isConnected else { return }
    let arguments = [
      "FCALL", Self.function("forget"), "4", Self.sessionKey(session), Self.viewerKey(session),
      Self.instancesKey, Self.sessionIndexKey(instance), instance, session,
    ]
    commands.send(arguments) { _ in }
  }

  // MARK: Replies and messages

  private func commandAnswered(
    _ sent: LostReply, rotated: KeyHash?, _ result: Result<RedisReply, RedisError>
  ) {
    let ticket = sent.ticket
    let session = sent.session
    let outcome: SequenceOutcome
    switch result {
    case .success(let reply):
      let parts = reply.elements?.compactMap(\.text) ?? []
      switch (parts.first, parts.count) {
      case ("ok", 2), ("ok", 3):
        if parts.count == 3 { recordReset(session, parts[2]) }
        guard let message = RecordMessage.parse(parts[1]),
          let record = accepted(message, from: "reply")
        else {
          outcome = .unavailable(Self.unreachable)
          break
        }
        outcome = .applied(record)
        if open[session] != nil, !open[session]!.loading {
          open[session]!.revision = max(open[session]!.revision, record.revision)
        }
        if let rotated { open[session]?.keyHash = rotated }
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
    case .failure(let error) where error.kind == .disconnected || error.kind == .timeout:
      // Sent, and the connection went before the reply: it may have applied.
      log.warn(
        "redis_reply_lost",
        ["session": LogValue(session), "error": LogValue(error.description)])
      replyLost(sent)
      return
    case .failure(let error):
      log.warn("redis_command_failed", ["error": LogValue(error.description)])
      outcome = .unavailable(Self.unreachable)
    }
    if case .unavailable = outcome { stats.commandsUnavailable += 1 }
    let now = redisClock.nowMilliseconds()
    deliver { [weak self] in self?.hub?.complete(ticket, outcome, now: now) }
  }

  /// Reads a session's hash (`countdown_v2_open`, which in key mode settles
  /// its key) and hands it to the hub: its first state, or a reconciliation.
  @discardableResult
  private func read(_ session: String, then done: RedisConnection.Handler? = nil) -> Bool {
    guard let entry = open[session] else { return true }
    stats.rereads += 1
    let arguments = [
      "FCALL", Self.function("open"), "3", Self.sessionKey(session), Self.epochKey,
      Self.positionKey, settings.epoch, session, entry.keyHash?.hex ?? "", channel,
    ]
    return commands.send(arguments) { [weak self] result in
      self?.readAnswered(session, result)
      done?(result)
    }
  }

  private func readAnswered(_ session: String, _ result: Result<RedisReply, RedisError>) {
    guard case .success(let reply) = result, let parts = reply.elements?.compactMap(\.text),
      parts.count == 2 || parts.count == 3, var entry = open[session]
    else {
      // A failure drops the connection; the reconnect reads every session again.
      return
    }
    if parts.count == 3 { recordReset(session, parts[2]) }
    guard let message = RecordMessage.parse(parts[0]), let record = accepted(message, from: "read")
    else {
      // Nothing sound to show: a session still loading shows its fresh
      // record, and its first command writes a sound one.
      guard entry.loading else { return }
      entry.loading = false
      open[session] = entry
      let now = clock.nowMilliseconds()
      deliver { [weak self] in
        self?.hub?.loaded(
          session: session, record: nil, keyHash: KeyHash(hex: parts[1]) ?? entry.keyHash, now: now)
      }
      return
    }
    let storedKey = KeyHash(hex: parts[1])
    let wasLoading = entry.loading
    // A rotation whose message this instance missed (a reconnect, a gap).
    let keyMoved = !wasLoading && storedKey != nil && storedKey != entry.keyHash
    if storedKey != nil { entry.keyHash = storedKey }
    entry.loading = false
    entry.revision = max(entry.revision, record.revision)
    open[session] = entry
    let now = redisClock.nowMilliseconds()
    deliver { [weak self] in
      guard let hub = self?.hub else { return }
      if wasLoading {
        hub.loaded(session: session, record: record, keyHash: storedKey, now: now)
      } else {
        if keyMoved, let storedKey {
          hub.keyChanged(session: session, keyHash: storedKey, now: now)
        }
        hub.adoptRemote(session: session, record: record, now: now)
      }
    }
  }

  /// Whether a record that came from Redis can be taken: its fields in
  /// range (`SessionRecord.damage`) before any arithmetic on them. One that
  /// cannot is logged with its session and dropped; the rest carry on.
  private func accepted(_ message: RecordMessage, from source: String) -> SessionRecord? {
    let damage: String
    switch message.record {
    case .success(let record): return record
    case .failure(let error): damage = error.reason
    }
    stats.damagedRecords += 1
    log.warn(
      "redis_record_damaged",
      [
        "session": LogValue(message.session), "source": LogValue(source),
        "damage": LogValue(damage),
      ])
    return nil
  }

  /// A message on the changes channel that is no record at all.
  private func unreadable(_ line: String) {
    stats.damagedRecords += 1
    let fields = line.split(separator: " ", maxSplits: 3)
    log.warn(
      "redis_record_damaged",
      [
        "session": LogValue(fields.count > 2 ? String(fields[2].prefix(64)) : ""),
        "source": LogValue("message"), "damage": LogValue("not a record line"),
      ])
  }

  /// The function found the session's hash damaged and replaced it.
  private func recordReset(_ session: String, _ damage: String) {
    stats.damagedRecords += 1
    log.warn("redis_record_reset", ["session": LogValue(session), "damage": LogValue(damage)])
  }

  /// `key <session> <revision> <hash>`: a controller rotated the session's
  /// key (here or elsewhere), so the old key stops working here too.
  private func keyMessage(_ payload: String) {
    let parts = payload.split(separator: " ", omittingEmptySubsequences: false)
    guard parts.count == 4, UInt64(parts[2]) != nil, let hash = KeyHash(hex: String(parts[3]))
    else { return }
    let session = String(parts[1])
    guard let entry = open[session], !entry.loading, entry.keyHash != hash else { return }
    open[session]!.keyHash = hash
    let now = clock.nowMilliseconds()
    deliver { [weak self] in
      self?.hub?.keyChanged(session: session, keyHash: hash, now: now)
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
      if parts[2].hasPrefix("probe ") {
        // Every instance's probe comes through; only its own is awaited.
        if parts[2] == "probe \(instance)" { probeSentAt = nil }
        return
      }
      if parts[2].hasPrefix("viewers ") {
        viewersMessage(parts[2])
        return
      }
      if parts[2].hasPrefix("key ") {
        keyMessage(parts[2])
        return
      }
      guard let message = RecordMessage.parse(parts[2]) else {
        unreadable(parts[2])
        return
      }
      guard let record = accepted(message, from: "message") else { return }
      changed(message, record)
    default:
      break
    }
  }

  private func changed(_ message: RecordMessage, _ record: SessionRecord) {
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
    let revision = record.revision
    // Loading: the read in flight may predate this change, so read again after it.
    if entry.loading || revision > entry.revision + 1 {
      read(message.session)
      return
    }
    guard revision > entry.revision else { return }
    open[message.session]!.revision = revision
    let now = redisClock.nowMilliseconds()
    deliver { [weak self] in
      self?.hub?.adoptRemote(session: message.session, record: record, now: now)
    }
  }

  // MARK: Lost replies

  /// Every lost reply is resolved on the next connection, before the
  /// reconcile; one whose connection does not come back in time (by
  /// `resolveWithinMs` after the send) is answered `outcome_unknown`.
  /// Meanwhile its session's later commands wait.
  private func replyLost(_ lost: LostReply) {
    let first = lostReplies.isEmpty
    lostReplies[lost.nonce] = lost
    if first { lostReplyTimer?.schedule(afterMs: lost.giveUpAt - monotonicMs()) }
    if isConnected { resolve(lost) }
  }

  private func resolveLostReplies() {
    for lost in lostReplies.values { resolve(lost) }
  }

  private func resolve(_ lost: LostReply) {
    let arguments = [
      "FCALL", Self.function("resolve"), "3", Self.sessionKey(lost.session), Self.epochKey,
      Self.positionKey, settings.epoch, lost.session, lost.nonce, String(lost.base),
      String(lost.deadline),
    ]
    commands.send(arguments) { [weak self] result in
      guard let self, lostReplies[lost.nonce] != nil else { return }
      let parts: [String]
      switch result {
      case .success(let reply): parts = reply.elements?.compactMap(\.text) ?? []
      // The connection went again: the next one asks again.
      case .failure(let error) where error.kind == .disconnected || error.kind == .timeout: return
      case .failure: parts = []
      }
      let outcome: SequenceOutcome
      let record = parts.count == 2 ? try? RecordMessage.parse(parts[1])?.record.get() : nil
      switch (parts.first, parts.count, record) {
      case ("applied", 2, let record?):
        stats.lostRepliesApplied += 1
        outcome = .applied(record)
        if let entry = open[lost.session], !entry.loading {
          open[lost.session]!.revision = max(entry.revision, record.revision)
        }
      case ("absent", 1, _):
        stats.lostRepliesNotApplied += 1
        stats.commandsUnavailable += 1
        outcome = .unavailable(Self.unreachable)
      default:
        stats.lostRepliesUnknown += 1
        outcome = .rejected(.outcomeUnknown)
      }
      finishLost(lost, outcome)
    }
  }

  private func finishLost(_ lost: LostReply, _ outcome: SequenceOutcome) {
    lostReplies[lost.nonce] = nil
    log.info(
      "redis_reply_resolved",
      [
        "session": LogValue(lost.session),
        "outcome": LogValue(
          {
            switch outcome {
            case .applied: "applied"
            case .unavailable: "not_applied"
            case .rejected: "unknown"
            }
          }()),
      ])
    let now = redisClock.nowMilliseconds()
    deliver { [weak self] in self?.hub?.complete(lost.ticket, outcome, now: now) }
  }

  private func giveUpLostReplies() {
    let now = monotonicMs()
    for lost in lostReplies.values where lost.giveUpAt <= now {
      stats.lostRepliesUnknown += 1
      finishLost(lost, .rejected(.outcomeUnknown))
    }
    if let next = lostReplies.values.map(\.giveUpAt).min() {
      lostReplyTimer?.schedule(afterMs: next - now)
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
      renew()
      heartbeatAt = now
    }
    for (session, entry) in open where !entry.loading {
      guard hub.localViewers(of: session) ?? 0 != entry.sentViewers else { continue }
      queueViewers(session)
    }
    pumpBulk()
  }

  /// Counts go through the bulk window too: thousands of viewers joining
  /// at once must not queue a command behind thousands of counts.
  private func queueViewers(_ session: String) {
    if bulkViewers.insert(session).inserted { bulk.append(.viewers(session)) }
  }

  /// The count to send for `session` when its turn comes: the hub's, or for
  /// one still loading (or not open here) the count last sent, if any.
  private func viewersToSend(_ session: String) -> Int {
    let entry = open[session]
    guard let entry, !entry.loading else { return entry?.sentViewers ?? 0 }
    return hub?.localViewers(of: session) ?? 0
  }

  /// Sends this instance's count of `session` (0 for one it does not have
  /// open, which only recounts the sum) and shows the sum that comes back.
  @discardableResult
  private func sendViewers(
    _ session: String, _ local: Int, then done: RedisConnection.Handler? = nil
  ) -> Bool {
    open[session]?.sentViewers = local
    let arguments = [
      "FCALL", Self.function("viewers"), "3", Self.viewerKey(session), Self.instancesKey,
      Self.sessionIndexKey(instance), instance, String(local), channel, session,
      String(settings.heartbeatTTLMs), open[session] == nil ? "0" : "1",
    ]
    return commands.send(arguments) { [weak self] result in
      defer { done?(result) }
      guard case .success(.array(let parts)) = result, parts.count == 2,
        case .integer(let sum) = parts[0], case .integer(let version) = parts[1]
      else { return }
      self?.showViewers(session, sum: Int(sum), version: version)
    }
  }

  /// Keeps the viewer hashes of the sessions open here (and this instance's
  /// index) from expiring: each heartbeat renews the next slice of them, so
  /// a round takes about `renewRoundMs` whatever the session count, and
  /// Redis still gets a bounded call a second, not one per session.
  private func renew() {
    if renewQueue.isEmpty { renewQueue = open.filter { !$0.value.loading }.map(\.key) }
    let batch = max(Self.renewBatch, open.count / Int(Self.renewRoundMs / 1000))
    let slice = renewQueue.suffix(batch)
    renewQueue.removeLast(slice.count)
    let keys = [Self.sessionIndexKey(instance)] + slice.map(Self.viewerKey)
    commands.send(["FCALL", Self.function("renew"), String(keys.count)] + keys) { _ in }
  }

  /// One call a second, whatever the session count. When this instance's own
  /// heartbeat had lapsed (a stalled link), others may have dropped its counts:
  /// it sends them all again. When another instance's has newly expired, this
  /// one tries to reap it: the first instance to do so recounts the sessions
  /// the dead one counted viewers in, once, and the others do nothing.
  private func heartbeat(first: Bool) {
    let arguments = [
      "FCALL", Self.function("heartbeat"), "1", Self.instancesKey, instance,
      String(settings.heartbeatTTLMs),
    ]
    commands.send(arguments) { [weak self] result in
      guard let self, case .success(.array(let parts)) = result, parts.count == 2,
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
      for (session, entry) in open where !entry.loading { queueViewers(session) }
      pumpBulk()
    }
  }

  private func reap(_ dead: String) {
    let arguments = [
      "FCALL", Self.function("reap"), "2", Self.instancesKey, Self.sessionIndexKey(dead), dead,
    ]
    commands.send(arguments) { [weak self] result in
      guard let self, case .success(.array(let sessions)) = result else { return }
      for session in sessions.compactMap(\.text) { queueViewers(session) }
      pumpBulk()
    }
  }

  /// The viewer sums taken from Redis: what a session's 32-bit count can show.
  static let viewerSumRange = 0...Int(Int32.max)

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
    // A sum from Redis is input: out of a count's range it would overflow
    // the subtraction below, or the hub's sum with this instance's viewers.
    guard Self.viewerSumRange.contains(sum), let entry = open[session],
      version > entry.viewerVersion
    else { return }
    open[session]!.viewerVersion = version
    let others = max(0, sum - (entry.sentViewers ?? 0))
    let now = redisClock.nowMilliseconds()
    deliver { [weak self] in
      self?.hub?.setRemoteViewers(session: session, count: others, now: now)
    }
  }

  // MARK: Connections

  private func commandsUp() {
    log.info("redis_connected", ["connection": LogValue("commands")])
    // First, so that loading the library does not lengthen its round trip.
    measureClock(fresh: true)
    // Redis may have restarted without persistence: the library and the
    // epoch come back first, in order on this connection, before any read.
    commands.send(["FUNCTION", "LOAD", "REPLACE", FunctionLibrary.source]) { [weak self] result in
      if case .failure(let error) = result {
        self?.log.error("redis_function_load_failed", ["error": LogValue(error.description)])
      }
    }
    commands.send(["SET", Self.epochKey, settings.epoch, "NX"]) { _ in }
    commands.send(["GET", Self.epochKey]) { [weak self] result in
      guard let self else { return }
      guard case .success(let reply) = result else {
        // An error reply (a Redis still loading its data says LOADING) would
        // leave this connection up and never answering: try it anew.
        if case .failure(let error) = result, error.kind == .reply {
          commands.reset(error)
        }
        return
      }
      if let epoch = reply.text, epoch != settings.epoch {
        epochConflict(epoch)
        return
      }
      answering = true
      resolveLostReplies()
      reconcile()
    }
  }

  /// Redis's clock against ours: at each connect, and at each check so that
  /// it follows a clock that drifts.
  private func measureClock(fresh: Bool) {
    let asked = clock.nowMicroseconds()
    commands.send(["TIME"]) { [weak self] result in
      guard let self, case .success(let reply) = result,
        let micros = RedisClock.micros(ofTime: reply)
      else { return }
      redisClock.measured(
        redisMicros: micros, asked: asked, answered: clock.nowMicroseconds(), fresh: fresh)
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
      position = max(position, RecordMessage.position(reply.text ?? "0") ?? 0)
    }
    for session in open.keys where bulkReads.insert(session).inserted {
      bulk.append(.read(session))
    }
    pumpBulk()
  }

  /// Sends waiting bulk work while fewer than `bulkWindow` are in flight.
  private func pumpBulk() {
    while bulkInFlight < Self.bulkWindow, bulkHead < bulk.count {
      let item = bulk[bulkHead]
      bulkHead += 1
      let done: RedisConnection.Handler = { [weak self] _ in
        guard let self else { return }
        bulkInFlight -= 1
        pumpBulk()
      }
      let sent: Bool
      switch item {
      case .read(let session):
        bulkReads.remove(session)
        guard open[session] != nil else { continue }
        sent = read(session, then: done)
      case .viewers(let session):
        bulkViewers.remove(session)
        sent = sendViewers(session, viewersToSend(session), then: done)
      }
      guard sent else {
        // The connection is down: what it comes back to sends it all again.
        dropBulk()
        return
      }
      bulkInFlight += 1
      stats.peakBulkInFlight = max(stats.peakBulkInFlight, bulkInFlight)
    }
    if bulkHead == bulk.count {
      bulk.removeAll(keepingCapacity: true)
      bulkHead = 0
    }
  }

  private func dropBulk() {
    bulk.removeAll()
    bulkHead = 0
    bulkReads.removeAll()
    bulkViewers.removeAll()
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
    measureClock(fresh: false)
    if probeSentAt == nil {
      probeSentAt = monotonicMs()
      commands.send(["PUBLISH", channel, "probe \(instance)"]) { _ in }
    }
    commands.send(["GET", Self.positionKey]) { [weak self] result in
      guard case .success(let reply) = result else { return }
      self?.checkedPosition = RecordMessage.position(reply.text ?? "0") ?? 0
    }
  }

  private func tellStale(_ stale: Bool) {
    guard stale != toldStale else { return }
    toldStale = stale
    log.info("cluster_state", ["stale": LogValue(stale ? "yes" : "no")])
    let now = redisClock.nowMilliseconds()
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
    redisClock.nowMilliseconds() + settings.timeoutMs / 2
  }
}
