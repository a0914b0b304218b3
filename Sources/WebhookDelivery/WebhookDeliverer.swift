import CountdownCore
import Curl
import Dispatch
import Observability
import Synchronization

#if canImport(Glibc)
  import Glibc
#endif

/// What the deliverer has done, for `/metrics`: read from any thread.
public struct DeliveryStats: Sendable, Equatable {
  /// Entries the deliverer holds now: being sent, or waiting for a retry.
  public var queued = 0
  public var delivered: UInt64 = 0
  public var retried: UInt64 = 0
  public var dead: UInt64 = 0
  /// From the change (`event.timestamp`) to the last endpoint's 2xx, ms.
  public var latencyMs = Histogram(bounds: [
    5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10_000, 30_000, 60_000, 300_000, 3_600_000,
  ])
}

/// Sends the outbox's events to every endpoint, signed by Standard Webhooks,
/// on a thread of its own (never the service thread) through libcurl's multi
/// interface: many transfers at once on one thread, each with its timeout.
///
/// An entry is settled (`delivered`) once every endpoint answered 2xx, and
/// `dead` when a failure comes after the retry window. Which endpoints took
/// it is kept in memory only, so after a restart an endpoint may get a
/// repeat under the same `webhook-id`: at least once. At most `maxInFlight`
/// entries are held at a time; the rest wait in the (durable) outbox.
public final class WebhookDeliverer: Sendable {
  public struct Settings: Sendable {
    public var endpoints: [WebhookEndpoint]
    public var secret: WebhookSecret
    public var events: WebhookEventFilter
    public var policy: RetryPolicy
    /// Per request, connecting included.
    public var timeoutMs: Int
    public var maxInFlight: Int
    /// How often the outbox is asked even without a wake-up: entries a dead
    /// instance left, or ones recorded where no wake-up reaches.
    public var pollMs: Int
    /// A PEM file of the CA certificates that https endpoints must chain
    /// to, instead of the system's; nil: the system's.
    public var caFile: String?

    public init(
      endpoints: [WebhookEndpoint], secret: WebhookSecret, events: WebhookEventFilter = .all,
      policy: RetryPolicy = RetryPolicy(), timeoutMs: Int = 10_000, maxInFlight: Int = 256,
      pollMs: Int = 500, caFile: String? = nil
    ) {
      self.caFile = caFile
      self.endpoints = endpoints
      self.secret = secret
      self.events = events
      self.policy = policy
      self.timeoutMs = max(1, timeoutMs)
      self.maxInFlight = max(1, maxInFlight)
      self.pollMs = max(1, pollMs)
    }
  }

  private let settings: Settings
  private let clock: @Sendable () -> Int64
  private let log: Logger
  private let jitter: @Sendable () -> Double
  private let shared: DeliveryShared
  private let finished = DispatchSemaphore(value: 0)
  private let state = Mutex(Phase.idle)

  private enum Phase { case idle, running, stopped }

  /// `clock` is epoch ms on the clock the changes were stamped with;
  /// `jitter` draws in [0, 1) for the backoff.
  public init(
    settings: Settings, outbox: sending any WebhookOutbox,
    clock: @escaping @Sendable () -> Int64, log: Logger,
    jitter: @escaping @Sendable () -> Double = { Double.random(in: 0..<1) }
  ) {
    precondition(CurlMulti.initialise(), "libcurl could not initialise")
    self.settings = settings
    self.clock = clock
    self.log = log
    self.jitter = jitter
    shared = DeliveryShared(outbox: outbox)
  }

  /// Starts the delivery thread. Call once.
  public func start() {
    let starting = state.withLock { phase in
      guard phase == .idle else { return false }
      phase = .running
      return true
    }
    guard starting else { return }
    let (settings, clock, log, jitter, shared) = (settings, clock, log, jitter, shared)
    let finished = finished
    DispatchQueue(label: "webhook-delivery").async {
      if let outbox = shared.outbox.withLock({ $0.take() }) {
        DeliveryLoop(
          settings: settings, outbox: outbox, clock: clock, log: log, jitter: jitter,
          shared: shared
        ).run()
      }
      finished.signal()
    }
  }

  /// Asks the outbox now rather than at the next poll: a recorder calls it
  /// after an event is committed. Any thread; cheap.
  public func wake() {
    shared.wakeRequested.store(true, ordering: .releasing)
    shared.wakeUp()
  }

