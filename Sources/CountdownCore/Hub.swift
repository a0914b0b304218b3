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
  case close(CloseDirective)
}

/// Hears every published change and every forgotten session, for logs: it
/// runs on the service thread inside the hub, so it must be cheap.
public protocol HubObserver: AnyObject {
  func hub(published patch: Patch, session: String)
  func hub(forgot session: String)
}

/// All sessions, all viewers, and the one deadline heap: the whole server
/// minus the sockets. It coordinates three parts, each in its own file: the
/// registry of sessions and connections (here), the command path
/// (`CommandGate`, then a `CommandSequencer`, then `complete`), and the
/// fan-out of frames (`Hub+FanOut.swift`).
///
/// The network layer tells it what happened (`connect`, `receive`,
/// `disconnect`, `advance`) with the current time, asks it which connections
/// have something to write (`drainWritable`), and when a connection may be
/// written, takes one frame from `nextFrame(for:)`.
///
/// Not thread-safe: the one service thread owns it.
public final class Hub {
  /// Kept small, since a server may hold a million: what only some sessions
  /// need (controller keys, merged catch-up frames, waiting commands) lives
  /// in side tables, and a session nobody watches holds no buffers.
  struct Session {
    let id: String
    var machine: SessionStateMachine
    var viewers: [ConnectionID] = []
    /// The latest patch, encoded once (when first needed) for every viewer
    /// one seq behind; valid while `patchFrameFresh`.
    var patchFrame: [UInt8] = []
    var patchFrameFresh = false
    var dirty = false
    /// A command is with the sequencer; later ones wait in `waitingCommands`.
    var commandInFlight = false
    /// The state is being fetched (a cluster): viewers get no snapshot and
    /// commands wait until `loaded`.
    var loading = false
    /// For a running or paused session started here, the address it counts
    /// against; `noAddress` otherwise. Kept in the slot, whose padding it
    /// fills, rather than in a table that every running session would cost.
    var startedFrom = Session.noAddress
    static let noAddress: AddressTable.Index = -1

    /// Commands must wait rather than go to the sequencer now.
    var holdsCommands: Bool { commandInFlight || loading }
  }

  /// One merged catch-up frame, shared by every viewer of a session at the same old seq.
  struct MergedFrame {
    var from: UInt64
    var to: UInt64
    var frame: [UInt8]
  }

  /// One per viewer: its fields are ordered widest first, since Swift lays
  /// them out in declaration order and padding would cost every viewer.
  struct Connection {
    var sentSeq: UInt64 = 0
    var replies: [Reply] = []
    var gate: CommandGate
    var session: SessionHandle
    /// Index in the session's `viewers`, for O(1) removal.
    var position: Int32
    /// Tells this connection from a later one in the same slot, so a late
    /// ack never reaches a stranger.
    var serial: UInt32
    var needsSnapshot = true
    /// Settled at join; a cluster may take it back once the session's key is known.
    var isController: Bool
  }

  typealias SessionHandle = SlabHandle<Session>
  typealias ConnectionHandle = SlabHandle<Connection>

  /// A message for one connection only. A pong is encoded when written, so its
  /// serverTime is as close as possible to the moment it leaves.
  enum Reply {
    case frame([UInt8])
    case pong(t: String)
  }

  /// A command admitted and waiting for (or with) the sequencer.
  struct PendingCommand {
    var session: SessionHandle
    var connection: ConnectionHandle
    var serial: UInt32
    var id: CommandID?
    var command: SessionCommand
    /// The hash of the key the connection held when the command arrived
    /// (key mode): what a command from a connection gone since is checked by.
    var presented: KeyHash?
    /// A `rotate_key`'s new key, for its ack.
    var newKey: String?
    /// The client address of the connection, which a start counts against.
    var address: AddressTable.Index
    /// A start holds a place in its address's count from dispatch to completion.
    var holdsAddressPlace = false
    /// Set for a command from an HTTP request (`Hub+Requests.swift`): its
    /// answer goes to `requestAnswers`, not to a connection.
    var request: RequestID?
    /// Presented an API token: may command any session in either mode.
    var byToken = false
    /// An HTTP command's `Idempotency-Key` (`Hub+Idempotency.swift`).
    var idempotencyKey: String?
  }

  /// An `auth` whose session is still loading: decided once its key is known.
  struct PendingAuth {
    var connection: ConnectionHandle
    var serial: UInt32
    var id: CommandID?
    var key: String
  }

  /// What waits on a session, in arrival order.
  enum Waiting {
    case command(PendingCommand)
    case auth(PendingAuth)
  }

