import Foundation
import Libev
import Testing

@testable import CountdownCore
@testable import RedisCluster

/// One cluster part's surroundings without the coordinator: its own Redis,
/// a loop, the connections it needs, the shared `OpenSessions` and
/// `BulkWindow`, and a recorder of the events it emits.
final class PartRig: ClusterEventSink {
  let redis: RedisProcess
  let loop = LibevLoop()
  let sessions = OpenSessions()
  let bulk = BulkWindow()
  var events: [ClusterEvent] = []
  var keyHashes: [String: KeyHash] = [:]

  init(redis: RedisProcess? = nil) throws {
    self.redis = try redis ?? RedisProcess()
  }

  func apply(_ event: ClusterEvent, now: Int64) { events.append(event) }
  func keyHash(ofSession id: String) -> KeyHash? { keyHashes[id] }

  func settings(epoch: String = "E", timeoutMs: Int64 = 2000) -> RedisSequencer.Settings {
    var settings = RedisSequencer.Settings(address: redis.address, epoch: epoch)
    settings.timeoutMs = timeoutMs
    return settings
  }

  func connection(
    _ name: String, address: RedisAddress? = nil, timeoutMs: Int64 = 2000
  ) -> RedisConnection {
    RedisConnection(
      name: name, address: address ?? redis.address, loop: loop, timeoutMs: timeoutMs)
  }

  /// A session open here and read at `revision`.
  func openRead(_ session: String, revision: UInt64 = 0) {
    sessions.open(session)
    _ = sessions.readAnswered(session, revision: revision)
  }

  func request(_ ticket: UInt64, _ session: String, _ command: SessionCommand) -> SequenceRequest {
    SequenceRequest(
      ticket: Ticket(ticket), session: session, command: command, current: SessionRecord(),
      keyHash: nil, presentedKeyHash: nil, now: now())
  }

  func completion(_ ticket: UInt64) -> SequenceOutcome? {
    for case .completed(let done, let outcome) in events where done == Ticket(ticket) {
      return outcome
    }
    return nil
  }

  func wait(
    _ what: String, seconds: Int64 = 10, sourceLocation: SourceLocation = #_sourceLocation,
    until done: () -> Bool
  ) {
    waitFor(loop, seconds: seconds, what, sourceLocation: sourceLocation, until: done)
  }
}

/// Redis ordering the start of `session` as another instance would, on `channel`.
func startElsewhere(
  _ client: BlockingRedis, _ session: String, base: SessionRecord = SessionRecord(),
  channel: String, epoch: String = "E"
) throws -> SessionRecord? {
  let command = SequenceRequest(
    ticket: Ticket(0), session: session,
    command: base.revision == 0 ? .start(.seconds(60), finishedLabel: nil) : .pause,
    current: base, keyHash: nil, presentedKeyHash: nil, now: now())
  let argv = CommandCall.argv(
    command, epoch: epoch, channel: channel, deadline: now() + 60_000, nonce: "other-\(now())")
  let parts = try client.command(argv).elements?.compactMap(\.text) ?? []
  guard parts.first == "ok", parts.count >= 2 else { return nil }
  return try? RecordMessage.parse(parts[1])?.record.get()
}

@Suite(.serialized) struct OrderingTests {
  let rig: PartRig
  let commands: RedisConnection
  let ordering: ClusterOrdering

  init() throws {
    signal(SIGPIPE, SIG_IGN)
    rig = try PartRig()
    _ = try RedisSequencer.prepare(rig.redis.address, proposedEpoch: "E")
    commands = rig.connection("commands", timeoutMs: 500)
    ordering = ClusterOrdering(
      settings: rig.settings(), instance: "i", redisClock: RedisClock(local: SystemClock()),
      commands: commands, sessions: rig.sessions)
    ordering.emit = { [rig] in rig.apply($0, now: $1) }
    ordering.isLive = { [commands] in commands.isUp }
  }

