/// A connection's handle inside the hub. The network layer maps it to its socket.
public typealias ConnectionID = Int32

/// What `Hub.connect` did.
public enum JoinOutcome: Equatable, Sendable {
  case joined(ConnectionID)
  /// Not joined: send this error, then close with 1013 (try again later).
  case refused(ErrorCode)
}

/// What the network layer must do after `Hub.receive`.
public enum ReceiveOutcome: Equatable, Sendable {
  case handled
  case close(code: UInt16, reason: String)
}

/// Hears every published change and every forgotten session: the seam where
/// durability, scale-out and metrics attach without touching the hub.
public protocol HubObserver: AnyObject {
  func hub(published patch: Patch, session: String)
  func hub(forgot session: String)
}

/// All sessions, all viewers, and the one deadline heap: the whole server
/// minus the sockets.
///
/// The network layer tells it what happened (`connect`, `receive`,
/// `disconnect`, `advance`) with the current time, asks it which connections
/// have something to write (`drainWritable`), and when a connection may be
/// written, takes one frame from `nextFrame(for:)`. Each patch is encoded once
/// per session; a viewer only remembers the last seq it was sent, so a slow
/// viewer costs one merged frame, not a queue.
///
/// Not thread-safe: the one service thread owns it.
public final class Hub {
  /// Kept small, since a server may hold a million: what only some sessions
  /// need (controller keys, merged catch-up frames) lives in side tables, and
  /// a session nobody watches holds no buffers.
  private struct Session {
    let id: String
    var machine: SessionStateMachine
    var viewers: [ConnectionID] = []
    /// The latest patch, encoded once (when first needed) for every viewer
    /// one seq behind; valid while `patchFrameFresh`.
    var patchFrame: [UInt8] = []
    var patchFrameFresh = false
    var dirty = false
  }

  /// One merged catch-up frame, shared by every viewer of a session at the same old seq.
  private struct MergedFrame {
    var from: UInt64
    var to: UInt64
    var frame: [UInt8]
  }

  private struct Connection {
    var session: Int32
    /// Index in the session's `viewers`, for O(1) removal.
    var position: Int32
    var sentSeq: UInt64 = 0
    var needsSnapshot = true
    var replies: [Reply] = []
    var isController: Bool
    var bucket: TokenBucket
  }

  /// A message for one connection only. A pong is encoded when written, so its
  /// serverTime is as close as possible to the moment it leaves.
  private enum Reply {
    case frame([UInt8])
    case pong(t: String)
  }

  /// Bytes of one session's slot in the hub's table (for the scheduler benchmark's accounting).
  public static let sessionSlotBytes = MemoryLayout<Session?>.stride

  /// Acks and errors a connection may have waiting; past this, replies are dropped.
  public static let maxPendingReplies = 64

  public let config: HubConfig
  /// Changes whenever the server restarts, so a client can tell that the
  /// sessions it knew are gone.
  public let epoch: String
  public var observer: (any HubObserver)?
  public internal(set) var stats = HubStats()

  private let sessionConfig: SessionConfig.Shared
  private var sessions: [Session?] = []
  /// By session handle; filled only in `--control key` mode. Never logged.
  private var controllerKeys: [ControllerKey] = []
  /// By session handle, for sessions with a lagging viewer.
  private var mergedFrames: [Int32: MergedFrame] = [:]
  private var freeSessions: [Int32] = []
  private var sessionIndex: [String: Int32] = [:]
  private var connections: [Connection?] = []
  private var freeConnections: [Int32] = []
  private var heap = DeadlineHeap()
  private var dirtySessions: [Int32] = []
  private var dirtyConnections: [ConnectionID] = []

  public private(set) var sessionCount = 0
  public private(set) var connectionCount = 0

  public init(config: HubConfig, epoch: String = Hub.randomEpoch()) {
    self.config = config
    self.epoch = epoch
    self.sessionConfig = SessionConfig.Shared(config.session)
  }

  /// 64 random bits as hex: unique per process start without a clock's help.
  public static func randomEpoch() -> String {
    var generator = SystemRandomNumberGenerator()
    return ControllerKey.hex(generator.next() as UInt64)
  }

