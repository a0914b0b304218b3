import CountdownCore
import Libev
import Observability

/// The change feed: how this instance keeps the sessions open here in step
/// with Redis.
///
/// - A session created here is read (`countdown_v3_open`, which also
///   settles its controller key); until then the hub has it `.loading`.
/// - Every change is published with the cluster epoch, the channel's
///   position and the session's revision. A newer revision is adopted, a gap
///   or another epoch re-reads the session, and a position this instance
///   never saw re-reads every open session.
/// - On every (re)connect: the library and the epoch first (another epoch is
///   a conflict), then subscribe, wait for the confirmation, then read every
///   open session and reconcile by revision. Until then it is not live:
///   commands get `unavailable`, while running countdowns keep ticking.
///
/// Runs on the loop's thread; its events go to `emit`.
final class ChangeFeed: ClusterPart {
  /// Where loads, adoptions, key changes and staleness go (the hub).
  var emit: (ClusterEvent, Int64) -> Void = { _, _ in }
  /// The hub's key hash of a session, which a read settles in Redis.
  var keyHash: (String) -> KeyHash? = { _ in nil }
  /// Redis has another epoch than this instance's.
  var onEpochConflict: (String) -> Void = { _ in }
  /// The commands connection answers again, before any read goes out.
  var onAnswering: () -> Void = {}
  /// Each check, before its probe: the coordinator measures the clock.
  var onCheck: () -> Void = {}
  /// `viewers …` lines on the channel, which are presence's.
  var onViewersMessage: (String) -> Void = { _ in }

  private(set) var messages = 0
  /// Sessions read again (a gap, another epoch, a reconnect, a lost message).
  private(set) var rereads = 0
  private(set) var reconnects = 0
  private(set) var damagedRecords = 0

  private let subscriber: RedisConnection
  private let bulk: BulkWindow

  private var subscribed = false
  /// A reply has come back on the commands connection since it (re)connected:
  /// a TCP connection alone proves nothing through a proxy that stopped forwarding.
  private var answering = false
  /// The highest position seen on the channel (or read) since subscribing.
  private(set) var position: Int64 = 0
  /// The position Redis had at the last check.
  private var checkedPosition: Int64?
  /// When the probe now on its way through the channel was sent.
  private var probeSentAt: Int64?
  /// Whether viewers here have been told their state cannot be confirmed.
  private var toldStale = false
  /// Tells them once the link has been down this long, so that a reconnect
  /// within it costs no patch.
  static let staleAfterMs: Int64 = 1000
  private lazy var staleTimer = LoopTimer(loop: commands.loop) { [unowned self] in
    tellStale(!isLive)
  }
  private lazy var checkTimer = LoopTimer(loop: commands.loop) { [unowned self] in check() }

  init(
    settings: RedisSequencer.Settings, instance: String, redisClock: RedisClock,
    commands: RedisConnection, subscriber: RedisConnection, sessions: OpenSessions,
    bulk: BulkWindow
  ) {
    self.subscriber = subscriber
    self.bulk = bulk
    super.init(
      settings: settings, instance: instance, redisClock: redisClock, commands: commands,
      sessions: sessions)
  }

  /// Both connections are up, the epoch agreed and the subscription
  /// confirmed: commands can be ordered.
  var isLive: Bool { commands.isUp && answering && subscribed }

  /// Starts the position checks; the connections' events come through
  /// `commandsUp`, `subscriberUp` and the two `…Down`.
  func start() { checkTimer.schedule(afterMs: settings.checkIntervalMs) }

  // MARK: Sessions

  func opened(_ session: String) {
    sessions.open(session)
    if isLive { read(session) }
  }

  func forgot(_ session: String) { sessions.close(session) }

  /// Sends a bulk item of the feed's (a read) when its turn comes.
  func sendBulk(_ session: String, then done: @escaping RedisConnection.Handler) -> Bool? {
    guard sessions.isOpen(session) else { return nil }
    return read(session, then: done)
  }