  /// A command's reply completes its ticket with the applied record, and the session's revision follows.
  @Test func replyCompletesTheTicket() {
    commands.start()
    rig.wait("the connection") { commands.isUp }
    rig.openRead("s")
    #expect(
      ordering.sequence(rig.request(1, "s", .start(.seconds(60), finishedLabel: nil))) == .pending)
    rig.wait("the completion") { rig.completion(1) != nil }
    guard case .applied(let record) = rig.completion(1) else {
      Issue.record("not applied: \(String(describing: rig.completion(1)))")
      return
    }
    #expect(record.revision == 1)
    #expect(rig.sessions.change("s", revision: 1) == .old)
    #expect(ordering.commandsSent == 1)
  }

  /// A command the function refuses completes its ticket with the function's error code.
  @Test func refusalCompletesTheTicket() {
    commands.start()
    rig.wait("the connection") { commands.isUp }
    rig.openRead("idle")
    #expect(ordering.sequence(rig.request(2, "idle", .pause)) == .pending)
    rig.wait("the completion") { rig.completion(2) != nil }
    #expect(rig.completion(2) == .rejected(.notRunning))
  }

  /// Not live: a command is answered unavailable at once, counted, and nothing is emitted.
  @Test func notLiveIsUnavailableAtOnce() {
    let result = ordering.sequence(rig.request(3, "s", .pause))
    #expect(result == .done(.unavailable(RedisSequencer.unreachable)))
    #expect(ordering.commandsUnavailable == 1)
    #expect(rig.events.isEmpty)
  }
}

@Suite(.serialized) struct LostReplyResolutionTests {
  let rig: PartRig
  let relay: LinkRelay
  let commands: RedisConnection
  let ordering: ClusterOrdering

  init() throws {
    signal(SIGPIPE, SIG_IGN)
    rig = try PartRig()
    _ = try RedisSequencer.prepare(rig.redis.address, proposedEpoch: "E")
    relay = try LinkRelay(to: rig.redis)
    commands = rig.connection("commands", address: relay.address, timeoutMs: 400)
    var settings = rig.settings(timeoutMs: 400)
    settings.resolveWithinMs = 1500
    ordering = ClusterOrdering(
      settings: settings, instance: "i", redisClock: RedisClock(local: SystemClock()),
      commands: commands, sessions: rig.sessions)
    ordering.emit = { [rig] in rig.apply($0, now: $1) }
    ordering.isLive = { [commands] in commands.isUp }
    // As the change feed does once the connection answers again.
    commands.onUp = { [ordering] in ordering.resolveLostReplies() }
    commands.start()
    rig.wait("the connection") { commands.isUp }
    // Opened in Redis as the change feed's first read does.
    _ = try openCall(rig.redis.blocking(), "s", key: nil)
    rig.openRead("s")
  }

  /// Sends a start through the relay in `mode`, so that its reply (or the command) is lost.
  func sendLosing(_ mode: LinkRelay.Mode, ticket: UInt64) {
    relay.set(mode)
    #expect(
      ordering.sequence(rig.request(ticket, "s", .start(.seconds(60), finishedLabel: nil)))
        == .pending)
    rig.wait("the reply to be lost") { ordering.lostReplyCount == 1 }
  }

  /// A reply lost after the command applied resolves to applied, with the record Redis holds.
  @Test func lostReplyResolvesApplied() {
    sendLosing(.dropReplies, ticket: 1)
    relay.set(.forward)
    rig.wait("the resolution") { rig.completion(1) != nil }
    guard case .applied(let record) = rig.completion(1) else {
      Issue.record("not applied: \(String(describing: rig.completion(1)))")
      return
    }
    #expect(record.revision == 1)
    #expect(ordering.lostRepliesApplied == 1)
  }

  /// A command that never reached Redis resolves to not applied: unavailable.
  @Test func lostCommandResolvesNotApplied() {
    sendLosing(.dropCommands, ticket: 2)
    relay.set(.forward)
    rig.wait("the resolution") { rig.completion(2) != nil }
    #expect(rig.completion(2) == .unavailable(RedisSequencer.unreachable))
    #expect(ordering.lostRepliesNotApplied == 1)
  }

  /// A lost reply that cannot be looked up within resolveWithinMs resolves to outcome_unknown.
  @Test func unreachableResolvesUnknown() {
    sendLosing(.dropReplies, ticket: 3)
    rig.wait("the give-up") { rig.completion(3) != nil }
    #expect(rig.completion(3) == .rejected(.outcomeUnknown))
    #expect(ordering.lostRepliesUnknown == 1)
    relay.set(.forward)
  }
}

