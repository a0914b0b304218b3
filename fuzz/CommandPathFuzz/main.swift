// libFuzzer entry point for the whole command path, structure-aware.
//
// Built by `FUZZ_TARGET=path scripts/fuzz` together with
// Sources/CountdownCore/*.swift into one module (so no `import CountdownCore`),
// with `-parse-as-library` so that libFuzzer's own `main` drives it. See
// fuzz/README.md.
//
// DecoderFuzz feeds bytes as frames; this target reads its input as a
// program instead, so that mutations change values and sequences rather
// than JSON syntax. Byte 0 picks the hub: bit 0 `--control key`, bit 1 a
// generous rate limit, bit 2 a store that holds every write until the
// program commits it (as SQLite does until its group commit), bit 3 webhooks
// on (each change and finish builds its event). Then, until the
// input or the step budget runs out, one action per step (byte % 9):
//
//   0 join     session (a, b or c), the key it presents, the `since` it claims
//   1 leave    a connection
//   2, 3 send  a command as JSON, its values drawn from the edge tables below
//   4 time     a step: milliseconds, seconds, hours or days
//   5 drain    every connection's frames, checking them against its model
//   6 raw      arbitrary bytes from the input, as one frame
//   7 deadline time moves to the hub's next wake-up or a session's deadline, ±1 ms
//   8 commit   the oldest held write (store mode): durable, or `unavailable`
//
// Invariants, checked after every step (a broken one is a `fatalError`):
//   - no trap (Swift's own overflow and bounds checks, libFuzzer catches them);
//   - each session's record has no `damage`, and its seq never goes back;
//   - on every connection, frames come as one snapshot and then patches whose
//     seq strictly increases; the snapshot merged with every patch since
//     equals the session's published state once the connection is drained;
//   - an acked command changed the record by exactly one revision, to what
//     the command rules give, and the record still holds it when the ack is read;
//     a refused one changed nothing. With the store, a record changes only
//     when a write is committed, and then to exactly the record written; each
//     held write is traced back to its sender (at once, or from the queue
//     behind the command in flight), so an ack must name a committed write
//     and a failed one is answered with an error.

/// Fails the run with a message libFuzzer prints next to the crash.
private func check(_ condition: Bool, _ message: @autoclosure () -> String) {
  if !condition { fatalError("invariant broken: \(message())") }
}

/// The fuzzer's bytes, read front to back; 0 once they run out.
private struct Program {
  let bytes: [UInt8]
  var index = 0
  var isEmpty: Bool { index >= bytes.count }

  mutating func byte() -> UInt8 {
    guard index < bytes.count else { return 0 }
    defer { index += 1 }
    return bytes[index]
  }

  mutating func pick<T>(_ table: [T]) -> T { table[Int(byte()) % table.count] }

  mutating func text(maxLength: Int) -> [UInt8] {
    let count = min(Int(byte()) % (maxLength + 1), bytes.count - index)
    defer { index += count }
    return Array(bytes[index..<(index + count)])
  }
}

/// JSON number (and not-a-number) literals at the edges of what the server
/// must refuse or take: Int64 and UInt64 bounds, doubles past both, -0,
/// fractions and exponents, and values of the wrong type.
private let edgeLiterals: [String] = [
  "-9223372036854775808", "9223372036854775807", "9223372036854775808", "-9223372036854775809",
  "18446744073709551615", "18446744073709551616", "1e308", "-1e308", "1e400", "-1e400", "-0", "0",
  "0.0", "-0.0", "1", "-1", "1.5", "1e2", "1E-2", "2147483647", "2147483648", "-2147483649",
  String(repeating: "9", count: 40), "\"5\"", "null", "true", "[]", "{}", "5e-324",
]