  /// Reads a session's hash (`countdown_v3_open`, which in key mode settles
  /// its key) and hands it to the hub: its first state, or a reconciliation.
  @discardableResult
  func read(_ session: String, then done: RedisConnection.Handler? = nil) -> Bool {
    guard sessions.isOpen(session) else { return true }
    rereads += 1
    let arguments = [
      "FCALL", RedisSequencer.function("open"), "3", RedisSequencer.sessionKey(session),
      RedisSequencer.epochKey, RedisSequencer.positionKey, settings.epoch, session,
      keyHash(session)?.hex ?? "", channel,
    ]
    return commands.send(arguments) { [weak self] result in
      self?.readAnswered(session, result)
      done?(result)
    }
  }

  private func readAnswered(_ session: String, _ result: Result<RedisReply, RedisError>) {
    guard case .success(let reply) = result, let parts = reply.elements?.compactMap(\.text),
      parts.count == 2 || parts.count == 3, sessions.isOpen(session)
    else {
      // A failure drops the connection; the reconnect reads every session again.
      return
    }
    if parts.count == 3 {
      damagedRecords += 1
      RecordDamage.reset(session, parts[2])
    }
    guard let message = RecordMessage.parse(parts[0]), let record = accepted(message, from: "read")
    else {
      // Nothing sound to show: a session still loading shows its fresh
      // record, and its first command writes a sound one.
      guard sessions.readAnswered(session, revision: nil).first else { return }
      emit(
        .loaded(session: session, record: nil, keyHash: KeyHash(hex: parts[1]) ?? keyHash(session)),
        clock.nowMilliseconds())
      return
    }
    let storedKey = KeyHash(hex: parts[1])
    let known = keyHash(session)
    let read = sessions.readAnswered(session, revision: record.revision)
    let now = redisClock.nowMilliseconds()
    if read.first {
      emit(.loaded(session: session, record: record, keyHash: storedKey), now)
      return
    }
    // A rotation whose message this instance missed (a reconnect, a gap).
    if let storedKey, storedKey != known {
      emit(.keyChanged(session: session, keyHash: storedKey), now)
    }
    if read.newer { emit(.adopted(session: session, record: record), now) }
  }

  private func accepted(_ message: RecordMessage, from source: String) -> SessionRecord? {
    guard let record = RecordDamage.accepted(message, from: source) else {
      damagedRecords += 1
      return nil
    }
    return record
  }

  // MARK: Connections

