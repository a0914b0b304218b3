import CountdownCore
import Libev
import Observability

/// The command path's "sequence" step for a cluster: Redis orders every
/// command through one function call (`countdown_v3_command`), so instances
/// behind a load balancer share sessions.
///
/// A thin coordinator: it implements the core's ports (`CommandSequencer`,
/// `ViewerCountObserver`), owns the two Redis connections, and composes
/// three parts, each in its own file and testable alone:
/// - `ClusterOrdering`: commands, their replies, lost replies;
/// - `ChangeFeed`: the epoch, the subscription, positions, reads, reconcile;
/// - `ClusterPresence`: viewer counts, heartbeats, renewals, reaping.
/// They share `OpenSessions` (the sessions open here and their revisions:
/// the adapter owns revisions, the hub owns loading and key hashes) and one
/// `BulkWindow`.
///
/// Everything here runs on one thread, the loop's, which is the hub's:
/// hiredis's callbacks, timers, and the hub's calls. Events go to the hub
/// directly (`Hub.apply`), then `onHubChanged` lets the server push what
/// changed.
public final class RedisSequencer: CommandSequencer, ViewerCountObserver {
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

    /// Webhooks are on: every command records its event in the events
    /// stream in the same function call (see `StreamOutbox`).
    public var recordsEvents = false

    /// The idempotency keys a session, a client address and everyone may
    /// hold at once, counted in Redis for the whole cluster.
    public var idempotencyLimits = IdempotencyLimits()

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
  static let library = "countdown_v3"
  static func function(_ name: String) -> String { "\(library)_\(name)" }

  static let epochKey = "countdown:epoch"
  static let positionKey = "countdown:pos"
  /// Every instance's heartbeat: a sorted set scored by when it stops counting.
  static let instancesKey = "countdown:instances"
  static func sessionKey(_ session: String) -> String { "countdown:s:\(session)" }
  static func viewerKey(_ session: String) -> String { "countdown:v:\(session)" }
  /// Every commanded session, a sorted set scored 0 so that ZRANGEBYLEX
  /// pages it in id order: the HTTP API's list, never SCAN or KEYS. One key,
  /// so one hash slot, as the epoch and the position counter are: the
  /// library declares every key it touches, and assumes one Redis (or one
  /// primary), not Redis Cluster's sharding.
  static let sessionsKey = "countdown:sessions"
  /// Webhooks' outbox: the events stream, the deadlines set (a run's
  /// endsAt, a wait's timeoutAt, by session) and the record line of each
  /// deadline, in the order countdown.lua's `events_keys` reads them.
  static let eventsKey = "countdown:events"
  static let deadlinesKey = "countdown:deadlines"
  static let deadlineLinesKey = "countdown:deadline-lines"
  static let eventsKeys = [eventsKey, deadlinesKey, deadlineLinesKey]
  /// A command's `Idempotency-Key` on a session: its first answer, a day.
  /// The session id has no `:`, so the key (last, any printable ASCII) is
  /// unambiguous.
  static func idempotencyKey(_ session: String, _ key: String) -> String {
    "countdown:idem:\(session):\(key)"
  }
  /// The idempotency keys held (`IdempotencyLimits`): by a session, by a
  /// client address budget and by everyone, each a sorted set of the
  /// hashes' names scored by when they were remembered.
  static func heldKeysKey(session: String) -> String { "countdown:idem-held:s:\(session)" }
  static func heldKeysKey(address: String) -> String { "countdown:idem-held:a:\(address)" }
  static let heldKeysKey = "countdown:idem-held"
  /// The sessions an instance counts viewers in, so that its death costs a
  /// recount of those only.
  static func sessionIndexKey(_ instance: String) -> String { "countdown:iv:\(instance)" }
  /// Pub/Sub ignores the database number, so the channel carries it.
  static func channel(_ address: RedisAddress) -> String { "countdown:changes:\(address.database)" }

  static let unreachable = "the cluster cannot order commands right now; try again"
  static let unknowable =
    "the cluster lost the reply to this command and cannot tell whether it applied; "
    + "look at the countdown before you try again"

