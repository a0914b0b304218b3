import CountdownCore
import Observability

/// The cluster's webhook outbox: the events stream countdown.lua records
/// each change in (`countdown:events`), read through one consumer group that
/// every instance joins under its own name, so each entry goes to one
/// instance. An entry stays pending (in the group's PEL) until it is settled
/// here: an instance that dies leaves its entries pending, and once they have
/// been idle for `claimAfterMs` another instance takes them over with
/// XAUTOCLAIM. This instance keeps the entries it holds from going idle (a
/// retry may wait for hours) by claiming them to itself again
/// (`countdown_v3_touch`: only those still its own), and one that stops
/// hands them back (`countdown_v3_release`), so they need not wait that long.
///
/// Only the delivery thread calls it: its connection is blocking, its own,
/// and never the service thread's.
public final class StreamOutbox: WebhookOutbox {
  public struct Settings: Sendable {
    public var address: RedisAddress
    public var password: String?
    /// This instance's name in the group: its entries are its own until
    /// they are settled, or idle long enough for another to take them.
    public var consumer: String
    /// An entry its holder has left untouched this long is taken over: the
    /// holder is taken for dead. Held entries are touched every third of it.
    public var claimAfterMs: Int64 = 30_000
    /// A command without a reply by then fails, and the connection is made anew.
    public var timeoutMs = 2000
    /// The most due finishes moved to the stream per `take`.
    public var dueBatch = 1000

    public init(address: RedisAddress, password: String? = nil, consumer: String) {
      self.address = address
      self.password = password
      self.consumer = consumer
    }
  }

  static let group = "countdown-webhooks"
  /// Tries made on an entry (field: its stream id), so a takeover or a
  /// restart carries the count on.
  static let attemptsKey = "countdown:event-attempts"

  public let settings: Settings
  private let config: SessionConfig.Shared
  private var redis: BlockingRedis?
  /// Entries handed out and not yet settled, by stream id.
  private var held: Set<String> = []
  /// When they were last claimed to this consumer again (monotonic ms).
  private var touchedAt: Int64 = .min / 2
  /// Entries delivered or dead whose settling Redis has not confirmed yet.
  private var unsettled: Set<String> = []
  /// When consumers that are gone were last looked for (monotonic ms).
  private var prunedAt: Int64 = .min / 2
  /// Where XAUTOCLAIM's scan of the pending entries goes on from.
  private var claimCursor = "0-0"
  /// Stream entries that were no event (damaged, or trimmed away), dropped.
  public private(set) var damaged = 0

  public init(settings: Settings, config: SessionConfig.Shared) {
    self.settings = settings
    self.config = config
  }

  public func take(limit: Int, now: Int64) throws -> [OutboxEntry] {
    try connected { redis in
      _ = try redis.command(
        ["FCALL", RedisSequencer.function("due"), "3"] + RedisSequencer.eventsKeys
          + [String(settings.dueBatch)])
      try settleLeft(redis)
      try touchHeld(redis)
      try pruneConsumers(redis)
      guard limit > 0 else { return [] }
      var entries = try claimed(redis, limit: limit)
      if entries.count < limit {
        let reply = try redis.command(
          [
            "XREADGROUP", "GROUP", Self.group, settings.consumer, "COUNT",
            String(limit - entries.count), "STREAMS", RedisSequencer.eventsKey, ">",
          ])
        // One stream asked for: [[name, entries]], or nil when none are new.
        let read = reply.elements?.first?.elements?.dropFirst().first?.elements ?? []
        entries += read
      }
      return try outboxEntries(redis, entries)
    }
  }

  public func delivered(_ entry: OutboxEntry) throws { try settle(entry.handle) }

  public func dead(_ entry: OutboxEntry) throws { try settle(entry.handle) }

  public func retry(_ entry: OutboxEntry, attempts: Int, at: Int64) throws {
    try connected { redis in
      // The tries kept, and the entry claimed to this consumer again so its
      // idle time starts over: one round trip.
      let replies = try redis.pipeline([
        ["HSET", Self.attemptsKey, entry.handle, String(max(0, attempts))],
        ownCall("touch", [entry.handle]),
      ])
      for case .error(let message) in replies { throw RedisError.reply(message) }
    }
  }

  /// On the connection already open, if any: a stopping instance does not
  /// wait out a connect for this. What was delivered is settled first, so
  /// it is not sent again; what is handed back goes to whichever instance
  /// polls next. Entries not handed back are taken over after `claimAfterMs`.
  public func handBack(_ entries: [OutboxEntry]) throws {
    guard let redis else { return }
    try settleLeft(redis)
    let ids = entries.map(\.handle).filter(held.contains)
    guard !ids.isEmpty else { return }
    let reply = try redis.command(ownCall("release", ids))
    held.subtract(ids)
    Logger.shared.info(
      "webhook_handed_back", ["entries": LogValue((reply.elements ?? []).count)])
  }