/// Range bounds of the contract, each with its neighbours.
private let boundLiterals: [Int64] = {
  var values: [Int64] = []
  for bound in [
    Int64(SessionRecord.secondsRange.lowerBound), Int64(SessionRecord.secondsRange.upperBound),
    Int64(SessionRecord.adjustRange.lowerBound), Int64(SessionRecord.adjustRange.upperBound),
    SessionRecord.epochMsRange.lowerBound, SessionRecord.epochMsRange.upperBound,
    Int64(SessionRecord.durationRange.upperBound),
  ] {
    values += [bound - 1, bound, bound + 1]
  }
  return values
}()

/// Offsets from now, for deadlines: the until-ahead bounds ±1, the past, the far future.
private let nowOffsets: [Int64] = [
  0, -1, 1, 999, 1000, 1001, 60_000, SessionRecord.aheadMsRange.upperBound - 1,
  SessionRecord.aheadMsRange.upperBound, SessionRecord.aheadMsRange.upperBound + 1,
  -SessionRecord.aheadMsRange.upperBound, -1_000_000_000_000, 1_000_000_000_000,
]

private let labels: [String] = [
  "Done", "倒計時結束", "a\u{0}b", "\u{1F}", "x\u{7F}", "tab\there", "\n", "😀",
  String(repeating: "x", count: SessionConfig.maxFinishedLabelLength),
  String(repeating: "é", count: SessionConfig.maxFinishedLabelLength + 1), "",
  String(repeating: "\u{301}", count: 200),
]

private let sessionNames = ["a", "b", "c"]
private let startOfTime: Int64 = 1_700_000_000_000
/// The fuzzer's clock stays below this, so a step never leaves the range the
/// server's own clock could be in.
private let endOfTime: Int64 = 32_503_680_000_000  // year 3000

/// What one connection has been sent, as a page would keep it.
private struct Viewer {
  let id: ConnectionID
  /// Unique over the run, unlike `id`, which the hub reuses.
  let serial: Int
  let session: String
  /// The snapshot's state with every patch since merged in (RFC 7396).
  var model: [String: JSONValue]?
  var seq: UInt64 = 0
  /// Ids of commands the hub applied, with the revision each produced.
  var applied: [String: UInt64] = [:]
  /// Ids sent more than once on this connection (an edge id, a raw frame's):
  /// their acks and errors cannot be told apart, so they are not checked.
  var ambiguous: Set<String> = []
  var sent: Set<String> = []
}

/// Holds every write that carries a ticket until the program commits it.
private final class HeldStore: SessionStore {
  var held: [(session: String, record: SessionRecord, ticket: Ticket)] = []

  func write(_ write: StoreWrite) {
    if case .save(let session, let record, _, let ticket?, _) = write {
      held.append((session, record, ticket))
    }
  }
}

private final class World {
  let hub: Hub
  let control: ControlMode
  let store: HeldStore?
  var now = startOfTime
  var viewers: [Viewer] = []
  /// Controller keys learned from snapshots, by session.
  var keys: [String: String] = [:]
  /// The highest seq any viewer of the session was sent, while it lives.
  var maxSeq: [String: UInt64] = [:]
  var nextID = 1
  var nextSerial = 0
  /// Store mode: who sent each held write's command, by ticket, and the
  /// commands queued behind one in flight, by session, in order.
  var inFlight: [UInt64: Sender] = [:]
  var waiting: [String: [Sender]] = [:]

  struct Sender {
    var serial: Int
    var id: String?
  }

  init(flags: UInt8) {
    control = flags & 1 == 0 ? .open : .key
    store = flags & 4 == 0 ? nil : HeldStore()
    // With the store, a refusal the hub does not count (the rate limit's)
    // would be taken for a queued command: the limit is then out of reach.
    let rate: Double = flags & 6 == 0 ? 20 : 10_000
    // Webhooks on: every change and every finish builds its event on the way.
    hub = Hub(
      config: HubConfig(commandsPerSecond: rate, control: control, recordsEvents: flags & 8 != 0),
      epoch: "fuzz", sequencer: LocalSequencer(store: store))
  }

