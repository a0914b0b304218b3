/// The `Idempotency-Key` of a command that came by HTTP: a retried POST with
/// the same key on the same session, within `keepMs`, gets the first answer
/// and is applied once. The sequencer remembers the answer in the same
/// atomic step that applies the command (one SQLite transaction, one Redis
/// function call), so it holds across a `kill -9` and across instances.
public enum IdempotencyKey {
  /// How long a key's answer is kept (one day, as Stripe keeps its keys).
  public static let keepMs: Int64 = 86_400_000
  public static let maxLength = 255

  /// 1 to 255 visible ASCII characters (`!` to `~`, no space): what a
  /// header carries without escaping or trimming, and what a log line, a
  /// SQLite key and a Redis key name take as they are. The HTTP layer and
  /// the OpenAPI document (`^[!-~]+$`) check the same.
  public static func isValid(_ key: String) -> Bool {
    let bytes = key.utf8
    return (1...maxLength).contains(bytes.count) && bytes.allSatisfy { (0x21...0x7E).contains($0) }
  }
}

/// The first answer to a command sent with an idempotency key: what a retry
/// is answered with instead of applying it again. The answer's bytes are a
/// pure function of it (`WireCodec.requestAnswer`), so the first answer and
/// every replay are the same bytes on every instance.
///
/// Only final answers are remembered: the command applied, or the session's
/// rules refused it (busy, not_running, not_paused, not_waiting, bad_request
/// from a rule).
/// As with Stripe, which keeps non-5xx answers, a retry of a refused command
/// is told the same refusal rather than applying later in a state the client
/// never saw. Not remembered, since nothing was decided about the command
/// itself and a retry is exactly what the client should do: `unavailable`,
/// `outcome_unknown`, `rate_limited`, `too_many_sessions` (all "try again"),
/// and `forbidden`, which is decided by the credential and not the command:
/// remembering it would let a caller without the key plant an answer under
/// a key that the session's controller then replays.
public enum IdempotentAnswer: Equatable, Sendable {
  /// The record the command left (its `seq` is the session's seq then).
  case applied(SessionRecord)
  case rejected(ErrorCode)

  /// Whether a sequencer remembers a rules refusal with this code.
  public static func remembers(_ code: ErrorCode) -> Bool {
    switch code {
    case .busy, .notRunning, .notPaused, .notWaiting, .badRequest: true
    case .badJSON, .rateLimited, .forbidden, .tooManySessions, .unavailable, .outcomeUnknown:
      false
    }
  }

  /// The answer to remember for an outcome, or nil when it is not final.
  public init?(_ outcome: SequenceOutcome) {
    switch outcome {
    case .applied(let record): self = .applied(record)
    case .rejected(let code) where Self.remembers(code): self = .rejected(code)
    case .replayed(let answer): self = answer
    case .rejected, .unavailable: return nil
    }
  }

  /// What the hub does with it on a replay: the same as with the first outcome.
  public var outcome: SequenceOutcome {
    switch self {
    case .applied(let record): .applied(record)
    case .rejected(let code): .rejected(code)
    }
  }
}

/// One remembered answer, as a store keeps it.
public struct IdempotencyEntry: Equatable, Sendable {
  public var session: String
  public var key: String
  /// The command the key was first used for (`SessionCommand.fingerprint`):
  /// the same key with another command is refused, not replayed.
  public var fingerprint: String
  public var answer: IdempotentAnswer
  /// When the command was sequenced (epoch ms): the entry goes `keepMs` later.
  public var at: Int64
  /// The client address budget (`AddressBudget`'s name) the key counts
  /// against; "" when unknown (a row from before addresses were kept).
  public var address: String

  public init(
    session: String, key: String, fingerprint: String, answer: IdempotentAnswer, at: Int64,
    address: String = ""
  ) {
    self.session = session
    self.key = key
    self.fingerprint = fingerprint
    self.answer = answer
    self.at = at
    self.address = address
  }