  /// Bytes of one session's slot in the hub's table (for the scheduler benchmark's accounting).
  public static let sessionSlotBytes = MemoryLayout<Session>.stride + MemoryLayout<Bool>.stride
  /// Bytes of one viewer's slot in the hub's table, and its place in its session's list.
  public static let connectionSlotBytes =
    MemoryLayout<Connection>.stride + MemoryLayout<Bool>.stride
    + MemoryLayout<ConnectionID>.stride

  /// Bytes of acks, errors and pongs a connection may have waiting; past
  /// this, replies are dropped. Counted in bytes, since an error can be a
  /// hundred times the size of an ack.
  public static let maxPendingReplyBytes = 16 * 1024
  /// Commands that may wait behind one in flight on a session; past this, `busy`.
  public static let maxWaitingCommands = 64

  public let config: HubConfig
  /// Changes whenever the sessions' history starts over (a new store), so a
  /// client can tell that the sessions it knew are gone.
  public let epoch: String
  public var observer: (any HubObserver)?
  public internal(set) var stats = HubStats()

  let sessionConfig: SessionConfig.Shared
  let sequencer: any CommandSequencer
  var sessions: Slab<Session>
  var connections = Slab<Connection>(
    vacant: Connection(
      gate: CommandGate(config: HubConfig(), now: 0), session: SessionHandle(-1), position: -1,
      serial: 0, isController: false))
  /// By session handle; filled only in `--control key` mode. Never logged.
  var keyHashes: [KeyHash?] = []
  /// The key each controller is shown in its snapshot, until it is sent.
  var keysToSend: [ConnectionID: String] = [:]
  /// By connection, for controllers in key mode only: the hash of the key
  /// each presented, so that a command is authorised against the session's
  /// key when it is sent on, not only when it arrives.
  var presentedKeys: [ConnectionID: KeyHash] = [:]
  /// The key of a session a viewer-only joiner created (key mode): shown to
  /// the next joiner that may control, as if it had been the first.
  var unclaimedKeys: [SessionHandle: String] = [:]
  /// By connection: the key a joiner presented when it created, here, a
  /// session still loading (a cluster). It holds the key it was made, in
  /// case the session is new everywhere, and this one, in case the session
  /// already had it: `loaded` keeps whichever is the session's.
  var keysOfferedWhileLoading: [ConnectionID: String] = [:]
  /// Client addresses, and by connection slot the index of each one's.
  var addresses = AddressTable()
  var connectionAddresses: [AddressTable.Index] = []
  /// By session handle, in key mode, for sessions created here by a client:
  /// the address that created it. A keyed session is kept a day for its
  /// host, so what one address may create is capped too.
  var createdFrom: [SessionHandle: AddressTable.Index] = [:]
  /// Bytes of replies waiting, for connections with any.
  var pendingReplyBytes: [ConnectionID: Int] = [:]
  /// By session handle, for sessions with a lagging viewer.
  var mergedFrames: [SessionHandle: MergedFrame] = [:]
  var sessionIndex: [String: SessionHandle] = [:]
  var heap = DeadlineHeap()
  var dirtySessions: [SessionHandle] = []
  var dirtyConnections: [ConnectionID] = []
  var inFlight: [Ticket: PendingCommand] = [:]
  var waitingCommands: [SessionHandle: [Waiting]] = [:]
  /// Every session's id in order, for the paged list (`Hub+Requests.swift`).
  var sortedIDs = SortedIDs<SessionHandle>()
  /// HTTP commands' rate limits, by client address and by token.
  var requestLimits = RequestLimits()
  /// Answers to HTTP commands, for the server to take after each call.
  var requestAnswers: [(RequestID, RequestAnswer)] = []
  /// What only a cluster needs (`Hub+Cluster.swift`).
  var cluster = ClusterTables()
  /// The sequencer, when it counts viewers across instances.
  let viewerCountObserver: (any ViewerCountObserver)?
  private var nextTicket: UInt64 = 1
  private var nextSerial: UInt32 = 1

  public var sessionCount: Int { sessions.count }
  public var connectionCount: Int { connections.count }

  public init(
    config: HubConfig, epoch: String = Hub.randomEpoch(),
    sequencer: any CommandSequencer = LocalSequencer()
  ) {
    self.config = config
    self.epoch = epoch
    self.sequencer = sequencer
    viewerCountObserver = sequencer as? any ViewerCountObserver
    var session = config.session
    session.keepsControl = config.control == .key
    self.sessionConfig = SessionConfig.Shared(session)
    sessions = Slab(
      vacant: Session(id: "", machine: SessionStateMachine(config: sessionConfig, now: 0)))
  }