  /// Commands the hub has answered or refused, counted as its metrics are.
  var commandsCounted: UInt64 {
    hub.stats.commands.values.reduce(0) { $0 + $1.values.reduce(0, +) }
  }

  func viewerIndex(serial: Int) -> Int? { viewers.firstIndex { $0.serial == serial } }

  /// The oldest held write becomes durable, or fails.
  func commit(_ program: inout Program) {
    guard let store, !store.held.isEmpty else { return }
    let write = store.held.removeFirst()
    let before = hub.record(of: write.session)
    let sender = inFlight.removeValue(forKey: write.ticket.value)
    let counted = commandsCounted
    let held = store.held.count
    let fails = program.byte() % 4 == 3
    hub.complete(write.ticket, fails ? .unavailable("fuzz") : .applied(write.record), now: now)
    // The commands queued behind it go on: those refused at once are
    // counted, and the first one the rules take is held in its turn.
    var queue = waiting[write.session] ?? []
    let refused = Int(commandsCounted - counted) - 1
    check(refused >= 0 && refused <= queue.count, "\(refused) refusals from \(queue.count) queued")
    queue.removeFirst(refused)
    if store.held.count > held, let last = store.held.last {
      check(!queue.isEmpty, "a write held for no queued command")
      inFlight[last.ticket.value] = queue.removeFirst()
    }
    waiting[write.session] = queue.isEmpty ? nil : queue
    if fails {
      check(hub.record(of: write.session) == before, "a failed write changed the record")
      return
    }
    guard let after = hub.record(of: write.session) else {
      fatalError("a session with a command in flight is gone")
    }
    if let sender, let id = sender.id, let index = viewerIndex(serial: sender.serial) {
      viewers[index].applied[id] = write.record.revision
    }
    var expected = write.record
    expected.seq = after.seq
    if expected.phase == .idle { expected.finishedLabel = after.finishedLabel }
    // Adopted at `now`: a run whose deadline passed while the write was held is finished.
    expected = expected.settled(at: now)
    check(after == expected, "committed \(write.record), the record is \(after)")
  }

  // MARK: Actions

  func join(_ program: inout Program) {
    let session = program.pick(sessionNames)
    let key: String? =
      switch program.byte() % 5 {
      case 0: nil
      case 1: keys[session]
      case 2: "wrong"
      case 3: ""
      default: String(repeating: "k", count: 4096)
      }
    let since: UInt64? =
      switch program.byte() % 5 {
      case 0: nil
      case 1: maxSeq[session]
      case 2: (maxSeq[session] ?? 0) + 1000
      case 3: UInt64.max
      default: SessionRecord.maxCounter
      }
    // A few addresses, so the per-address caps are reached from more than one.
    let peer = "10.0.0.\(nextSerial % 3)"
    switch hub.connect(session: session, key: key, since: since, peer: peer, now: now) {
    case .joined(let id):
      check(!viewers.contains { $0.id == id }, "connection id \(id) handed out twice")
      viewers.append(Viewer(id: id, serial: nextSerial, session: session))
      nextSerial += 1
    case .refused(let code):
      check(code == .tooManySessions, "join refused with \(code)")
    }
  }

  func leave(_ program: inout Program) {
    guard !viewers.isEmpty else { return }
    let viewer = viewers.remove(at: Int(program.byte()) % viewers.count)
    hub.disconnect(viewer.id, now: now)
  }