  /// When `advance(now:)` is next needed, if ever.
  public var nextWakeup: Int64? { heap.earliest }

  /// The published state of a session, if it exists.
  public func state(of session: String) -> (seq: UInt64, state: CountdownState)? {
    guard let handle = sessionIndex[session], let slot = sessions[Int(handle)] else { return nil }
    return (slot.machine.seq, slot.machine.published)
  }

  // MARK: Events

  /// A viewer opened `/ws/<session>`; the session is created on first join.
  /// The caller has checked `SessionID.isValid`. `key` is the controller key
  /// the client presented, if any.
  public func connect(session id: String, key: String? = nil, now: Int64) -> JoinOutcome {
    let handle: Int32
    var created = false
    if let existing = sessionIndex[id] {
      handle = existing
    } else {
      guard sessionCount < config.maxSessions else { return .refused(.tooManySessions) }
      handle = createSession(id, now: now)
      created = true
    }
    let isController: Bool
    switch config.control {
    case .open:
      isController = true
    case .key:
      // The first viewer of a new session becomes its controller.
      isController = created || key.map { controllerKeys[Int(handle)].matches($0) } == true
    }
    let connection = allocate(
      Connection(
        session: handle, position: Int32(sessions[Int(handle)]!.viewers.count),
        isController: isController,
        bucket: TokenBucket(rate: config.commandsPerSecond, now: now)),
      in: &connections, free: &freeConnections)
    connectionCount += 1
    sessions[Int(handle)]!.viewers.append(connection)
    let count = sessions[Int(handle)]!.viewers.count
    apply(sessions[Int(handle)]!.machine.viewersChanged(to: count, now: now), to: handle)
    dirtyConnections.append(connection)
    return .joined(connection)
  }

  /// A viewer's connection closed.
  public func disconnect(_ connection: ConnectionID, now: Int64) {
    guard let closing = connections[Int(connection)] else { return }
    let handle = closing.session
    let moved = sessions[Int(handle)]!.viewers.removeLast()
    if moved != connection {
      sessions[Int(handle)]!.viewers[Int(closing.position)] = moved
      connections[Int(moved)]!.position = closing.position
    }
    connections[Int(connection)] = nil
    freeConnections.append(connection)
    connectionCount -= 1
    let count = sessions[Int(handle)]!.viewers.count
    if count == 0 {
      // Nobody left to send to: give the buffers back until someone returns.
      sessions[Int(handle)]!.viewers = []
      sessions[Int(handle)]!.patchFrame = []
      sessions[Int(handle)]!.patchFrameFresh = false
      mergedFrames[handle] = nil
    }
    apply(sessions[Int(handle)]!.machine.viewersChanged(to: count, now: now), to: handle)
  }

  /// One complete text message from a viewer: decode it, run it, queue the reply.
  /// Returns `.close` when the connection must be closed (a sustained flood).
  @discardableResult
  public func receive(_ text: [UInt8], from connection: ConnectionID, now: Int64) -> ReceiveOutcome
  {
    guard let viewer = connections[Int(connection)] else { return .handled }
    let handle = viewer.session
    guard connections[Int(connection)]!.bucket.take(rate: config.commandsPerSecond, now: now) else {
      if let since = connections[Int(connection)]!.bucket.floodingSince,
        now - since >= config.floodCloseAfterMs
      {
        return .close(code: 1008, reason: "too many commands")
      }
      let limit = CommandError(
        .rateLimited, "more than \(Int(config.commandsPerSecond)) commands a second")
      reply(.frame(WireCodec.error(limit)), to: connection)
      return .handled
    }
    let message: ClientMessage
    switch WireCodec.decode(text) {
    case .failure(let error):
      reply(.frame(WireCodec.error(error)), to: connection)
      return .handled
    case .success(let decoded):
      message = decoded
    }
    let action: SessionStateMachine.Action
    switch message.command {
    case .ping(let t):
      reply(.pong(t: t), to: connection)
      return .handled
    case _ where !viewer.isController:
      replyError(.forbidden, id: message.id, to: connection)
      return .handled
    case .start(let seconds, let finishedLabel):
      action = sessions[Int(handle)]!.machine.start(
        seconds: seconds ?? config.session.defaultSeconds, finishedLabel: finishedLabel, now: now)
    case .cancel:
      action = sessions[Int(handle)]!.machine.cancel(now: now)
    }
    if case .reject(let code) = action {
      replyError(code, id: message.id, to: connection)
      return .handled
    }
    apply(action, to: handle)
    let ack = WireCodec.ack(id: message.id, seq: sessions[Int(handle)]!.machine.seq)
    reply(.frame(ack), to: connection)
    return .handled
  }