  /// 64 random bits as hex: unique per history without a clock's help.
  public static func randomEpoch() -> String {
    var generator = SystemRandomNumberGenerator()
    return ControllerKey.hex(generator.next() as UInt64)
  }

  /// When `advance(now:)` is next needed, if ever.
  public var nextWakeup: Int64? { heap.earliest }

  /// The published state of a session, if it exists.
  public func state(of session: String) -> (seq: UInt64, state: CountdownState)? {
    guard let handle = sessionIndex[session] else { return nil }
    return (sessions[handle].machine.seq, sessions[handle].machine.published)
  }

  /// A session's durable record, if it exists.
  public func record(of session: String) -> SessionRecord? {
    sessionIndex[session].map { sessions[$0].machine.record }
  }

  // MARK: Events

  /// Brings back sessions from a store, before any connection: each resumes
  /// its phase at `now`, ticking on its original deadline.
  public func restore(_ stored: [StoredSession], now: Int64) {
    for session in stored where sessionIndex[session.id] == nil {
      let machine = SessionStateMachine(
        restoring: session.record, config: sessionConfig, now: now)
      let handle = insertSession(session.id, machine: machine, keyHash: session.keyHash)
      heap.set(handle.index, to: machine.nextDeadline)
      // A deadline that passed while the server was down finished the run
      // then; the store's row still says running until this is recorded.
      if config.recordsEvents, let deadline = session.record.finishedByItself(by: now) {
        sequencer.finishedByItself(
          session: session.id, record: session.record, at: deadline, config: sessionConfig)
      }
    }
  }

  /// How far past the session's own seq a client's `since` may move it: a
  /// client coming from another instance is at most a few seconds' patches
  /// ahead, and a larger claim (a lie, another epoch) must not push seq
  /// towards overflow for everyone.
  public static let maxSinceLead: UInt64 = 1000

  /// A viewer opened `/ws/<session>`; the session is created on first join.
  /// The caller has checked `SessionID.isValid`. `key` is the controller key
  /// the client presented, if any; `since` the last seq it saw (on this
  /// instance or another): its snapshot's seq is not lower. `peer` is the
  /// client's address budget (an IPv6 client's prefix, as the network layer
  /// names it), which the sessions it starts count against.
  /// `viewerOnly` (an event stream, which cannot send commands) is never
  /// shown a controller key.
  public func connect(
    session id: String, key: String? = nil, since: UInt64? = nil, peer: String, now: Int64,
    viewerOnly: Bool = false
  ) -> JoinOutcome {
    let handle: SessionHandle
    var createdKey: String?
    let address = addresses.hold(peer)
    if let existing = sessionIndex[id] {
      handle = existing
      // A viewer may come from another instance whose seq ran ahead between
      // commands (its own viewer counts): its snapshot must not go back.
      if let record = cluster.records[handle] {
        movingSeq(handle) { $0.skipSeq(pastPatchesSince: record, now: now) }
      }
    } else {
      guard let created = createSession(id, from: address, now: now) else {
        addresses.release(address)
        return .refused(.tooManySessions)
      }
      (handle, createdKey) = created
    }
    if let since, since <= sessions[handle].machine.seq + Self.maxSinceLead {
      if sessions[handle].loading {
        cluster.sinceWhileLoading[handle] = max(cluster.sinceWhileLoading[handle] ?? 0, since)
      } else {
        movingSeq(handle) { $0.raiseSeq(to: since) }
      }
    }
    var shownKey: String?
    if config.control == .key && viewerOnly {
      if let createdKey, !sessions[handle].loading { unclaimedKeys[handle] = createdKey }
    } else if config.control == .key {
      if let createdKey {
        // The first viewer of a new session becomes its controller.
        shownKey = createdKey
      } else if let unclaimed = unclaimedKeys.removeValue(forKey: handle) {
        shownKey = unclaimed
      } else if let key,
        sessions[handle].loading || keyHashes[Int(handle.index)]?.matches(key) == true
      {
        // While the session's key is still being fetched, `loaded` decides.
        shownKey = key
      }
    }
    let serial = nextSerial
    nextSerial &+= 1
    let connection = connections.insert(
      Connection(
        gate: CommandGate(config: config, now: now), session: handle,
        position: Int32(sessions[handle].viewers.count), serial: serial,
        isController: config.control == .open || shownKey != nil))
    let id = connection.index
    if let shownKey {
      keysToSend[id] = shownKey
      presentedKeys[id] = KeyHash(of: shownKey)
    }
    if createdKey != nil, sessions[handle].loading, let key { keysOfferedWhileLoading[id] = key }
    if Int(id) >= connectionAddresses.count {
      connectionAddresses.append(
        contentsOf: repeatElement(0, count: Int(id) - connectionAddresses.count + 1))
    }
    connectionAddresses[Int(id)] = address
    sessions[handle].viewers.append(id)
    localViewersChanged(handle)
    let count = shownViewers(handle)
    transition(handle) { $0.viewersChanged(to: count, now: now) }
    dirtyConnections.append(id)
    return .joined(id)
  }