  /// One of the ops as a JSON object, with values from the tables.
  func command(_ program: inout Program) -> [UInt8] {
    var fields: [(String, String)] = []
    func quoted(_ text: String) -> String {
      var writer = JSONWriter()
      writer.string(text)
      return String(decoding: writer.bytes, as: UTF8.self)
    }
    switch program.byte() % 15 {
    case 12:
      fields.append(("op", quoted("stop")))
    case 13:
      fields.append(("op", quoted("message")))
      switch program.byte() % 4 {
      case 0: fields.append(("text", "null"))
      case 1: fields.append(("text", value(&program)))
      case 2: break
      default:
        fields.append(
          ("text", quoted(String(decoding: program.text(maxLength: 200), as: UTF8.self))))
      }
    case 14:
      fields.append(("op", quoted("blackout")))
      fields.append(("on", program.pick(["true", "false", "null", "1", "\"on\""])))
    case 10:
      fields.append(("op", quoted("wait")))
      let shape = program.byte()
      if shape & 1 == 1 { fields.append(("timeoutSeconds", value(&program))) }
      if shape & 2 == 2 { fields.append(("label", quoted(program.pick(labels)))) }
      if shape & 4 == 4 { fields.append(("timeoutLabel", quoted(program.pick(labels)))) }
    case 11:
      fields.append(("op", quoted(program.byte() % 2 == 0 ? "done" : "fail")))
      if program.byte() % 2 == 1 { fields.append(("label", quoted(program.pick(labels)))) }
    case 0:
      fields.append(("op", quoted("start")))
      switch program.byte() % 4 {
      case 0: break
      case 1: fields.append(("seconds", value(&program)))
      case 2: fields.append(("until", value(&program)))
      default:
        fields.append(("seconds", value(&program)))
        fields.append(("until", value(&program)))
      }
      let label = program.byte()
      if label % 2 == 1 { fields.append(("finishedLabel", quoted(program.pick(labels)))) }
      // A run's options, from the same tables: in range, out, and of the wrong type.
      if label & 2 == 2 {
        fields.append(("overtime", program.pick(["true", "false", "1", "null"])))
      }
      if label & 4 == 4 { fields.append(("warnAtSeconds", value(&program))) }
      if label & 8 == 8 { fields.append(("dangerAtSeconds", value(&program))) }
    case 1: fields.append(("op", quoted("cancel")))
    case 2: fields.append(("op", quoted("pause")))
    case 3: fields.append(("op", quoted("resume")))
    case 4:
      fields.append(("op", quoted("adjust")))
      fields.append(("seconds", value(&program)))
    case 5:
      fields.append(("op", quoted("ping")))
      fields.append(("t", value(&program)))
    case 6:
      fields.append(("op", quoted(String(decoding: program.text(maxLength: 200), as: UTF8.self))))
    case 7:
      // A key given twice: the parser refuses it and names the key.
      let key = quoted(String(decoding: program.text(maxLength: 200), as: UTF8.self))
      fields.append(("op", quoted("start")))
      fields.append((String(key.dropFirst().dropLast()), "1"))
      fields.append((String(key.dropFirst().dropLast()), "2"))
    case 8:
      if program.byte() % 2 == 0 {
        fields.append(("op", quoted("rotate_key")))
      } else {
        // A key presented in the first message instead of the URL.
        fields.append(("op", quoted("auth")))
        let known = keys[sessionNames[Int(program.byte()) % sessionNames.count]] ?? "none"
        fields.append(("key", quoted(program.pick([known, "wrong", "", known + "x"]))))
      }
    default:
      fields.append(("op", quoted("adjust")))
      fields.append(
        ("seconds", quoted(String(decoding: program.text(maxLength: 40), as: UTF8.self))))
    }
    switch program.byte() % 4 {
    case 0, 1:
      fields.append(("id", String(nextID)))
      nextID += 1
    case 2: break
    default: fields.append(("id", program.pick(edgeLiterals)))
    }
    let body = fields.map { "\"\($0.0)\":\($0.1)" }.joined(separator: ",")
    return Array("{\(body)}".utf8)
  }

  func value(_ program: inout Program) -> String {
    switch program.byte() % 4 {
    case 0: return program.pick(edgeLiterals)
    case 1: return String(now &+ program.pick(nowOffsets))
    case 2: return String(program.pick(boundLiterals))
    default: return String(Int(program.byte()) - 128)
    }
  }

