import CountdownCore
import Libev
import Observability

/// Presence: the viewers each session has on every instance.
///
/// - The hub pushes each change of a session's local count
///   (`localViewersChanged`); every `viewerIntervalMs` the sessions whose
///   count changed, and only those, go to Redis (`countdown_v3_viewers`),
///   which answers the sum, shown as other instances' viewers.
/// - About once a second a heartbeat keeps this instance counted, and
///   renews a slice of its viewer hashes.
/// - An instance whose heartbeat expired is reaped: the first instance to
///   see it recounts the sessions it counted in.
///
/// Runs on the loop's thread; its events (`.remoteViewers`) go to `emit`.
final class ClusterPresence: ClusterPart {
  /// Where sums from elsewhere go (the hub), with Redis's time.
  var emit: (ClusterEvent, Int64) -> Void = { _, _ in }
  /// Whether Redis can be reached now (the change feed is live).
  var isLive: () -> Bool = { false }

  /// A full round of renewals (see `renew`) takes about this long, well
  /// inside the few minutes the function keeps viewer hashes (VIEW_MS in
  /// countdown.lua); at least this many sessions go in each call.
  static let renewRoundMs: Int64 = 60_000
  static let renewBatch = 1000
  /// The viewer sums taken from Redis: what a session's 32-bit count can show.
  static let viewerSumRange = 0...Int(Int32.max)

  private let bulk: BulkWindow

  private struct Count {
    /// Viewers here, as the hub last said.
    var local = 0
    /// The count this instance last sent.
    var sent: Int?
    /// The version of the last sum shown (see `showViewers`).
    var version: Int64 = 0
    /// In `changed`, waiting for the next send.
    var queued = false
  }
  private var counts: [String: Count] = [:]
  /// Sessions whose local count changed since the last send.
  private var changed: [String] = []

  /// When the last heartbeat went out (ms); nil before the first.
  private var heartbeatAt: Int64?
  /// The instances whose heartbeat had expired at the last heartbeat.
  private(set) var expiredInstances: Set<String> = []
  /// Sessions whose viewer hash the next renewals renew (see `renew`).
  private var renewQueue: [String] = []
  private lazy var timer = LoopTimer(loop: commands.loop) { [unowned self] in tick() }

  init(
    settings: RedisSequencer.Settings, instance: String, redisClock: RedisClock,
    commands: RedisConnection, sessions: OpenSessions, bulk: BulkWindow
  ) {
    self.bulk = bulk
    super.init(
      settings: settings, instance: instance, redisClock: redisClock, commands: commands,
      sessions: sessions)
  }

  func start() { timer.schedule(afterMs: settings.viewerIntervalMs) }

  func opened(_ session: String) { counts[session] = Count() }
  func forgot(_ session: String) { counts[session] = nil }

  /// The hub's count of a session here changed: it goes out at the next tick.
  func localViewersChanged(session: String, count: Int) {
    guard counts[session] != nil else { return }
    counts[session]!.local = count
    markChanged(session)
  }

  private func markChanged(_ session: String) {
    guard counts[session]?.queued == false else { return }
    counts[session]!.queued = true
    changed.append(session)
  }

  /// Counts a lost connection dropped unsent go out once it is back.
  func requeue(_ dropped: [BulkWindow.Item]) {
    for case .viewers(let session) in dropped { markChanged(session) }
  }

  /// Sends the counts that changed here, and about once a second beats the heartbeat.
  func tick() {
    timer.schedule(afterMs: settings.viewerIntervalMs)
    guard isLive() else { return }
    // Each heartbeat renews a third of the TTL or a second, whichever is
    // shorter, so that one late beat does not let the instance lapse.
    let now = clock.nowMilliseconds()
    if now - (heartbeatAt ?? .min / 2) >= min(1000, settings.heartbeatTTLMs / 3) {
      heartbeat(first: heartbeatAt == nil)
      renew()
      heartbeatAt = now
    }
    // A session still loading keeps its change for a tick after its read.
    var later: [String] = []
    for session in changed {
      guard let count = counts[session] else { continue }
      guard sessions.isRead(session) else {
        later.append(session)
        continue
      }
      counts[session]!.queued = false
      if count.local != count.sent { bulk.add(.viewers(session)) }
    }
    changed = later
    bulk.pump()
  }