  /// A new session, as a first join (or command) makes it, within the
  /// server's and the address's caps; in key mode with its new key.
  func createSession(
    _ id: String, from address: AddressTable.Index, now: Int64
  ) -> (handle: SessionHandle, key: String?)? {
    guard sessions.count < config.maxSessions,
      config.control == .open || addresses.created(by: address) < config.maxSessionsPerAddress
    else { return nil }
    var createdKey: String?
    var keyHash: KeyHash?
    if config.control == .key {
      let key = ControllerKey.generate().hex
      createdKey = key
      keyHash = KeyHash(of: key)
    }
    let machine = SessionStateMachine(config: sessionConfig, now: now)
    let handle = insertSession(id, machine: machine, keyHash: keyHash)
    if config.control == .key {
      createdFrom[handle] = address
      addresses.addCreated(address)
    }
    let load = sequencer.created(session: id, record: machine.record, keyHash: keyHash)
    sessions[handle].loading = load == .loading
    return (handle, createdKey)
  }

  /// A viewer's connection closed.
  public func disconnect(_ id: ConnectionID, now: Int64) {
    guard let closing = connections.remove(ConnectionHandle(id)) else { return }
    keysToSend[id] = nil
    presentedKeys[id] = nil
    keysOfferedWhileLoading[id] = nil
    pendingReplyBytes[id] = nil
    addresses.release(connectionAddresses[Int(id)])
    let handle = closing.session
    let moved = sessions[handle].viewers.removeLast()
    if moved != id {
      sessions[handle].viewers[Int(closing.position)] = moved
      connections[ConnectionHandle(moved)].position = closing.position
    }
    localViewersChanged(handle)
    let count = sessions[handle].viewers.count
    if count == 0 {
      // Nobody left to send to: give the buffers back until someone returns.
      sessions[handle].viewers = []
      sessions[handle].patchFrame = []
      sessions[handle].patchFrameFresh = false
      mergedFrames[handle] = nil
    }
    let shown = shownViewers(handle)
    transition(handle) { $0.viewersChanged(to: shown, now: now) }
  }

  /// The count viewers here are shown: theirs plus other instances'. With
  /// nobody here it is 0, so a session nobody here watches can be forgotten.
  func shownViewers(_ handle: SessionHandle) -> Int {
    let local = sessions[handle].viewers.count
    return local == 0 ? 0 : local + (cluster.remoteViewers[handle] ?? 0)
  }

  /// One complete text message from a viewer: admit it, then sequence it.
  /// Returns `.close` when the connection must be closed (a sustained flood).
  @discardableResult
  public func receive(_ text: [UInt8], from id: ConnectionID, now: Int64) -> ReceiveOutcome {
    let handle = ConnectionHandle(id)
    guard connections.contains(handle) else { return .handled }
    let isController = connections[handle].isController
    switch connections[handle].gate.admit(
      text, isController: isController, config: config, now: now)
    {
    case .close(let directive):
      return .close(directive)
    case .refuse(let error, let op):
      if let op { stats.countCommand(op, result: error.code.rawValue) }
      reply(.frame(WireCodec.error(error)), to: id)
    case .ping(let t):
      reply(.pong(t: t), to: id)
    case .auth(let key, let commandID):
      authenticate(
        PendingAuth(
          connection: handle, serial: connections[handle].serial, id: commandID, key: key),
        now: now)
    case .rotateKey(let commandID):
      let key = ControllerKey.generate().hex
      submit(
        PendingCommand(
          session: connections[handle].session, connection: handle,
          serial: connections[handle].serial, id: commandID, command: .rotateKey(KeyHash(of: key)),
          presented: presentedKeys[id], newKey: key, address: connectionAddresses[Int(id)]),
        now: now)
    case .command(let command, let commandID):
      submit(
        PendingCommand(
          session: connections[handle].session, connection: handle,
          serial: connections[handle].serial, id: commandID, command: command,
          presented: presentedKeys[id], address: connectionAddresses[Int(id)]), now: now)
    }
    return .handled
  }