  /// Entries whose holder has left them idle past `claimAfterMs`, now ours;
  /// ones trimmed from the stream meanwhile come back as ids only, and are
  /// acknowledged so they leave the group.
  private func claimed(_ redis: BlockingRedis, limit: Int) throws -> [RedisReply] {
    let reply = try redis.command(
      [
        "XAUTOCLAIM", RedisSequencer.eventsKey, Self.group, settings.consumer,
        String(settings.claimAfterMs), claimCursor, "COUNT", String(limit),
      ])
    guard let parts = reply.elements, parts.count >= 2, let cursor = parts[0].text else {
      throw RedisError(.protocolViolation, "XAUTOCLAIM gave no cursor")
    }
    claimCursor = cursor
    let gone = parts.count > 2 ? (parts[2].elements ?? []).compactMap(\.text) : []
    if !gone.isEmpty {
      damaged += gone.count
      try redis.command(["XACK", RedisSequencer.eventsKey, Self.group] + gone)
    }
    // Ours already (this instance was slow to touch them): not handed out twice.
    return (parts[1].elements ?? []).filter { entry in
      guard let id = entry.elements?.first?.text else { return true }
      return !held.contains(id)
    }
  }

  /// Stream entries ([id, [field, value, …]]) as outbox entries, with their
  /// tries so far. One that is no event is logged and settled.
  private func outboxEntries(_ redis: BlockingRedis, _ replies: [RedisReply]) throws
    -> [OutboxEntry]
  {
    var entries: [OutboxEntry] = []
    var unreadable: [String] = []
    for reply in replies {
      guard let parts = reply.elements, let id = parts.first?.text else { continue }
      var fields: [String: String] = [:]
      let values = parts.count > 1 ? (parts[1].elements ?? []) : []
      for index in stride(from: 0, to: values.count - 1, by: 2) {
        if let name = values[index].text, let value = values[index + 1].text {
          fields[name] = value
        }
      }
      switch StreamEvent.event(fields, config: config) {
      case .success(let event):
        entries.append(OutboxEntry(event: event, attempts: 0, handle: id))
      case .failure(let damage):
        unreadable.append(id)
        damaged += 1
        Logger.shared.warn(
          "redis_record_damaged",
          ["entry": LogValue(id), "source": LogValue("events"), "damage": LogValue(damage.reason)])
      }
    }
    for id in unreadable { try settleOn(redis, id) }
    guard !entries.isEmpty else { return [] }
    let counts = try redis.command(["HMGET", Self.attemptsKey] + entries.map(\.handle))
    for (index, count) in (counts.elements ?? []).enumerated() where index < entries.count {
      // Input like any stored value: a count out of range starts over.
      if let text = count.text, let tries = Int(text), (0...1_000_000).contains(tries) {
        entries[index].attempts = tries
      }
    }
    held.formUnion(entries.map(\.handle))
    return entries
  }

  /// Claims the entries this instance holds to itself again, every third of
  /// `claimAfterMs`, so that none looks abandoned while it waits for a
  /// retry. Only those still ours: one another instance took over (this one
  /// was too slow) stays that one's.
  private func touchHeld(_ redis: BlockingRedis) throws {
    let now = monotonicMs()
    guard !held.isEmpty, now - touchedAt >= settings.claimAfterMs / 3 else { return }
    let reply = try redis.command(ownCall("touch", held.sorted()))
    held.formIntersection((reply.elements ?? []).compactMap(\.text))
    touchedAt = now
  }

  /// countdown_v3_touch or countdown_v3_release: each entry still this
  /// consumer's claimed to it again (touched, or made to look long idle), in
  /// one atomic step, so none is taken from another instance.
  private func ownCall(_ function: String, _ ids: [String]) -> [String] {
    ["FCALL", RedisSequencer.function(function), "1", RedisSequencer.eventsKey, Self.group]
      + [settings.consumer] + ids
  }

  /// Each instance joins the group under a name of its own, made anew at
  /// every start: a consumer that holds nothing and has not read for ten
  /// claim timeouts is gone, and is removed so restarts leave no trail. (A
  /// live one that was only slow is made again by its next XREADGROUP.)
  private func pruneConsumers(_ redis: BlockingRedis) throws {
    let now = monotonicMs()
    let quiet = settings.claimAfterMs * 10
    guard now - prunedAt >= quiet else { return }
    prunedAt = now
    let reply = try redis.command(
      ["XINFO", "CONSUMERS", RedisSequencer.eventsKey, Self.group])
    for consumer in reply.elements ?? [] {
      let pairs = consumer.elements ?? []
      var fields: [String: RedisReply] = [:]
      for index in stride(from: 0, to: pairs.count - 1, by: 2) {
        if let name = pairs[index].text { fields[name] = pairs[index + 1] }
      }
      guard let name = fields["name"]?.text, name != settings.consumer,
        case .integer(0) = fields["pending"], case .integer(let idle) = fields["idle"],
        idle > quiet
      else { continue }
      try redis.command(
        ["XGROUP", "DELCONSUMER", RedisSequencer.eventsKey, Self.group, name])
    }
  }