  /// Where events go: the hub, set once it exists (the hub holds the sequencer).
  public weak var hub: (any ClusterEventSink)?
  /// Called after events reached the hub, so that the server pushes what
  /// changed: they come from hiredis's callbacks, outside lws's.
  public var onHubChanged: (() -> Void)?
  /// A command applied with webhooks on, so its event is in the stream, or
  /// a deadline passed whose finish the next `countdown_v3_due` records:
  /// the deliverer can be woken (on the loop's thread; it must not block).
  public var onEventsRecorded: (() -> Void)?
  /// Another instance has made a new epoch (Redis lost its data and an
  /// instance started anew): this instance's sessions are another history.
  public var onEpochConflict: ((_ clusterEpoch: String) -> Void)?

  public let settings: Settings
  /// This instance's own clock, which `redisClock` is measured against.
  private let clock: any WallClock
  /// Redis's clock: every time handed to the hub is on it (see `RedisClock`).
  public let redisClock: RedisClock
  /// This instance's name in the viewer hashes and the instance set.
  public let instance = Hub.randomEpoch()
  private let log = Logger.shared

  private let sessions = OpenSessions()
  private let bulk = BulkWindow()
  // A subscribed hiredis connection can send nothing else: two connections,
  // made by `start` on the loop it is given, with the parts that use them.
  private(set) var commands: RedisConnection?
  private var subscriber: RedisConnection?
  private var ordering: ClusterOrdering?
  private var feed: ChangeFeed?
  private var presence: ClusterPresence?