  /// Sends a command on, or queues it behind the one in flight. Until it is
  /// finished, it holds its address, which may outlive its connection.
  func submit(_ pending: PendingCommand, now: Int64) {
    addresses.retain(pending.address)
    guard sessions[pending.session].holdsCommands else {
      dispatch(pending, now: now)
      return
    }
    guard waitingCommands[pending.session, default: []].count < Self.maxWaitingCommands else {
      finish(pending, .rejected(.busy), now: now)
      return
    }
    waitingCommands[pending.session, default: []].append(.command(pending))
  }

  /// An `auth`. While the session's key is still being fetched, the
  /// connection is taken at its word, as a `?key=` is: its commands wait with
  /// the session's and are checked again when sent on, and `loaded` decides.
  private func authenticate(_ auth: PendingAuth, now: Int64) {
    let session = connections[auth.connection].session
    guard config.control == .key, sessions[session].loading else {
      decide(auth, now: now)
      return
    }
    guard waitingCommands[session, default: []].count < Self.maxWaitingCommands else {
      stats.countCommand("auth", result: ErrorCode.busy.rawValue)
      reply(
        .frame(WireCodec.error(CommandError(.busy, Self.explain(.busy), id: auth.id))),
        to: auth.connection.index)
      return
    }
    waitingCommands[session, default: []].append(.auth(auth))
    grant(auth.connection.index, key: auth.key)
  }

  /// Answers an `auth` against the session's key as it is now: a match makes
  /// a controller, shown in a fresh snapshot; a controller stays one.
  private func decide(_ auth: PendingAuth, now: Int64) {
    guard connections.contains(auth.connection),
      connections[auth.connection].serial == auth.serial
    else { return }
    let id = auth.connection.index
    let session = connections[auth.connection].session
    if config.control == .key {
      let sessionKey = keyHash(of: session)
      let confirmed = presentedKeys[id].map { sessionKey?.matches($0) == true } ?? false
      if sessionKey?.matches(auth.key) == true {
        if !confirmed { grant(id, key: auth.key) }
      } else if !confirmed {
        demote(id)
        stats.countCommand("auth", result: ErrorCode.forbidden.rawValue)
        reply(
          .frame(
            WireCodec.error(
              CommandError(.forbidden, "the controller key was not accepted", id: auth.id))),
          to: id)
        return
      }
    }
    stats.countCommand("auth", result: "ok")
    reply(.frame(WireCodec.ack(id: auth.id, seq: sessions[session].machine.seq)), to: id)
  }

  /// Makes a connection a controller holding `key`, and says so in a fresh snapshot.
  func grant(_ id: ConnectionID, key: String) {
    let slot = ConnectionHandle(id)
    connections[slot].isController = true
    presentedKeys[id] = KeyHash(of: key)
    keysToSend[id] = key
    connections[slot].needsSnapshot = true
    dirtyConnections.append(id)
  }

  /// Makes a controller a viewer, and says so in a fresh snapshot.
  private func demote(_ id: ConnectionID) {
    let slot = ConnectionHandle(id)
    guard connections[slot].isController else { return }
    connections[slot].isController = false
    presentedKeys[id] = nil
    keysToSend[id] = nil
    connections[slot].needsSnapshot = true
    dirtyConnections.append(id)
  }

  /// A sequencer finished a command it answered `.pending` for. Called on the
  /// service thread; the command's patch goes out, then its ack or error.
  public func complete(_ ticket: Ticket, _ outcome: SequenceOutcome, now: Int64) {
    guard let pending = inFlight.removeValue(forKey: ticket) else { return }
    stats.commandsInFlight -= 1
    sessions[pending.session].commandInFlight = false
    sequencer.completed(ticket, outcome, now: now)
    finish(pending, outcome, now: now)
    dispatchWaiting(pending.session, now: now)
  }

  /// Moves a session's seq on without a patch; the encoded patch frame then
  /// carries a seq no longer the session's.
  func movingSeq(_ handle: SessionHandle, _ move: (inout SessionStateMachine) -> Void) {
    let before = sessions[handle].machine.seq
    move(&sessions[handle].machine)
    if sessions[handle].machine.seq != before { sessions[handle].patchFrameFresh = false }
  }

  /// Gives a session a new key. `holder`, the rotation's requester here,
  /// stays (or, had the change feed come first, becomes again) a controller.
  func rekey(
    _ handle: SessionHandle, to keyHash: KeyHash, holder: (id: ConnectionID, key: String)?
  ) {
    keyHashes[Int(handle.index)] = keyHash
    if let holder {
      if connections[ConnectionHandle(holder.id)].isController {
        presentedKeys[holder.id] = keyHash
        // A snapshot not yet written must show the key that now works.
        if keysToSend[holder.id] != nil { keysToSend[holder.id] = holder.key }
      } else {
        grant(holder.id, key: holder.key)
      }
    }
    demote(handle, unlessHolding: keyHash)
  }