  /// Time passed: run every session whose deadline is due.
  public func advance(now: Int64) {
    // Collect first, so a session is advanced at most once per call.
    var due: [Int32] = []
    while let handle = heap.popDue(now: now) { due.append(handle) }
    for handle in due where sessions[Int(handle)] != nil {
      apply(sessions[Int(handle)]!.machine.advance(now: now), to: handle)
    }
  }

  // MARK: Writing

  /// Calls `body` for every connection that has something new to write since
  /// the last drain. A connection may be named more than once.
  public func drainWritable(_ body: (ConnectionID) -> Void) {
    for handle in dirtySessions where sessions[Int(handle)] != nil {
      // Indexed in place: binding the Session would copy it per dirty session.
      sessions[Int(handle)]!.dirty = false
      var index = 0
      while index < sessions[Int(handle)]!.viewers.count {
        body(sessions[Int(handle)]!.viewers[index])
        index += 1
      }
    }
    dirtySessions.removeAll(keepingCapacity: true)
    for connection in dirtyConnections where connections[Int(connection)] != nil {
      body(connection)
    }
    dirtyConnections.removeAll(keepingCapacity: true)
  }

  /// The one frame to write now to `connection`, or nil when it is up to date.
  /// Order: the snapshot, then the state (merged into one patch if it lags),
  /// then acks and errors, so an ack never precedes its patch.
  public func nextFrame(for connection: ConnectionID, now: Int64) -> [UInt8]? {
    let slot = Int(connection)
    guard let session = connections[slot]?.session else { return nil }
    let handle = Int(session)
    let seq = sessions[handle]!.machine.seq
    // The hot path, once per viewer per tick: one patch behind, no snapshot
    // owed. Fields are read and written in place, and the frame every such
    // viewer shares is returned without copying its bytes.
    if connections[slot]!.sentSeq &+ 1 == seq && !connections[slot]!.needsSnapshot {
      connections[slot]!.sentSeq = seq
      if !sessions[handle]!.patchFrameFresh { encodeLatestPatch(handle) }
      return sessions[handle]!.patchFrame
    }
    return catchUpFrame(slot, handle: handle, now: now)
  }

  /// Encodes a session's latest patch, reusing the buffer. Lazy, so a session
  /// nobody watches never encodes its ticks.
  private func encodeLatestPatch(_ handle: Int) {
    let machine = sessions[handle]!.machine
    let patch = Patch(
      seq: machine.seq, fields: machine.changes(since: machine.seq - 1), state: machine.published)
    sessions[handle]!.patchFrame.removeAll(keepingCapacity: true)
    WireCodec.appendPatch(patch, to: &sessions[handle]!.patchFrame)
    sessions[handle]!.patchFrameFresh = true
  }

  /// Everything but the hot path: the snapshot, a merged patch for a viewer
  /// that lags, then acks, errors and pongs.
  private func catchUpFrame(_ slot: Int, handle: Int, now: Int64) -> [UInt8]? {
    let machine = sessions[handle]!.machine
    if connections[slot]!.needsSnapshot {
      connections[slot]!.needsSnapshot = false
      connections[slot]!.sentSeq = machine.seq
      let control: WireCodec.Control? =
        switch config.control {
        case .open: nil
        case .key:
          connections[slot]!.isController
            ? .controller(key: controllerKeys[handle].hex) : .viewer
        }
      return WireCodec.snapshot(
        session: sessions[handle]!.id, epoch: epoch, seq: machine.seq, serverTime: now,
        state: machine.published, control: control)
    }
    let from = connections[slot]!.sentSeq
    if from < machine.seq {
      connections[slot]!.sentSeq = machine.seq
      let key = Int32(handle)
      if let merged = mergedFrames[key], merged.from == from, merged.to == machine.seq {
        return merged.frame
      }
      let frame = WireCodec.patch(
        Patch(seq: machine.seq, fields: machine.changes(since: from), state: machine.published))
      mergedFrames[key] = MergedFrame(from: from, to: machine.seq, frame: frame)
      return frame
    }
    guard !connections[slot]!.replies.isEmpty else { return nil }
    switch connections[slot]!.replies.removeFirst() {
    case .frame(let frame): return frame
    case .pong(let t): return WireCodec.pong(t: t, serverTime: now)
    }
  }