  /// Why an entry from outside (a row) cannot be taken, or nil.
  public var damage: String? {
    guard SessionID.isValid(session) else { return "the session is not a session id" }
    guard IdempotencyKey.isValid(key) else {
      return "the key is not 1 to 255 visible ASCII characters"
    }
    guard SessionCommand.isFingerprint(fingerprint) else { return "the fingerprint is not one" }
    guard SessionRecord.epochMsRange.contains(at) else { return "at \(at) out of range" }
    guard IdempotencyEntry.isAddress(address) else {
      return "the address is not 0 to 64 visible ASCII characters"
    }
    switch answer {
    case .applied(let record): return record.damage
    case .rejected(let code):
      return IdempotentAnswer.remembers(code) ? nil : "\(code.rawValue) is never remembered"
    }
  }
}

extension IdempotencyEntry {
  /// An address budget's name as a row may hold it: an IPv6 range is at
  /// most 43 characters, and what lws names a peer it cannot read is short.
  public static func isAddress(_ text: String) -> Bool {
    text.utf8.count <= 64 && text.utf8.allSatisfy { (0x21...0x7E).contains($0) }
  }
}

extension SessionCommand {
  /// The command in one line, its op first: a key reused with a different
  /// command is told so. A `rotate_key`'s new hash is the server's, made
  /// anew for each request, so only its op counts.
  public var fingerprint: String {
    switch self {
    case .start(.seconds(let seconds), let label, let options):
      "start seconds \(seconds) \(label ?? "")\(Self.fingerprint(options))"
    case .start(.until(let deadline), let label, let options):
      "start until \(deadline) \(label ?? "")\(Self.fingerprint(options))"
    case .cancel, .pause, .resume, .rotateKey, .stop: op.rawValue
    case .adjust(let seconds): "adjust \(seconds)"
    // Labels hold no control characters, so a tab cannot be inside one.
    case .wait(let label, let timeoutSeconds, let timeoutLabel):
      "wait \(timeoutSeconds.map(String.init) ?? "-")\t\(label ?? "")\t\(timeoutLabel ?? "")"
    case .done(let label): "done \(label ?? "")"
    case .fail(let label): "fail \(label ?? "")"
    case .message(let text): text.map { "message \($0)" } ?? "message"
    case .blackout(let on): "blackout \(on)"
    }
  }

  /// A start's options after a tab, or nothing for none, so a plain start's
  /// fingerprint stays what earlier versions stored.
  private static func fingerprint(_ options: RunOptions) -> String {
    guard options != .none else { return "" }
    let warn = options.warnAtSeconds.map(String.init) ?? "-"
    let danger = options.dangerAtSeconds.map(String.init) ?? "-"
    return "\t\(options.overtime ? "overtime" : "-") \(warn) \(danger)"
  }

  /// Whether stored text can be a fingerprint: an op's name first, and no
  /// longer than the longest a command makes.
  static func isFingerprint(_ text: String) -> Bool {
    let op = text.split(separator: " ", maxSplits: 1).first.map(String.init) ?? ""
    return Op(rawValue: op) != nil
      && text.utf8.count
        <= 64 + max(2 * SessionConfig.maxFinishedLabelLength, SessionRecord.maxMessageLength) * 4
  }
}

/// How many remembered answers a client may hold at once: within a
/// session, from one client address (an IPv6 client's prefix), and in all.
/// A new key past any of them is refused (`rate_limited`, nothing applied),
/// never made room for: a record dropped early is one whose retry would
/// apply a second time, and the record that went could be another
/// session's or another client's. A retry of a key already held is always
/// answered, whatever the counts.
public struct IdempotencyLimits: Equatable, Sendable {
  public static let defaultPerSession = 1000
  public static let defaultPerAddress = 1000
  public static let defaultTotal = 100_000

  public var perSession: Int
  public var perAddress: Int
  public var total: Int