  /// Demotes every controller of a session here whose key is not `keyHash`.
  func demote(_ handle: SessionHandle, unlessHolding keyHash: KeyHash) {
    for viewer in sessions[handle].viewers {
      guard let presented = presentedKeys[viewer], !keyHash.matches(presented) else { continue }
      demote(viewer)
    }
  }

  func dispatchWaiting(_ handle: SessionHandle, now: Int64) {
    while !sessions[handle].holdsCommands, var queue = waitingCommands[handle], !queue.isEmpty {
      let next = queue.removeFirst()
      waitingCommands[handle] = queue.isEmpty ? nil : queue
      switch next {
      case .command(let pending): dispatch(pending, now: now)
      case .auth(let auth): decide(auth, now: now)
      }
    }
  }

  /// Time passed: run every session whose deadline is due.
  public func advance(now: Int64) {
    // Collect first, so a session is advanced at most once per call.
    var due: [SessionHandle] = []
    while let index = heap.popDue(now: now) { due.append(SessionHandle(index)) }
    for handle in due where sessions.contains(handle) {
      if let tick = sessions[handle].machine.nextTickDue, tick <= now {
        stats.tickLatenessMs.observe(Double(now) - Double(tick))
      }
      let finish = config.recordsEvents ? finishDue(handle, now: now) : nil
      transition(handle) { $0.advance(now: now) }
      if let finish {
        sequencer.finishedByItself(
          session: sessions[handle].id, record: finish.record, at: finish.deadline,
          config: sessionConfig)
      }
    }
  }

  /// A record durable only after its own deadline (a commit slower than the
  /// run's last second) is adopted finished, and no timer will see that
  /// finish: it is recorded here instead, once, as `advance` would have.
  private func recordFinishOnAdoption(_ handle: SessionHandle, _ record: SessionRecord, now: Int64)
  {
    guard config.recordsEvents, sessions[handle].machine.revision == record.revision,
      let deadline = record.finishedByItself(by: now)
    else { return }
    sequencer.finishedByItself(
      session: sessions[handle].id, record: record, at: deadline, config: sessionConfig)
  }

  /// The finish `advance(now:)` is about to make of a run or wait: the
  /// record it finishes from and its deadline. The event itself is the
  /// sequencer's to build, only where it records one.
  private func finishDue(
    _ handle: SessionHandle, now: Int64
  ) -> (record: SessionRecord, deadline: Int64)? {
    let phase = sessions[handle].machine.phase
    guard phase == .running || phase == .waiting || phase == .overtime else { return nil }
    let record = sessions[handle].machine.record
    return record.finishedByItself(by: now).map { (record, $0) }
  }

  // MARK: The command path

  private func dispatch(_ pending: PendingCommand, now: Int64) {
    var pending = pending
    let ticket = Ticket(nextTicket)
    nextTicket += 1
    let session = sessions[pending.session]
    let sessionKey = keyHash(of: pending.session)
    // Authorised again now, not only on arrival: since then the key may have
    // been rotated, or a cluster found the session's key to be another.
    let presented =
      pending.request == nil && connections.contains(pending.connection)
        && connections[pending.connection].serial == pending.serial
      ? presentedKeys[pending.connection.index] : pending.presented
    if config.control == .key, !pending.byToken {
      guard let presented, sessionKey?.matches(presented) == true else {
        finish(pending, .rejected(.forbidden), now: now)
        return
      }
    }
    // A start that may begin a run holds a place in its address's count
    // until it completes, so starts in flight cannot overshoot the cap.
    if pending.command.takesAddressPlace, !session.machine.phase.holdsAddressPlace {
      guard addresses.sessions(of: pending.address) < config.maxSessionsPerAddress else {
        finish(
          pending, .rejected(.tooManySessions),
          message:
            "one address may run at most \(config.maxSessionsPerAddress) sessions at once", now: now
        )
        return
      }
      addresses.addSession(pending.address)
      pending.holdsAddressPlace = true
    }
    let request = SequenceRequest(
      ticket: ticket, session: session.id, command: pending.command,
      current: session.machine.record, keyHash: sessionKey, presentedKeyHash: presented,
      now: now, authorisedByToken: pending.byToken, idempotencyKey: pending.idempotencyKey,
      address: addresses.name(of: pending.address),
      eventConfig: config.recordsEvents ? sessionConfig : nil)
    switch sequencer.sequence(request) {
    case .done(let outcome):
      finish(pending, outcome, now: now)
    case .pending:
      inFlight[ticket] = pending
      sessions[pending.session].commandInFlight = true
      stats.commandsInFlight += 1
    }
  }