  /// Whether `connection` still has something to write after the last frame.
  public func hasPending(_ connection: ConnectionID) -> Bool {
    let slot = Int(connection)
    guard let session = connections[slot]?.session else { return false }
    return connections[slot]!.needsSnapshot
      || connections[slot]!.sentSeq < sessions[Int(session)]!.machine.seq
      || !connections[slot]!.replies.isEmpty
  }

  // MARK: Internals

  private static func explain(_ code: ErrorCode) -> String {
    switch code {
    case .busy: "a countdown is already running in this session"
    case .notRunning: "no countdown is running in this session"
    case .badRequest: "the command's fields are out of range"
    case .badJSON: "the message is not valid JSON"
    case .forbidden: "only a controller of this session may do that"
    case .rateLimited: "too many commands"
    case .tooManySessions: "the server has as many sessions as it allows"
    }
  }

  /// The error a refused join is sent before its connection closes with 1013.
  public func refusalFrame(_ code: ErrorCode) -> [UInt8] {
    WireCodec.error(CommandError(code, Self.explain(code)))
  }

  private func replyError(_ code: ErrorCode, id: CommandID?, to connection: ConnectionID) {
    reply(.frame(WireCodec.error(CommandError(code, Self.explain(code), id: id))), to: connection)
  }

  private func reply(_ reply: Reply, to connection: ConnectionID) {
    guard connections[Int(connection)]!.replies.count < Self.maxPendingReplies else { return }
    connections[Int(connection)]!.replies.append(reply)
    dirtyConnections.append(connection)
  }

  private func apply(_ action: SessionStateMachine.Action, to handle: Int32) {
    switch action {
    case .broadcast(let patch, let next):
      if !sessions[Int(handle)]!.dirty {
        sessions[Int(handle)]!.dirty = true
        dirtySessions.append(handle)
      }
      sessions[Int(handle)]!.patchFrameFresh = false
      heap.set(handle, to: next)
      observer?.hub(published: patch, session: sessions[Int(handle)]!.id)
    case .schedule(let next):
      heap.set(handle, to: next)
    case .expire:
      forget(handle)
    case .reject:
      break
    }
  }

  private func createSession(_ id: String, now: Int64) -> Int32 {
    let handle = allocate(
      Session(id: id, machine: SessionStateMachine(config: sessionConfig, now: now)),
      in: &sessions, free: &freeSessions)
    if config.control == .key {
      let key = ControllerKey.generate()
      if Int(handle) < controllerKeys.count {
        controllerKeys[Int(handle)] = key
      } else {
        controllerKeys.append(key)
      }
    }
    sessionIndex[id] = handle
    sessionCount += 1
    return handle
  }

  private func forget(_ handle: Int32) {
    guard let session = sessions[Int(handle)], session.viewers.isEmpty else { return }
    heap.set(handle, to: nil)
    sessionIndex[session.id] = nil
    sessions[Int(handle)] = nil
    mergedFrames[handle] = nil
    freeSessions.append(handle)
    sessionCount -= 1
    observer?.hub(forgot: session.id)
  }

  private func allocate<T>(_ value: T, in slab: inout [T?], free: inout [Int32]) -> Int32 {
    if let reused = free.popLast() {
      slab[Int(reused)] = value
      return reused
    }
    slab.append(value)
    return Int32(slab.count - 1)
  }
}