  /// Stops taking, drops the transfers under way (their entries stay in the
  /// outbox, to be sent again), hands back the entries it held, and waits
  /// for the thread to end.
  public func stop() {
    let wasRunning = state.withLock { phase in
      defer { phase = .stopped }
      return phase == .running
    }
    shared.stopping.store(true, ordering: .releasing)
    shared.wakeUp()
    if wasRunning { finished.wait() }
  }

  public var stats: DeliveryStats { shared.stats.withLock { $0 } }

  deinit { stop() }
}

/// What the delivery thread shares with the others: counters, flags, and a
/// pipe that `curl_multi_poll` watches, so another thread can end its wait
/// without touching the multi handle, which stays on the delivery thread.
final class DeliveryShared: Sendable {
  let stats = Mutex(DeliveryStats())
  let stopping = Atomic(false)
  let wakeRequested = Atomic(false)
  /// Handed to the delivery thread when it starts, which alone uses it after.
  let outbox: Mutex<(any WebhookOutbox)?>
  /// The pipe's ends: the poll watches the first, a wake-up writes the second.
  let wakeReader: Int32
  let wakeWriter: Int32

  init(outbox: sending any WebhookOutbox) {
    self.outbox = Mutex(outbox)
    var ends: [Int32] = [-1, -1]
    precondition(pipe(&ends) == 0, "pipe failed: \(errno)")
    for end in ends {
      _ = fcntl(end, F_SETFL, fcntl(end, F_GETFL) | O_NONBLOCK)
      _ = fcntl(end, F_SETFD, FD_CLOEXEC)
    }
    (wakeReader, wakeWriter) = (ends[0], ends[1])
  }

  /// A full pipe already holds a wake-up, so a failed write loses none.
  func wakeUp() {
    var byte: UInt8 = 1
    _ = write(wakeWriter, &byte, 1)
  }

  /// Empties the pipe once the poll has seen it.
  func drainWakeUps() {
    var bytes = [UInt8](repeating: 0, count: 64)
    while read(wakeReader, &bytes, bytes.count) > 0 {}
  }

  deinit {
    close(wakeReader)
    close(wakeWriter)
  }
}

/// The delivery thread's own state, made on that thread and used there
/// only: the requests under way, and the entries held.
final class DeliveryLoop {
  private let settings: WebhookDeliverer.Settings
  private let outbox: any WebhookOutbox
  private let clock: @Sendable () -> Int64
  private let log: Logger
  private let jitter: @Sendable () -> Double
  private let shared: DeliveryShared
  private let signer: StandardWebhookSigner
  private let curl: CurlMulti

  private struct Held {
    var entry: OutboxEntry
    /// Endpoints (by index) that have not answered 2xx yet.
    var pending: Set<Int>
    var inFlight = 0
    var attempts: Int
    /// Its key in `due`.
    let slot: Int32
    /// What the last failed request got: an HTTP status or curl's error.
    var lastResult = ""
  }

  /// A request under way: the entry it sends, to which endpoint.
  private struct Transfer {
    let entryHandle: String
    let endpoint: Int
  }

  private var held: [String: Held] = [:]
  /// When each held entry that is not in flight is due, by slot: the next
  /// try is found in O(log n), however many are held.
  private var due = DeadlineHeap()
  /// The handle in each slot, and the slots free for reuse.
  private var handles: [String?] = []
  private var freeSlots: [Int32] = []
  private var transfers: [Int: Transfer] = [:]
  private var nextTag = 1
  private var lastTake: Int64?
  /// The last take filled every free slot, so the outbox may hold more.
  private var moreWaiting = false

  init(
    settings: WebhookDeliverer.Settings, outbox: any WebhookOutbox,
    clock: @escaping @Sendable () -> Int64, log: Logger,
    jitter: @escaping @Sendable () -> Double, shared: DeliveryShared
  ) {
    self.settings = settings
    self.outbox = outbox
    self.clock = clock
    self.log = log
    self.jitter = jitter
    self.shared = shared
    signer = StandardWebhookSigner(secret: settings.secret)
    curl = CurlMulti(wakeFD: shared.wakeReader, caFile: settings.caFile)
  }

