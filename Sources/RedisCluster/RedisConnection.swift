import Libev
import Observability

#if canImport(Glibc)
  import Glibc
#endif

/// One connection to Redis that keeps itself connected, on one loop's thread.
///
/// - It reconnects with capped exponential backoff and jitter.
/// - hiredis 0.14 has no timeouts, so this has its own: a command without a
///   reply after `timeoutMs` fails with `.timeout`, and the connection is
///   dropped and made anew, since a reply that late means the link is not
///   healthy (a cut cable, a proxy that stopped forwarding). A connect that
///   does not finish in that time is dropped the same way.
/// - `onUp` and `onDown` say when it can take commands and when it stops.
final class RedisConnection: HiredisContextOwner {
  typealias Handler = (Result<RedisReply, RedisError>) -> Void

  let name: String
  let address: RedisAddress
  let loop: LibevLoop
  let timeoutMs: Int64
  var onUp: (() -> Void)?
  var onDown: ((RedisError) -> Void)?
  private(set) var isUp = false

  private struct Pending {
    var deadline: Int64
    var handler: Handler
  }

  private var context: HiredisContext?
  private var connectDeadline: Int64?
  private var pending: [UInt: Pending] = [:]
  /// Pending tags in the order they were sent, which is their deadlines'
  /// order too: each deadline is the send time plus the same timeout, on a
  /// clock that never steps back. So the earliest deadline is the oldest tag
  /// still pending, found in O(1) amortised (answered tags at the front are
  /// dropped as it looks), where a scan of `pending` cost O(n) per send.
  private var sentOrder = TagQueue()
  /// The deadline the timer is armed for, so a send does not re-arm it.
  private var armedFor: Int64?
  /// Handlers that hear every message of a subscription, until the connection goes.
  private var subscriptions: [UInt: Handler] = [:]
  private var timedOut: Set<UInt> = []
  private var nextTag: UInt = 1
  private var stopped = true
  private var backoffMs: Int64 = 0
  private lazy var retryTimer = LoopTimer(loop: loop) { [unowned self] in connect() }
  private lazy var deadlineTimer = LoopTimer(loop: loop) { [unowned self] in checkDeadlines() }

  static let firstBackoffMs: Int64 = 100
  static let longestBackoffMs: Int64 = 2000

  /// Sent with AUTH first on every (re)connect; never logged.
  private let password: String?
  private lazy var authTimer = LoopTimer(loop: loop) { [unowned self] in
    drop(RedisError(.authentication, "\(name): AUTH was refused"))
  }

  init(
    name: String, address: RedisAddress, loop: LibevLoop, timeoutMs: Int64,
    password: String? = nil
  ) {
    self.name = name
    self.address = address
    self.loop = loop
    self.timeoutMs = timeoutMs
    self.password = password
  }

  static func authArguments(username: String?, password: String) -> [String] {
    username.map { ["AUTH", $0, password] } ?? ["AUTH", password]
  }

  // Pending handlers may reach objects that are going too: they are not run.
  deinit { context?.abandon() }

  func start() {
    guard stopped else { return }
    stopped = false
    connect()
  }

  /// Closes the connection and stops reconnecting; pending commands fail.
  func stop() {
    stopped = true
    retryTimer.cancel()
    deadlineTimer.cancel()
    drop(RedisError(.disconnected, "stopped"))
  }

  /// Drops the connection (pending commands fail) and reconnects.
  func reset(_ error: RedisError) {
    drop(error)
  }

  /// Queues a command; `handler` runs once with its reply or failure. False
  /// (and no handler call) when the connection is not up.
  @discardableResult
  func send(_ arguments: [String], handler: @escaping Handler) -> Bool {
    guard isUp, let context else { return false }
    let tag = nextTag
    nextTag += 1
    guard context.send(arguments, tag: tag) else { return false }
    let deadline = monotonicMs() + timeoutMs
    pending[tag] = Pending(deadline: deadline, handler: handler)
    sentOrder.append(tag)
    // A later deadline than the one armed changes nothing.
    if armedFor == nil { armDeadlines() }
    return true
  }

  /// Subscribes: `handler` gets the confirmation, then every message, as
  /// hiredis's arrays, until the connection goes (then subscribe again).
  @discardableResult
  func subscribe(_ channel: String, handler: @escaping Handler) -> Bool {
    guard isUp, let context else { return false }
    let tag = nextTag
    nextTag += 1
    guard context.send(["SUBSCRIBE", channel], tag: tag) else { return false }
    subscriptions[tag] = handler
    return true
  }

  // MARK: hiredis's events