  func send(_ frame: [UInt8], _ program: inout Program) {
    if viewers.isEmpty { join(&program) }
    guard !viewers.isEmpty else { return }
    let index = Int(program.byte()) % viewers.count
    let viewer = viewers[index]
    let before = hub.record(of: viewer.session)
    let counted = commandsCounted
    let held = store?.held.count ?? 0
    let outcome = hub.receive(frame, from: viewer.id, now: now)
    if case .close = outcome {
      // A flood: the server closes the socket, and the hub hears of it.
      hub.disconnect(viewer.id, now: now)
      viewers.remove(at: index)
      return
    }
    let after = hub.record(of: viewer.session)
    guard let before, let after else {
      fatalError("a session with a viewer is gone: \(viewer.session)")
    }
    let decoded = WireCodec.decode(frame, defaultSeconds: hub.config.session.defaultSeconds)
    let id: String? =
      switch decoded {
      case .success(let message): message.id.map { String(decoding: $0.json, as: UTF8.self) }
      case .failure(let error): error.id.map { String(decoding: $0.json, as: UTF8.self) }
      }
    if let id, !viewers[index].sent.insert(id).inserted {
      viewers[index].ambiguous.insert(id)
    }
    if case .success(let message) = decoded, message.request.changesNothing {
      // A ping or an auth is answered without a record: its ack is not checked.
      if let id { viewers[index].ambiguous.insert(id) }
      check(after == before, "a \(message.request) changed the record")
      return
    }
    if let store {
      // Nothing is applied before its write is committed, where its ack is checked.
      check(after.revision == before.revision, "a held command changed the record")
      guard case .success = decoded else { return }
      let sender = Sender(serial: viewer.serial, id: id)
      if store.held.count > held, let last = store.held.last {
        inFlight[last.ticket.value] = sender
      } else if commandsCounted == counted {
        // Neither answered nor held: queued behind the command in flight.
        waiting[viewer.session, default: []].append(sender)
      }
      return
    }
    if after.revision == before.revision {
      check(
        after.phase == before.phase && after.endsAt == before.endsAt
          && after.remainingMs == before.remainingMs && after.duration == before.duration,
        "a command that was not applied changed the record: \(before) -> \(after)")
      return
    }
    check(after.revision == before.revision + 1, "one command, many revisions")
    guard case .success(let message) = decoded else {
      fatalError("the record changed for a frame that is no command: \(frame)")
    }
    if let id { viewers[index].applied[id] = after.revision }
    guard let command = sessionCommand(message.request) else { return }
    guard case .success(var expected) = before.applying(command, at: now) else {
      fatalError("the record changed for a command the rules refuse: \(command)")
    }
    expected.seq = after.seq
    // An idle session shows no run's label: the machine's record drops it,
    // where the rules (and Redis's function) leave the cancelled run's.
    if expected.phase == .idle { expected.finishedLabel = after.finishedLabel }
    check(after == expected, "record \(after) is not what \(command) gives: \(expected)")
    switch command {
    case .start: check(after.phase == .running, "a started session is \(after.phase)")
    case .cancel: check(after.phase == .idle, "a cancelled session is \(after.phase)")
    case .pause: check(after.phase == .paused, "a paused session is \(after.phase)")
    case .resume: check(after.phase == .running, "a resumed session is \(after.phase)")
    case .wait: check(after.phase == .waiting, "a session told to wait is \(after.phase)")
    case .done: check(after.outcome == .done, "a done session is \(after.status)")
    case .fail: check(after.outcome == .failed, "a failed session is \(after.status)")
    case .stop: check(after.outcome == .stopped && after.overMs != nil, "a stopped \(after.status)")
    case .message(let text):
      check(after.message == text, "message \(String(describing: after.message))")
    case .blackout(let on): check(after.blackout == on, "blackout \(after.blackout)")
    case .adjust, .rotateKey: break
    }
  }