  func run() {
    while !shared.stopping.load(ordering: .acquiring) {
      let now = clock()
      takeIfDue(now: now)
      startDue(now: now)
      let finished = curl.perform()
      let then = clock()
      for done in finished { finish(done, now: then) }
      publishQueued()
      if curl.poll(timeoutMs: pollTimeout(now: clock())) { shared.drainWakeUps() }
    }
    for tag in Array(transfers.keys) { curl.remove(tag) }
    transfers = [:]
    let unsettled = held.values.map(\.entry).sorted { $0.handle < $1.handle }
    for handle in Array(held.keys) { release(handle) }
    if !unsettled.isEmpty { settle("hand_back") { try outbox.handBack(unsettled) } }
    publishQueued()
  }

  // MARK: Taking from the outbox

  private func takeIfDue(now: Int64) {
    let free = settings.maxInFlight - held.count
    // A clock stepped back counts as due, so a step cannot stall the poll.
    let pollDue = lastTake.map { now - $0 >= Int64(settings.pollMs) || now < $0 } ?? true
    guard free > 0 else {
      // Full: still asked at the poll, for nothing, so the outbox does its
      // own upkeep (stores settlements, keeps held entries claimed, moves
      // due finishes); a wake-up is kept for when a slot frees.
      if pollDue {
        lastTake = now
        do { _ = try outbox.take(limit: 0, now: now) } catch { outboxFailed("take", error) }
      }
      return
    }
    let woken = shared.wakeRequested.exchange(false, ordering: .acquiringAndReleasing)
    guard woken || pollDue || moreWaiting else { return }
    lastTake = now
    let entries: [OutboxEntry]
    do {
      entries = try outbox.take(limit: free, now: now)
    } catch {
      // Asked again at the next poll, not at once: a failing outbox is not spun on.
      moreWaiting = false
      outboxFailed("take", error)
      return
    }
    // All of them, even past `limit`: the outbox has handed them out, and
    // one left aside would wait for a restart.
    for entry in entries where held[entry.handle] == nil {
      guard settings.events.allows(entry.event.type) else {
        // Filtered at delivery, so the recorders need no filter: settled unsent.
        settle("delivered") { try outbox.delivered(entry) }
        continue
      }
      hold(entry, dueAt: now)
    }
    // A full batch means more may be waiting: ask again as soon as a slot is free.
    moreWaiting = entries.count >= free
  }

  // MARK: Sending

  private func hold(_ entry: OutboxEntry, dueAt: Int64) {
    let slot: Int32
    if let free = freeSlots.popLast() {
      slot = free
      handles[Int(slot)] = entry.handle
    } else {
      slot = Int32(handles.count)
      handles.append(entry.handle)
    }
    held[entry.handle] = Held(
      entry: entry, pending: Set(settings.endpoints.indices), attempts: max(0, entry.attempts),
      slot: slot)
    due.set(slot, to: dueAt)
  }

  /// Settled, or dropped at the end: the slot is free again.
  private func release(_ handle: String) {
    guard let entry = held.removeValue(forKey: handle) else { return }
    due.set(entry.slot, to: nil)
    handles[Int(entry.slot)] = nil
    freeSlots.append(entry.slot)
  }

  private func startDue(now: Int64) {
    // Taken out first: a try that cannot start may be rescheduled for now,
    // and waits for the next turn rather than spinning in this one.
    var ready: [Int32] = []
    while let slot = due.popDue(now: now) { ready.append(slot) }
    for slot in ready {
      guard let handle = handles[Int(slot)], var entry = held[handle] else { continue }
      let timestamp = now / 1000
      let event = entry.entry.event
      let signature = signer.signature(id: event.id, timestamp: timestamp, body: event.body)
      for endpoint in entry.pending.sorted() {
        if start(event, to: endpoint, timestamp: timestamp, signature: signature, handle: handle) {
          entry.inFlight += 1
        } else {
          entry.lastResult = "could not start the request"
        }
      }
      held[handle] = entry
      if entry.inFlight == 0 { attemptDone(handle, now: now) }
    }
  }