  public init(
    perSession: Int = defaultPerSession, perAddress: Int = defaultPerAddress,
    total: Int = defaultTotal
  ) {
    self.perSession = max(1, perSession)
    self.perAddress = max(1, perAddress)
    self.total = max(1, total)
  }

  /// Whether a new key may be remembered, given how many keys its
  /// session, its address and everyone hold now.
  public func admit(session: Int, address: Int, total: Int) -> Bool {
    session < perSession && address < perAddress && total < self.total
  }

  /// What a client is told with the `rate_limited` that refuses a new key.
  public static let refusal =
    "too many Idempotency-Key answers are held from the last 24 h (on this session, from this"
    + " client address or in all); a new key is taken once the oldest expire, and a retry of a"
    + " key already used is still answered"
}

/// Remembered answers in memory, within `IdempotencyLimits`: a store loads
/// every live one at start, so a lookup at dispatch never waits for a disk
/// or the network, and the counts the limits check are the store's. Nothing
/// is dropped before its day is over.
public struct IdempotencyCache: Sendable {
  public let limits: IdempotencyLimits
  private var entries: [String: [String: IdempotencyEntry]] = [:]
  /// Keys held per client address ("" — unknown — counts against none).
  private var byAddress: [String: Int] = [:]
  /// Arrival order, for expiry; holds stale slots for replaced or removed
  /// entries, skipped when reached, and compacted when half of it is stale.
  private var order: [(session: String, key: String, at: Int64)] = []
  private var head = 0
  public private(set) var count = 0

  public init(limits: IdempotencyLimits = IdempotencyLimits()) {
    self.limits = limits
  }

  public func lookup(session: String, key: String, now: Int64) -> IdempotencyEntry? {
    guard let entry = entries[session]?[key], now - entry.at < IdempotencyKey.keepMs else {
      return nil
    }
    return entry
  }

  /// Whether a new key on `session` from `address` may be remembered now.
  /// Expired entries are dropped first, so they never count.
  public mutating func admits(session: String, address: String, now: Int64) -> Bool {
    prune(now: now)
    return limits.admit(
      session: entries[session]?.count ?? 0,
      address: address.isEmpty ? 0 : byAddress[address] ?? 0, total: count)
  }

  /// Keys held by a client address.
  public func count(ofAddress address: String) -> Int { byAddress[address] ?? 0 }

  /// Keys held on a session.
  public func count(ofSession session: String) -> Int { entries[session]?.count ?? 0 }

  /// Adds (or replaces) an entry, dropping expired ones. It never evicts:
  /// the sequencer checked `admits` first, and a store's rows loaded at
  /// start were each admitted once (under the limits of their day).
  public mutating func insert(_ entry: IdempotencyEntry, now: Int64) {
    prune(now: now)
    remove(session: entry.session, key: entry.key)
    entries[entry.session, default: [:]][entry.key] = entry
    if !entry.address.isEmpty { byAddress[entry.address, default: 0] += 1 }
    count += 1
    order.append((entry.session, entry.key, entry.at))
  }

  /// Forgets one entry (a write that failed: its key was never remembered).
  public mutating func remove(session: String, key: String) {
    guard let entry = entries[session]?[key] else { return }
    entries[session]?[key] = nil
    if entries[session]?.isEmpty == true { entries[session] = nil }
    if !entry.address.isEmpty {
      byAddress[entry.address, default: 1] -= 1
      if byAddress[entry.address] == 0 { byAddress[entry.address] = nil }
    }
    count -= 1
  }

  /// Drops entries older than `keepMs`: O(dropped).
  public mutating func prune(now: Int64) {
    while head < order.count, now - order[head].at >= IdempotencyKey.keepMs {
      let slot = order[head]
      head += 1
      if let entry = entries[slot.session]?[slot.key], entry.at == slot.at {
        remove(session: slot.session, key: slot.key)
      }
    }
    guard head > 1024, head * 2 > order.count else { return }
    order.removeFirst(head)
    head = 0
  }
}