  /// The command the hub sequences for a decoded request; nil for one this
  /// fuzzer does not model (a rotation, whose key the hub makes), whose
  /// record is then checked only for damage.
  func sessionCommand(_ request: ClientRequest) -> SessionCommand? {
    guard case .command(let command) = request else { return nil }
    return command
  }

  func step(_ program: inout Program) {
    let amount = Int64(program.byte())
    let delta: Int64 =
      switch program.byte() % 4 {
      case 0: amount
      case 1: amount * 1000
      case 2: amount * 3_600_000
      default: amount * 86_400_000
      }
    moveTo(now + delta)
  }

  func toDeadline(_ program: inout Program) {
    var targets: [Int64] = []
    if let wake = hub.nextWakeup { targets.append(wake) }
    for name in sessionNames {
      if let endsAt = hub.record(of: name)?.endsAt { targets.append(endsAt) }
    }
    guard !targets.isEmpty else { return }
    let target = min(program.pick(targets), endOfTime)
    moveTo(target + Int64(program.byte() % 3) - 1)
  }

  func moveTo(_ time: Int64) {
    now = min(max(now, time), endOfTime)
    hub.advance(now: now)
  }

  // MARK: Frames

  func drainAll() {
    for index in viewers.indices { drain(index) }
  }

  func drain(_ index: Int) {
    var written = 0
    while let frame = hub.nextFrame(for: viewers[index].id, now: now) {
      read(frame, into: index)
      written += 1
      check(written <= Hub.maxPendingReplyBytes / 16 + 8, "nextFrame never returned nil")
    }
    check(!hub.hasPending(viewers[index].id), "hasPending after nextFrame returned nil")
    let session = viewers[index].session
    guard let (seq, state) = hub.state(of: session) else {
      fatalError("a session with a viewer is gone: \(session)")
    }
    check(viewers[index].seq == seq, "a drained viewer is at \(viewers[index].seq), not \(seq)")
    check(
      viewers[index].model == Self.stateObject(state),
      "viewer's merged state \(String(describing: viewers[index].model)) is not \(state)")
  }

  /// The state as a viewer holds it: the snapshot's `state` object, with
  /// nulls dropped, as a merge patch of a null removes the field.
  static func stateObject(_ state: CountdownState) -> [String: JSONValue] {
    let frame = WireCodec.snapshot(session: "s", epoch: "e", seq: 0, serverTime: 0, state: state)
    guard case .object(let fields)? = try? JSONParser.parse(frame),
      case .object(let object)? = fields["state"]
    else { fatalError("the snapshot encoder wrote no state object") }
    return object.filter { $0.value != .null }
  }