  private func start(
    _ event: WebhookEvent, to endpoint: Int, timestamp: Int64, signature: String, handle: String
  ) -> Bool {
    let tag = nextTag
    nextTag += 1
    let headers = [
      "Content-Type: application/json", "webhook-id: \(event.id)",
      "webhook-timestamp: \(timestamp)", "webhook-signature: \(signature)",
      // Names the sender in the receiver's logs (libcurl sends none by itself).
      "User-Agent: countdown-server",
      // No 100-continue round trip before the body.
      "Expect:",
    ]
    guard
      curl.post(
        tag: tag, url: settings.endpoints[endpoint].url, body: event.body, headers: headers,
        timeoutMs: settings.timeoutMs)
    else { return false }
    transfers[tag] = Transfer(entryHandle: handle, endpoint: endpoint)
    return true
  }

  private func finish(_ done: CurlMulti.Done, now: Int64) {
    guard let transfer = transfers.removeValue(forKey: done.tag),
      var entry = held[transfer.entryHandle]
    else { return }
    entry.inFlight -= 1
    if let failure = done.failure {
      entry.lastResult = failure
    } else if (200..<300).contains(done.status) {
      entry.pending.remove(transfer.endpoint)
    } else {
      entry.lastResult = "HTTP \(done.status)"
    }
    held[transfer.entryHandle] = entry
    if entry.inFlight == 0 { attemptDone(transfer.entryHandle, now: now) }
  }

  /// Every request of an attempt has answered: settle the entry, or
  /// schedule its next try.
  private func attemptDone(_ handle: String, now: Int64) {
    guard var entry = held[handle] else { return }
    if entry.pending.isEmpty {
      release(handle)
      // Counted before the outbox hears of it, so whoever sees it settled sees it counted.
      let latency = Double(max(0, now - entry.entry.event.timestamp))
      let queued = held.count
      shared.stats.withLock {
        $0.queued = queued
        $0.delivered += 1
        $0.latencyMs.observe(latency)
      }
      settle("delivered") { try outbox.delivered(entry.entry) }
      return
    }
    entry.attempts = entry.attempts < Int.max ? entry.attempts + 1 : Int.max
    let decision = settings.policy.next(
      attempts: entry.attempts, now: now, changedAt: entry.entry.event.timestamp,
      jitter: jitter())
    switch decision {
    case .retry(let at):
      held[handle] = entry
      due.set(entry.slot, to: at)
      shared.stats.withLock { $0.retried += 1 }
      settle("retry") { [attempts = entry.attempts] in
        try outbox.retry(entry.entry, attempts: attempts, at: at)
      }
    case .giveUp:
      release(handle)
      let queued = held.count
      shared.stats.withLock {
        $0.queued = queued
        $0.dead += 1
      }
      let event = entry.entry.event
      log.warn(
        "webhook_dead",
        [
          "id": LogValue(event.id), "type": LogValue(event.type.rawValue),
          "session": LogValue(event.session), "attempts": LogValue(entry.attempts),
          "last": LogValue(entry.lastResult),
          "msg": LogValue("given up after the retry window (--webhook-retry-for)"),
        ])
      settle("dead") { try outbox.dead(entry.entry) }
    }
  }

  // MARK: Bookkeeping

  /// An outbox that fails to record a settlement hands the entry out again
  /// later: a repeat, never a loss.
  private func settle(_ operation: String, _ call: () throws -> Void) {
    do { try call() } catch { outboxFailed(operation, error) }
  }

  private func outboxFailed(_ operation: String, _ error: any Error) {
    log.warn(
      "webhook_outbox_failed",
      ["operation": LogValue(operation), "error": LogValue(String(describing: error))])
  }

  private func publishQueued() {
    let count = held.count
    shared.stats.withLock { $0.queued = count }
  }

  /// Until the next poll of the outbox or the next retry due, whichever is
  /// first; curl's own timers (timeouts) cut it short by themselves.
  private func pollTimeout(now: Int64) -> Int {
    var wait = Int64(settings.pollMs)
    if held.count < settings.maxInFlight && moreWaiting {
      wait = 0
    } else if let lastTake {
      wait = min(wait, max(0, lastTake + Int64(settings.pollMs) - now))
    } else {
      wait = 0
    }
    if let earliest = due.earliest {
      // A retry time at either end of Int64 (a stepped clock) neither traps nor wraps.
      let (until, overflow) = earliest.subtractingReportingOverflow(now)
      if overflow {
        if earliest < now { wait = 0 }
      } else {
        wait = min(wait, max(0, until))
      }
    }
    return Int(max(0, wait))
  }
}