  /// `clock` is this instance's wall clock, or a `RedisClock` on it (one
  /// `prepare` measured already).
  public init(settings: Settings, clock: any WallClock = SystemClock()) {
    self.settings = settings
    redisClock = clock as? RedisClock ?? RedisClock(local: clock)
    self.clock = redisClock.local
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

  /// Connects both connections on `loop`, whose thread must be the hub's;
  /// they keep reconnecting until `stop`.
  public func start(on loop: LibevLoop) {
    let commands = RedisConnection(
      name: "commands", address: settings.address, loop: loop, timeoutMs: settings.timeoutMs,
      password: settings.password)
    let subscriber = RedisConnection(
      name: "subscriber", address: settings.address, loop: loop, timeoutMs: settings.timeoutMs,
      password: settings.password)
    let ordering = ClusterOrdering(
      settings: settings, instance: instance, redisClock: redisClock, commands: commands,
      sessions: sessions)
    let feed = ChangeFeed(
      settings: settings, instance: instance, redisClock: redisClock, commands: commands,
      subscriber: subscriber, sessions: sessions, bulk: bulk)
    let presence = ClusterPresence(
      settings: settings, instance: instance, redisClock: redisClock, commands: commands,
      sessions: sessions, bulk: bulk)
    let emit: (ClusterEvent, Int64) -> Void = { [unowned self] event, now in
      guard let hub else { return }
      hub.apply(event, now: now)
      onHubChanged?()
    }
    ordering.emit = emit
    feed.emit = emit
    presence.emit = emit
    ordering.isLive = { [unowned feed] in feed.isLive }
    presence.isLive = { [unowned feed] in feed.isLive }
    feed.keyHash = { [unowned self] in hub?.keyHash(ofSession: $0) }
    ordering.onEpochConflict = { [unowned self] in epochConflict($0) }
    ordering.onEventsRecorded = { [unowned self] in onEventsRecorded?() }
    feed.onEpochConflict = { [unowned self] in epochConflict($0) }
    feed.onAnswering = { [unowned ordering] in ordering.resolveLostReplies() }
    feed.onCheck = { [unowned self] in measureClock(fresh: false) }
    feed.onViewersMessage = { [unowned presence] in presence.viewersMessage($0) }
    bulk.send = { [unowned feed, unowned presence] item, done in
      switch item {
      case .read(let session): feed.sendBulk(session, then: done)
      case .viewers(let session): presence.sendBulk(session, then: done)
      }
    }
    bulk.onDrop = { [unowned presence] in presence.requeue($0) }
    // Unowned throughout: the connections and the parts hold each other's
    // closures, and none may keep the others alive past this coordinator.
    commands.onUp = { [unowned self, unowned feed] in
      log.info("redis_connected", ["connection": LogValue("commands")])
      // First, so that loading the library does not lengthen its round trip.
      measureClock(fresh: true)
      feed.commandsUp()
    }
    subscriber.onUp = { [unowned feed] in feed.subscriberUp() }
    commands.onDown = { [unowned feed] in feed.commandsDown($0) }
    subscriber.onDown = { [unowned feed] in feed.subscriberDown($0) }
    (self.commands, self.subscriber) = (commands, subscriber)
    (self.ordering, self.feed, self.presence) = (ordering, feed, presence)
    for session in sessions.all { presence.opened(session) }
    commands.start()
    subscriber.start()
    feed.start()
    presence.start()
  }

  /// Closes both connections; call on the loop's thread before it goes.
  public func stop() {
    subscriber?.stop()
    commands?.stop()
    // The parts' timers go with them, while the loop is still there.
    stopped = stats
    (ordering, feed, presence) = (nil, nil, nil)
    subscriber = nil
    commands = nil
  }

  /// Both connections are up and the subscription confirmed: commands can be ordered.
  public var isConnected: Bool { feed?.isLive == true }

  /// Counters for metrics and tests, from every part.
  public var stats: Stats {
    guard let ordering, let feed else { return stopped }
    var stats = Stats()
    stats.commandsSent = ordering.commandsSent
    stats.commandsUnavailable = ordering.commandsUnavailable
    stats.lostRepliesApplied = ordering.lostRepliesApplied
    stats.lostRepliesNotApplied = ordering.lostRepliesNotApplied
    stats.lostRepliesUnknown = ordering.lostRepliesUnknown
    stats.messages = feed.messages
    stats.rereads = feed.rereads
    stats.reconnects = feed.reconnects
    stats.peakBulkInFlight = bulk.peakInFlight
    stats.damagedRecords = ordering.damagedRecords + feed.damagedRecords
    return stats
  }
  /// The counters as they were at `stop` (all zero before `start`).
  private var stopped = Stats()

  // MARK: CommandSequencer

  public func sequence(_ request: SequenceRequest) -> SequenceResult {
    // Before `start` or after `stop` nothing can be ordered.
    guard let ordering else { return .done(.unavailable(Self.unreachable)) }
    return ordering.sequence(request)
  }

  /// The hub saw a run elapse or a wait time out. The function library
  /// records that finish, once for the cluster, when the delivery side next
  /// calls `countdown_v3_due` (or a command finds it passed): so this only
  /// wakes the deliverer, which then calls it at the deadline rather than at
  /// its next poll. Every instance that has the session open does; the first
  /// call records the finish, the rest find nothing due.
  public func finishedByItself(
    session: String, record: SessionRecord, at deadline: Int64, config: SessionConfig.Shared
  ) {
    if settings.recordsEvents { onEventsRecorded?() }
  }

  public func created(session: String, record: SessionRecord, keyHash: KeyHash?) -> SessionLoad {
    presence?.opened(session)
    if let feed { feed.opened(session) } else { sessions.open(session) }
    return .loading
  }

  public func forgot(session: String) {
    feed?.forgot(session)
    presence?.forgot(session)
    if feed == nil { sessions.close(session) }
    // Its keys go once no instance has it open; when Redis cannot be
    // reached now, their TTLs see to it.
    guard isConnected, let commands else { return }
    let arguments = [
      "FCALL", Self.function("forget"), "5", Self.sessionKey(session), Self.viewerKey(session),
      Self.instancesKey, Self.sessionIndexKey(instance), Self.sessionsKey, instance, session,
    ]
    commands.send(arguments) { _ in }
  }

  // MARK: ViewerCountObserver

  public func localViewersChanged(session: String, count: Int) {
    presence?.localViewersChanged(session: session, count: count)
  }

  // MARK: Connections

  /// Redis's clock against ours: at each connect, and at each check so that
  /// it follows a clock that drifts.
  private func measureClock(fresh: Bool) {
    let asked = clock.nowMicroseconds()
    commands?.send(["TIME"]) { [weak self] result in
      guard let self, case .success(let reply) = result,
        let micros = RedisClock.micros(ofTime: reply)
      else { return }
      redisClock.measured(
        redisMicros: micros, asked: asked, answered: clock.nowMicroseconds(), fresh: fresh)
    }
  }

  private func epochConflict(_ clusterEpoch: String) {
    log.error(
      "cluster_epoch_changed",
      ["ours": LogValue(settings.epoch), "cluster": LogValue(clusterEpoch)])
    onEpochConflict?(clusterEpoch)
  }
}