  /// Redis may have restarted without persistence: the library and the
  /// epoch come back first, in order on this connection, before any read.
  func commandsUp() {
    commands.send(["FUNCTION", "LOAD", "REPLACE", FunctionLibrary.source]) { [weak self] result in
      if case .failure(let error) = result {
        self?.log.error("redis_function_load_failed", ["error": LogValue(error.description)])
      }
    }
    commands.send(["SET", RedisSequencer.epochKey, settings.epoch, "NX"]) { _ in }
    commands.send(["GET", RedisSequencer.epochKey]) { [weak self] result in
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
        onEpochConflict(epoch)
        return
      }
      answering = true
      onAnswering()
      reconcile()
    }
  }

  func subscriberUp() {
    log.info("redis_connected", ["connection": LogValue("subscriber")])
    subscriber.subscribe(channel) { [weak self] result in
      if case .success(let reply) = result { self?.subscriptionMessage(reply) }
    }
  }

  func commandsDown(_ error: RedisError) {
    answering = false
    bulk.drop()
    // The probe went out on this connection: if it was lost with it, that
    // says nothing of the subscriber, which must not be reset for it.
    probeSentAt = nil
    down("commands", error)
  }

  func subscriberDown(_ error: RedisError) {
    subscribed = false
    probeSentAt = nil
    down("subscriber", error)
  }

  private func down(_ name: String, _ error: RedisError) {
    staleTimer.schedule(afterMs: Self.staleAfterMs)
    reconnects += 1
    log.warn(
      "redis_disconnected", ["connection": LogValue(name), "error": LogValue(error.description)])
  }

  /// Live again: read the position, then every open session, and adopt what
  /// is newer. Changes after the position read arrive as messages.
  private func reconcile() {
    guard isLive else { return }
    staleTimer.cancel()
    tellStale(false)
    commands.send(["GET", RedisSequencer.positionKey]) { [weak self] result in
      guard let self, case .success(let reply) = result else { return }
      position = max(position, RecordMessage.position(reply.text ?? "0") ?? 0)
    }
    for session in sessions.all { bulk.add(.read(session)) }
    bulk.pump()
  }

  /// Pub/Sub drops messages silently (a slow subscriber, a brief partition):
  /// a position Redis had one check ago that never arrived means a lost one.
  func check() {
    checkTimer.schedule(afterMs: settings.checkIntervalMs)
    guard isLive else {
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
    onCheck()
    if probeSentAt == nil {
      probeSentAt = monotonicMs()
      commands.send(["PUBLISH", channel, "probe \(instance)"]) { _ in }
    }
    commands.send(["GET", RedisSequencer.positionKey]) { [weak self] result in
      guard case .success(let reply) = result else { return }
      self?.checkedPosition = RecordMessage.position(reply.text ?? "0") ?? 0
    }
  }

  private func tellStale(_ stale: Bool) {
    guard stale != toldStale else { return }
    toldStale = stale
    log.info("cluster_state", ["stale": LogValue(stale ? "yes" : "no")])
    emit(.stale(stale), redisClock.nowMilliseconds())
  }

  // MARK: Messages

  private func subscriptionMessage(_ reply: RedisReply) {
    guard let parts = reply.elements?.compactMap(\.text), parts.count == 3 else { return }
    switch parts[0] {
    case "subscribe":
      subscribed = true
      log.info("redis_subscribed", ["channel": LogValue(channel)])
      reconcile()
    case "message":
      messages += 1
      if parts[2].hasPrefix("probe ") {
        // Every instance's probe comes through; only its own is awaited.
        if parts[2] == "probe \(instance)" { probeSentAt = nil }
        return
      }
      if parts[2].hasPrefix("viewers ") {
        onViewersMessage(parts[2])
        return
      }
      if parts[2].hasPrefix("key ") {
        keyMessage(parts[2])
        return
      }
      guard let message = RecordMessage.parse(parts[2]) else {
        damagedRecords += 1
        RecordDamage.unreadable(parts[2])
        return
      }
      guard let record = accepted(message, from: "message") else { return }
      changed(message, record)
    default:
      break
    }
  }

  /// `key <session> <revision> <hash>`: a controller rotated the session's
  /// key (here or elsewhere), so the old key stops working here too.
  private func keyMessage(_ payload: String) {
    let parts = payload.split(separator: " ", omittingEmptySubsequences: false)
    guard parts.count == 4, UInt64(parts[2]) != nil, let hash = KeyHash(hex: String(parts[3]))
    else { return }
    let session = String(parts[1])
    guard sessions.isRead(session), keyHash(session) != hash else { return }
    emit(.keyChanged(session: session, keyHash: hash), clock.nowMilliseconds())
  }

  private func changed(_ message: RecordMessage, _ record: SessionRecord) {
    let missed = position != 0 && message.position > position + 1
    position = max(position, message.position)
    if missed {
      reconcile()
      return
    }
    guard sessions.isOpen(message.session) else { return }
    guard message.epoch == settings.epoch else {
      read(message.session)
      return
    }
    switch sessions.change(message.session, revision: record.revision) {
    case .notOpen, .old: return
    case .reread: read(message.session)
    case .next:
      emit(.adopted(session: message.session, record: record), redisClock.nowMilliseconds())
    }
  }
}