  func contextConnected(_ id: UInt) {
    guard id == context?.id else { return }
    connectDeadline = nil
    isUp = true
    backoffMs = 0
    if let password {
      // First of all on the wire, so nothing runs unauthenticated. A refusal
      // drops the connection (from a timer: not inside hiredis's callback),
      // and it tries again with backoff.
      send(Self.authArguments(username: address.username, password: password)) {
        [weak self] result in
        guard let self, case .failure(let error) = result, error.kind == .reply else { return }
        Logger.shared.error(
          "redis_auth_failed", ["connection": LogValue(name), "error": LogValue(error.message)])
        authTimer.schedule(afterMs: 0)
      }
    }
    if address.database != 0 {
      // First on the wire, so everything after runs in that database.
      send(["SELECT", String(address.database)]) { _ in }
    }
    onUp?()
  }

  func contextLost(_ id: UInt, _ error: RedisError) {
    guard id == context?.id else { return }
    context?.forget()
    context = nil
    lost(error)
  }

  func contextReplied(_ id: UInt, tag: UInt, _ reply: RedisReply?) {
    if let subscription = subscriptions[tag] {
      if let reply { subscription(.success(reply)) }
      return
    }
    guard let entry = pending.removeValue(forKey: tag) else { return }
    switch reply {
    case .error(let message)?: entry.handler(.failure(RedisError(.reply, message)))
    case let reply?: entry.handler(.success(reply))
    case nil:
      let late = timedOut.remove(tag) != nil
      entry.handler(
        .failure(
          late
            ? RedisError(.timeout, "no reply within \(timeoutMs) ms")
            : RedisError(.disconnected, "the connection closed before the reply")))
    }
  }

  // MARK: Internals

  private func connect() {
    guard !stopped, context == nil else { return }
    do {
      context = try HiredisContext(connecting: address, loop: loop, owner: self)
      connectDeadline = monotonicMs() + timeoutMs
      armDeadlines()
    } catch {
      lost(error)
    }
  }

  /// Closes the current context ourselves (a timeout, a stop).
  private func drop(_ error: RedisError) {
    guard let closing = context else { return }
    context = nil
    // Pending handlers run inside close(), with nil replies.
    closing.close()
    lost(error)
  }

  private func lost(_ error: RedisError) {
    connectDeadline = nil
    subscriptions = [:]
    let wasUp = isUp
    isUp = false
    // A context hiredis failed before connecting never ran its callbacks.
    let orphans = pending
    pending = [:]
    sentOrder.removeAll()
    timedOut = []
    for (_, entry) in orphans { entry.handler(.failure(error)) }
    if wasUp { onDown?(error) }
    guard !stopped else { return }
    backoffMs = min(
      Self.longestBackoffMs, backoffMs == 0 ? Self.firstBackoffMs : backoffMs * 2)
    // Full jitter keeps instances that lost Redis together from returning together.
    retryTimer.schedule(afterMs: Int64.random(in: backoffMs / 2...backoffMs))
  }

  /// The oldest pending command's deadline, dropping answered tags before it.
  private func earliestDeadline() -> Int64? {
    while let tag = sentOrder.first {
      if let entry = pending[tag] { return entry.deadline }
      sentOrder.removeFirst()
    }
    return nil
  }

  private func armDeadlines() {
    guard let next = [earliestDeadline(), connectDeadline].compactMap({ $0 }).min() else {
      armedFor = nil
      deadlineTimer.cancel()
      return
    }
    armedFor = next
    deadlineTimer.schedule(afterMs: next - monotonicMs())
  }

  private func checkDeadlines() {
    armedFor = nil
    let now = monotonicMs()
    if let connectDeadline, connectDeadline <= now {
      drop(RedisError(.timeout, "\(name): no connection within \(timeoutMs) ms"))
      return
    }
    if let earliest = earliestDeadline(), earliest <= now {
      // One pass, once: the connection goes with every command on it.
      timedOut.formUnion(pending.filter { $0.value.deadline <= now }.map(\.key))
      drop(RedisError(.timeout, "\(name): no reply within \(timeoutMs) ms"))
      return
    }
    armDeadlines()
  }
}

/// A FIFO of tags: an array and a read index, compacted when half is read.
struct TagQueue {
  private var tags: [UInt] = []
  private var head = 0

  var first: UInt? { head < tags.count ? tags[head] : nil }

  mutating func append(_ tag: UInt) { tags.append(tag) }

  mutating func removeFirst() {
    head += 1
    if head == tags.count {
      tags.removeAll(keepingCapacity: true)
      head = 0
    } else if head >= 1024 && head * 2 >= tags.count {
      tags.removeFirst(head)
      head = 0
    }
  }

  mutating func removeAll() {
    tags.removeAll(keepingCapacity: true)
    head = 0
  }
}

/// Milliseconds on a clock that never steps, for deadlines.
func monotonicMs() -> Int64 { monotonicNanoseconds() / 1_000_000 }