@Suite(.serialized) struct ChangeFeedTests {
  let rig: PartRig
  let commands: RedisConnection
  let subscriber: RedisConnection
  var conflicts: [String] = []

  init() throws {
    signal(SIGPIPE, SIG_IGN)
    rig = try PartRig()
    _ = try RedisSequencer.prepare(rig.redis.address, proposedEpoch: "E")
    commands = rig.connection("commands")
    subscriber = rig.connection("subscriber")
  }

  func feed(epoch: String = "E") -> ChangeFeed {
    let feed = ChangeFeed(
      settings: rig.settings(epoch: epoch), instance: "i",
      redisClock: RedisClock(local: SystemClock()), commands: commands, subscriber: subscriber,
      sessions: rig.sessions, bulk: rig.bulk)
    feed.emit = { [rig] in rig.apply($0, now: $1) }
    feed.keyHash = { [rig] in rig.keyHash(ofSession: $0) }
    rig.bulk.send = { [unowned feed] item, done in
      guard case .read(let session) = item else { return nil }
      return feed.sendBulk(session, then: done)
    }
    commands.onUp = { [unowned feed] in feed.commandsUp() }
    subscriber.onUp = { [unowned feed] in feed.subscriberUp() }
    commands.onDown = { [unowned feed] in feed.commandsDown($0) }
    subscriber.onDown = { [unowned feed] in feed.subscriberDown($0) }
    commands.start()
    subscriber.start()
    return feed
  }

  var adopted: [UInt64] {
    rig.events.compactMap {
      if case .adopted(_, let record) = $0 { record.revision } else { nil }
    }
  }

  /// A session opened is read and loaded; the next revision published elsewhere is adopted.
  @Test func newerRevisionIsAdopted() throws {
    let feed = feed()
    rig.wait("live") { feed.isLive }
    feed.opened("s")
    rig.wait("the load") {
      rig.events.contains { if case .loaded("s", _, _) = $0 { true } else { false } }
    }
    let rereads = feed.rereads
    _ = try startElsewhere(
      rig.redis.blocking(), "s", channel: RedisSequencer.channel(rig.redis.address))
    rig.wait("the adoption") { adopted == [1] }
    #expect(feed.rereads == rereads)
  }

  /// A revision past the next (one change missed) is not adopted as such: the session is read again.
  @Test func gapRereads() throws {
    let feed = feed()
    rig.wait("live") { feed.isLive }
    feed.opened("g")
    rig.wait("the load") { rig.sessions.isRead("g") }
    let client = try rig.redis.blocking()
    // Revision 1 goes where this feed does not listen; revision 2 where it does.
    let first = try #require(try startElsewhere(client, "g", channel: "nowhere"))
    let rereads = feed.rereads
    _ = try startElsewhere(
      client, "g", base: first, channel: RedisSequencer.channel(rig.redis.address))
    rig.wait("the reread's adoption") { adopted == [2] }
    #expect(feed.rereads == rereads + 1)
  }

  /// Redis holding another epoch is reported as a conflict, and the feed never goes live.
  @Test func otherEpochIsAConflict() throws {
    var conflict: String?
    let feed = feed(epoch: "mine")
    feed.onEpochConflict = { conflict = $0 }
    rig.wait("the conflict") { conflict != nil }
    #expect(conflict == "E")
    #expect(!feed.isLive)
  }

  /// A key message for a session read here reports the new key; one for the key it has already is dropped.
  @Test func keyMessageReportsANewKey() throws {
    let feed = feed()
    rig.wait("live") { feed.isLive }
    rig.openRead("k")
    let old = KeyHash(of: "old")
    let new = KeyHash(of: "new")
    rig.keyHashes["k"] = old
    let channel = RedisSequencer.channel(rig.redis.address)
    let client = try rig.redis.blocking()
    try client.command(["PUBLISH", channel, "key k 1 \(old.hex)"])
    try client.command(["PUBLISH", channel, "key k 2 \(new.hex)"])
    rig.wait("the key change") { !rig.events.isEmpty }
    #expect(rig.events == [.keyChanged(session: "k", keyHash: new)])
  }
}

@Suite(.serialized) struct PresenceTests {
  let rig: PartRig
  let commands: RedisConnection

  init() throws {
    rig = try PartRig()
    _ = try RedisSequencer.prepare(rig.redis.address, proposedEpoch: "E")
    commands = rig.connection("commands")
    commands.start()
    rig.wait("the connection") { commands.isUp }
  }