  /// Applies a sequenced command's outcome: the patch first, then the reply.
  private func finish(
    _ pending: PendingCommand, _ outcome: SequenceOutcome, message: String? = nil, now: Int64
  ) {
    let op = pending.command.op.rawValue
    var answer: [UInt8]
    var code: ErrorCode?
    var placeKept = false
    switch outcome {
    case .applied(let record):
      transition(pending.session) { $0.adopt(record, now: now) }
      recordFinishOnAdoption(pending.session, record, now: now)
      // The place a start held becomes its run's, if a run began.
      if pending.holdsAddressPlace, sessions[pending.session].machine.phase.holdsAddressPlace,
        sessions[pending.session].startedFrom == Session.noAddress
      {
        sessions[pending.session].startedFrom = pending.address
        placeKept = true
      }
      if case .rotateKey(let keyHash) = pending.command, let key = pending.newKey {
        let alive =
          pending.request == nil && connections.contains(pending.connection)
          && connections[pending.connection].serial == pending.serial
        rekey(pending.session, to: keyHash, holder: alive ? (pending.connection.index, key) : nil)
      }
      stats.countCommand(op, result: "ok")
      let machine = sessions[pending.session].machine
      answer =
        pending.request == nil
        ? WireCodec.ack(id: pending.id, seq: machine.seq, key: pending.newKey)
        : WireCodec.ack(
          id: pending.id, seq: machine.seq, key: pending.newKey, state: machine.published)
    case .rejected(let rejection):
      code = rejection
      stats.countCommand(op, result: rejection.rawValue)
      // A sequencer's only rate_limited is a new key past the idempotency limits.
      let explained =
        rejection == .rateLimited && pending.idempotencyKey != nil
        ? IdempotencyLimits.refusal : Self.explain(rejection)
      answer = WireCodec.error(CommandError(rejection, message ?? explained, id: pending.id))
    case .unavailable(let message):
      code = .unavailable
      stats.countCommand(op, result: ErrorCode.unavailable.rawValue)
      answer = WireCodec.error(CommandError(.unavailable, message, id: pending.id))
    case .replayed(let first):
      stats.countCommand(op, result: "replayed")
      if case .rejected(let rejection) = first { code = rejection }
      answer = []
    }
    if pending.idempotencyKey != nil {
      answer = keyedAnswer(outcome, id: pending.id) ?? answer
    }
    if pending.holdsAddressPlace && !placeKept { addresses.removeSession(pending.address) }
    addresses.release(pending.address)
    if let request = pending.request {
      requestAnswers.append((request, RequestAnswer(code: code, body: answer)))
      return
    }
    // The commanding connection may have gone, and its slot been reused.
    guard connections.contains(pending.connection),
      connections[pending.connection].serial == pending.serial
    else { return }
    reply(.frame(answer), to: pending.connection.index)
  }

  func keyHash(of handle: SessionHandle) -> KeyHash? {
    Int(handle.index) < keyHashes.count ? keyHashes[Int(handle.index)] : nil
  }

  // MARK: Internals

  static func explain(_ code: ErrorCode) -> String {
    switch code {
    case .busy: "this session is already counting down or waiting"
    case .notRunning: "no countdown is running in this session"
    case .notPaused: "the countdown in this session is not paused"
    case .notWaiting: "nothing is waiting in this session"
    case .badRequest: "the command's fields are out of range"
    case .badJSON: "the message is not valid JSON"
    case .forbidden: "only a controller of this session may do that"
    case .rateLimited: "too many commands"
    case .tooManySessions: "the server, or this address, has as many sessions as it allows"
    case .unavailable: "the server cannot store commands right now; try again"
    case .outcomeUnknown:
      "the server lost track of this command and cannot tell whether it applied; "
        + "look at the countdown before you try again"
    }
  }

  /// The error a refused join is sent before its connection closes with 1013.
  public func refusalFrame(_ code: ErrorCode) -> [UInt8] {
    WireCodec.error(CommandError(code, Self.explain(code)))
  }

  func reply(_ reply: Reply, to id: ConnectionID) {
    let queued = pendingReplyBytes[id] ?? 0
    guard queued + reply.byteCount <= Self.maxPendingReplyBytes else {
      stats.repliesDropped += 1
      return
    }
    pendingReplyBytes[id] = queued + reply.byteCount
    connections[ConnectionHandle(id)].replies.append(reply)
    dirtyConnections.append(id)
  }