  func read(_ frame: [UInt8], into index: Int) {
    let text = String(decoding: frame, as: UTF8.self)
    guard case .object(let fields)? = try? JSONParser.parse(frame, maxDepth: 64),
      case .string(let type)? = fields["type"]
    else { fatalError("the server wrote a frame that is no JSON object with a type: \(text)") }
    let session = viewers[index].session
    func seqField() -> UInt64 {
      guard case .number(let literal)? = fields["seq"], let seq = UInt64(literal) else {
        fatalError("a frame without an integer seq: \(text)")
      }
      check(seq <= SessionRecord.maxCounter, "seq past what a page's number holds: \(text)")
      return seq
    }
    switch type {
    case "snapshot":
      // A fresh one follows when the connection's role changes (auth, rotate_key).
      guard case .object(let state)? = fields["state"] else { fatalError("no state: \(text)") }
      let seq = seqField()
      check(seq >= maxSeq[session] ?? 0, "a snapshot's seq \(seq) went back: \(text)")
      check(seq >= viewers[index].seq, "a fresh snapshot's seq \(seq) went back: \(text)")
      viewers[index].model = state.filter { $0.value != .null }
      viewers[index].seq = seq
      maxSeq[session] = max(maxSeq[session] ?? 0, seq)
      if case .string(let key)? = fields["key"] { keys[session] = key }
    case "patch":
      check(viewers[index].model != nil, "a patch before the snapshot: \(text)")
      guard case .object(let patch)? = fields["patch"] else { fatalError("no patch: \(text)") }
      let seq = seqField()
      check(seq > viewers[index].seq, "patch seq \(seq) after \(viewers[index].seq): \(text)")
      for (key, value) in patch {
        viewers[index].model![key] = value == .null ? nil : value
      }
      viewers[index].seq = seq
      maxSeq[session] = max(maxSeq[session] ?? 0, seq)
    case "ack":
      check(viewers[index].model != nil, "an ack before the snapshot: \(text)")
      if case .string(let key)? = fields["key"] { keys[session] = key }
      if let id = idField(fields, text), !viewers[index].ambiguous.contains(id) {
        guard let revision = viewers[index].applied[id] else {
          fatalError("an ack for a command that changed nothing: \(text)")
        }
        let record = hub.record(of: session)
        check((record?.revision ?? 0) >= revision, "an acked change is not in the record: \(text)")
      }
      check(seqField() <= viewers[index].seq, "an ack ahead of its patch: \(text)")
    case "error":
      check(viewers[index].model != nil, "an error before the snapshot: \(text)")
      if let id = idField(fields, text), !viewers[index].ambiguous.contains(id) {
        check(viewers[index].applied[id] == nil, "an error for an applied command: \(text)")
      }
      if case .string(let message)? = fields["message"] {
        check(message.unicodeScalars.count <= 160, "an error echoes too much: \(text)")
      }
    case "pong":
      guard case .number = fields["t"] else { fatalError("a pong without a numeric t: \(text)") }
    default:
      fatalError("unknown frame type: \(text)")
    }
  }

  /// The id of an ack or error as the fuzzer wrote it, nil for null.
  func idField(_ fields: [String: JSONValue], _ text: String) -> String? {
    switch fields["id"] {
    case .null, nil: return nil
    case .number(let literal): return literal
    case .string(let value):
      var writer = JSONWriter()
      writer.string(value)
      return String(decoding: writer.bytes, as: UTF8.self)
    default: fatalError("an id of an odd type: \(text)")
    }
  }

  // MARK: Invariants

  func checkSessions() {
    for name in sessionNames {
      guard let record = hub.record(of: name), let (seq, _) = hub.state(of: name) else {
        // Forgotten: a new history begins at seq 0.
        maxSeq[name] = nil
        keys[name] = nil
        continue
      }
      if let damage = record.damage { fatalError("session \(name): \(damage) in \(record)") }
      check(seq >= maxSeq[name] ?? 0, "session \(name)'s seq went back to \(seq)")
    }
    for viewer in viewers {
      check(hub.state(of: viewer.session) != nil, "a session with a viewer is gone")
    }
  }
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
  let bytes = size > 0 && data != nil ? Array(UnsafeBufferPointer(start: data, count: size)) : []
  var program = Program(bytes: bytes)
  let world = World(flags: program.byte())
  var steps = 0
  while !program.isEmpty && steps < 96 {
    steps += 1
    switch program.byte() % 9 {
    case 0: world.join(&program)
    case 1: world.leave(&program)
    case 2, 3:
      let frame = world.command(&program)
      world.send(frame, &program)
    case 4: world.step(&program)
    case 5: world.drainAll()
    case 6:
      let frame = program.text(maxLength: 255)
      world.send(frame, &program)
    case 7: world.toDeadline(&program)
    default: world.commit(&program)
    }
    world.hub.drainWritable { _ in }
    world.checkSessions()
  }
  world.drainAll()
  world.checkSessions()
  for viewer in world.viewers { world.hub.disconnect(viewer.id, now: world.now) }
  check(world.hub.connectionCount == 0, "connections left after every viewer left")
  return 0
}

extension ClientRequest {
  /// Answered without a sequenced record.
  fileprivate var changesNothing: Bool {
    if case .ping = self { return true }
    if case .auth = self { return true }
    return false
  }
}