  func presence(_ instance: String, bulk: BulkWindow? = nil, sessions: OpenSessions? = nil)
    -> ClusterPresence
  {
    let bulk = bulk ?? rig.bulk
    let presence = ClusterPresence(
      settings: rig.settings(), instance: instance, redisClock: RedisClock(local: SystemClock()),
      commands: commands, sessions: sessions ?? rig.sessions, bulk: bulk)
    presence.emit = { [rig] in rig.apply($0, now: $1) }
    presence.isLive = { [commands] in commands.isUp }
    bulk.send = { [unowned presence] item, done in
      guard case .viewers(let session) = item else { return nil }
      return presence.sendBulk(session, then: done)
    }
    return presence
  }

  func counted(_ session: String, _ instance: String) throws -> String? {
    try rig.redis.blocking().command(["HGET", RedisSequencer.viewerKey(session), instance]).text
  }

  /// A count change reaches Redis at the next tick, and only the sessions whose count changed are sent.
  @Test func onlyChangedCountsAreSent() throws {
    let a = presence("a")
    for session in ["x", "y", "z"] {
      rig.openRead(session)
      a.opened(session)
    }
    a.localViewersChanged(session: "y", count: 3)
    a.tick()
    rig.wait("y's count in Redis") { (try? counted("y", "a")) == "3" }
    #expect(try counted("x", "a") == nil)
    #expect(try counted("z", "a") == nil)
    // A session still loading keeps its change until it is read.
    rig.sessions.open("w")
    a.opened("w")
    a.localViewersChanged(session: "w", count: 2)
    a.tick()
    rig.wait("a round trip") { (try? rig.redis.blocking().command(["PING"]).text) == "PONG" }
    #expect(try counted("w", "a") == nil)
    _ = rig.sessions.readAnswered("w", revision: 0)
    a.tick()
    rig.wait("w's count in Redis") { (try? counted("w", "a")) == "2" }
  }

  /// The sum Redis answers reaches the hub as other instances' viewers.
  @Test func sumsReachOtherInstances() throws {
    let bulkB = BulkWindow()
    let sessionsB = OpenSessions()
    let a = presence("a")
    let b = presence("b", bulk: bulkB, sessions: sessionsB)
    rig.openRead("s")
    sessionsB.open("s")
    _ = sessionsB.readAnswered("s", revision: 0)
    a.opened("s")
    b.opened("s")
    a.localViewersChanged(session: "s", count: 2)
    a.tick()
    rig.wait("a's count") { (try? counted("s", "a")) == "2" }
    b.localViewersChanged(session: "s", count: 3)
    b.tick()
    rig.wait("b's sum") { rig.events.contains(.remoteViewers(session: "s", count: 2)) }
    a.localViewersChanged(session: "s", count: 4)
    a.tick()
    rig.wait("a's sum") { rig.events.contains(.remoteViewers(session: "s", count: 3)) }
  }

  /// An instance whose heartbeat expired is reaped: its counts leave Redis and the sum.
  @Test func deadInstanceIsReaped() throws {
    let bulkB = BulkWindow()
    let sessionsB = OpenSessions()
    let a = presence("a")
    let b = presence("b", bulk: bulkB, sessions: sessionsB)
    // Only b's events are asserted.
    a.emit = { _, _ in }
    rig.openRead("r")
    sessionsB.open("r")
    _ = sessionsB.readAnswered("r", revision: 0)
    a.opened("r")
    b.opened("r")
    a.localViewersChanged(session: "r", count: 5)
    a.tick()
    rig.wait("a's count") { (try? counted("r", "a")) == "5" }
    b.localViewersChanged(session: "r", count: 1)
    b.tick()
    rig.wait("b's sum") { rig.events.contains(.remoteViewers(session: "r", count: 5)) }
    // a stops beating: its heartbeat is made old, as if it died.
    try rig.redis.blocking().command(["ZADD", RedisSequencer.instancesKey, "0", "a"])
    // b's next heartbeat is due a second on.
    rig.wait("the reap") {
      b.tick()
      return rig.events.contains(.remoteViewers(session: "r", count: 0))
    }
    #expect(try counted("r", "a") == nil)
  }
}