  /// The oldest reply waiting for a connection that has one.
  func takeReply(_ slot: ConnectionHandle) -> Reply {
    let reply = connections[slot].replies.removeFirst()
    if connections[slot].replies.isEmpty {
      // A burst's buffer goes with it: most viewers never have a reply waiting.
      connections[slot].replies = []
      pendingReplyBytes[slot.index] = nil
    } else {
      pendingReplyBytes[slot.index, default: 0] -= reply.byteCount
    }
    return reply
  }

  /// Runs one event on a session's machine, keeps the phase counts true, and
  /// acts on what the machine says.
  func transition(
    _ handle: SessionHandle, _ event: (inout SessionStateMachine) -> SessionStateMachine.Action
  ) {
    let before = sessions[handle].machine.phase
    let action = event(&sessions[handle].machine)
    let after = sessions[handle].machine.phase
    if before != after {
      stats.sessionsByPhase[before.index] -= 1
      stats.sessionsByPhase[after.index] += 1
      if !after.holdsAddressPlace { releaseAddressPlace(handle) }
    }
    switch action {
    case .broadcast(let patch, let next):
      observer?.hub(published: patch, session: sessions[handle].id)
      if !sessions[handle].dirty {
        sessions[handle].dirty = true
        dirtySessions.append(handle)
      }
      sessions[handle].patchFrameFresh = false
      heap.set(handle.index, to: next)
    case .schedule(let next):
      heap.set(handle.index, to: next)
    case .expire:
      if !forget(handle) {
        // A command is still with the sequencer: look again a second on.
        heap.set(handle.index, to: (sessions[handle].machine.nextDeadline ?? 0) + 1000)
      }
    case .reject:
      break
    }
  }

  private func insertSession(
    _ id: String, machine: SessionStateMachine, keyHash: KeyHash?
  ) -> SessionHandle {
    let handle = sessions.insert(Session(id: id, machine: machine))
    if config.control == .key {
      let slot = Int(handle.index)
      if slot >= keyHashes.count {
        keyHashes.append(contentsOf: repeatElement(nil, count: slot - keyHashes.count + 1))
      }
      keyHashes[slot] = keyHash
    }
    sessionIndex[id] = handle
    sortedIDs.insert(handle, id: id) { sessions[$0].id }
    stats.sessionsCreated += 1
    stats.sessionsByPhase[machine.phase.index] += 1
    return handle
  }

  /// A session no longer running or paused stops counting against the address that started it.
  private func releaseAddressPlace(_ handle: SessionHandle) {
    let address = sessions[handle].startedFrom
    guard address != Session.noAddress else { return }
    sessions[handle].startedFrom = Session.noAddress
    addresses.removeSession(address)
  }

  private func forget(_ handle: SessionHandle) -> Bool {
    let session = sessions[handle]
    guard session.viewers.isEmpty, !session.holdsCommands else { return false }
    releaseAddressPlace(handle)
    if let address = createdFrom.removeValue(forKey: handle) { addresses.removeCreated(address) }
    heap.set(handle.index, to: nil)
    sessionIndex[session.id] = nil
    sortedIDs.remove(handle, id: session.id) { sessions[$0].id }
    _ = sessions.remove(handle)
    mergedFrames[handle] = nil
    unclaimedKeys[handle] = nil
    cluster.forget(handle)
    if Int(handle.index) < keyHashes.count { keyHashes[Int(handle.index)] = nil }
    stats.sessionsForgotten += 1
    stats.sessionsByPhase[session.machine.phase.index] -= 1
    sequencer.forgot(session: session.id)
    observer?.hub(forgot: session.id)
    return true
  }
}

extension Hub.Reply {
  /// What the reply costs its connection's budget: the memory it holds (an
  /// array's buffer and header, its slot in the queue), or for a pong, the
  /// frame it will be.
  var byteCount: Int {
    switch self {
    case .frame(let bytes): bytes.capacity + 64
    case .pong(let t): t.utf8.count + 64
    }
  }
}

extension Phase {
  /// A run (running, paused or in overtime) or a wait counts against the
  /// address that started it.
  var holdsAddressPlace: Bool {
    self == .running || self == .paused || self == .waiting || self == .overtime
  }

  /// Position in `Phase.allCases`, for per-phase counters.
  var index: Int {
    switch self {
    case .idle: 0
    case .running: 1
    case .paused: 2
    case .finished: 3
    case .waiting: 4
    case .overtime: 5
    }
  }
}