  /// The count to send for `session` when its turn comes: the hub's, or for
  /// one still loading (or not open here) the count last sent, if any.
  private func viewersToSend(_ session: String) -> Int {
    guard let count = counts[session] else { return 0 }
    guard sessions.isRead(session) else { return count.sent ?? 0 }
    return count.local
  }

  /// Sends a bulk item of presence's (a count) when its turn comes.
  func sendBulk(_ session: String, then done: @escaping RedisConnection.Handler) -> Bool {
    sendViewers(session, viewersToSend(session), then: done)
  }

  /// Sends this instance's count of `session` (0 for one it does not have
  /// open, which only recounts the sum) and shows the sum that comes back.
  @discardableResult
  private func sendViewers(
    _ session: String, _ local: Int, then done: RedisConnection.Handler? = nil
  ) -> Bool {
    counts[session]?.sent = local
    let arguments = [
      "FCALL", RedisSequencer.function("viewers"), "3", RedisSequencer.viewerKey(session),
      RedisSequencer.instancesKey, RedisSequencer.sessionIndexKey(instance), instance,
      String(local), channel, session, String(settings.heartbeatTTLMs),
      sessions.isOpen(session) ? "1" : "0",
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
    if renewQueue.isEmpty { renewQueue = sessions.read }
    let batch = max(Self.renewBatch, sessions.count / Int(Self.renewRoundMs / 1000))
    let slice = renewQueue.suffix(batch)
    renewQueue.removeLast(slice.count)
    let keys = [RedisSequencer.sessionIndexKey(instance)] + slice.map(RedisSequencer.viewerKey)
    commands.send(["FCALL", RedisSequencer.function("renew"), String(keys.count)] + keys) { _ in }
  }

  /// One call a second, whatever the session count. When this instance's own
  /// heartbeat had lapsed (a stalled link), others may have dropped its counts:
  /// it sends them all again. When another instance's has newly expired, this
  /// one tries to reap it: the first instance to do so recounts the sessions
  /// the dead one counted viewers in, once, and the others do nothing.
  private func heartbeat(first: Bool) {
    let arguments = [
      "FCALL", RedisSequencer.function("heartbeat"), "1", RedisSequencer.instancesKey, instance,
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
      for session in sessions.read { bulk.add(.viewers(session)) }
      bulk.pump()
    }
  }

  private func reap(_ dead: String) {
    let arguments = [
      "FCALL", RedisSequencer.function("reap"), "2", RedisSequencer.instancesKey,
      RedisSequencer.sessionIndexKey(dead), dead,
    ]
    commands.send(arguments) { [weak self] result in
      guard let self, case .success(.array(let sessions)) = result else { return }
      for session in sessions.compactMap(\.text) { bulk.add(.viewers(session)) }
      bulk.pump()
    }
  }

  /// `viewers <session> <sum> <instance> <version>`: the sum changed elsewhere.
  func viewersMessage(_ payload: String) {
    let parts = payload.split(separator: " ")
    guard parts.count == 5, parts[3] != instance, let sum = Int(parts[2]),
      let version = Int64(parts[4])
    else { return }
    let session = String(parts[1])
    guard sessions.isRead(session) else { return }
    showViewers(session, sum: sum, version: version)
  }

  /// A sum arrives both as a reply and as a message, on two connections: the
  /// version keeps an older one from overwriting a newer.
  private func showViewers(_ session: String, sum: Int, version: Int64) {
    // A sum from Redis is input: out of a count's range it would overflow
    // the subtraction below, or the hub's sum with this instance's viewers.
    guard Self.viewerSumRange.contains(sum), let count = counts[session],
      version > count.version
    else { return }
    counts[session]!.version = version
    let others = max(0, sum - (count.sent ?? 0))
    emit(.remoteViewers(session: session, count: others), redisClock.nowMilliseconds())
  }
}