  /// Settled here at once, or, when Redis cannot be reached, at the next
  /// call that can: the entry stays this instance's (touched like any it
  /// holds) until then, so it is neither lost nor sent again meanwhile.
  private func settle(_ id: String) throws {
    unsettled.insert(id)
    try connected { redis in try settleLeft(redis) }
  }

  private func settleLeft(_ redis: BlockingRedis) throws {
    for id in unsettled.sorted() {
      try settleOn(redis, id)
      unsettled.remove(id)
    }
  }

  /// Out of the group, the stream and the tries, in one round trip.
  private func settleOn(_ redis: BlockingRedis, _ id: String) throws {
    let replies = try redis.pipeline([
      ["XACK", RedisSequencer.eventsKey, Self.group, id], ["XDEL", RedisSequencer.eventsKey, id],
      ["HDEL", Self.attemptsKey, id],
    ])
    for case .error(let message) in replies { throw RedisError.reply(message) }
    held.remove(id)
  }

  /// Runs `body` on the connection, made (and the group with it) when there
  /// is none. A connection that failed is dropped, so the next call makes
  /// it anew; an error reply keeps it.
  private func connected<Result>(_ body: (BlockingRedis) throws -> Result) throws -> Result {
    let redis: BlockingRedis
    if let current = self.redis {
      redis = current
    } else {
      redis = try BlockingRedis(settings.address, timeoutMs: settings.timeoutMs)
      do {
        if let password = settings.password {
          try redis.authenticate(username: settings.address.username, password: password)
        }
        if settings.address.database != 0 {
          try redis.command(["SELECT", String(settings.address.database)])
        }
        try Self.makeGroup(redis)
      }
      self.redis = redis
    }
    do {
      do {
        return try body(redis)
      } catch let error as RedisError where error.message.hasPrefix("NOGROUP") {
        // The stream went (Redis lost its data, or someone deleted it):
        // the group is made anew, and the call made once more.
        try Self.makeGroup(redis)
        return try body(redis)
      }
    } catch let error as RedisError where error.kind != .reply {
      self.redis = nil
      throw error
    }
  }

  /// The group, from the stream's start: events recorded before any
  /// instance read them are delivered too. Made once; BUSYGROUP says it is.
  static func makeGroup(_ redis: BlockingRedis) throws(RedisError) {
    do {
      try redis.command(["XGROUP", "CREATE", RedisSequencer.eventsKey, group, "0", "MKSTREAM"])
    } catch  where error.message.hasPrefix("BUSYGROUP") {}
  }
}

/// A stream entry's fields as countdown.lua's `emit` writes them (`op`,
/// `line`, `at`), turned into the event the single server would build for
/// the same change: the same `WebhookEvent` initialiser, on the record line.
enum StreamEvent {
  struct Damage: Error, Equatable {
    let reason: String
  }

  static func event(_ fields: [String: String], config: SessionConfig.Shared) -> Result<
    WebhookEvent, Damage
  > {
    guard let op = fields["op"], let line = fields["line"] else {
      return .failure(Damage(reason: "no op or line"))
    }
    guard let message = RecordMessage.parse(line) else {
      return .failure(Damage(reason: "not a record line"))
    }
    let record: SessionRecord
    switch message.record {
    case .success(let valid): record = valid
    case .failure(let damage): return .failure(Damage(reason: damage.reason))
    }
    guard SessionID.isValid(message.session) else {
      return .failure(Damage(reason: "not a session id"))
    }
    if op == "finish" {
      // The run, overtime or wait the deadline ended, at that deadline and no other.
      guard let text = fields["at"], let at = Int64(text) else {
        return .failure(Damage(reason: "no finish time"))
      }
      guard let deadline = record.selfFinishAt, deadline == at else {
        return .failure(Damage(reason: "a finish that is not its record's deadline"))
      }
      return .success(
        WebhookEvent(.finished, session: message.session, record: record, at: at, config: config))
    }
    guard let named = SessionCommand.Op(rawValue: op),
      let type = WebhookEventType.of(named, result: record)
    else {
      return .failure(Damage(reason: "not an op with an event"))
    }
    return .success(
      WebhookEvent(
        type, session: message.session, record: record, at: record.updatedAt, config: config))
  }
}
