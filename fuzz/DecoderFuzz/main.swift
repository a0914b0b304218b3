// libFuzzer entry point for the client command path.
//
// Built by scripts/fuzz together with Sources/CountdownCore/*.swift into one
// module (so no `import CountdownCore`), with `-parse-as-library` so that
// libFuzzer's own `main` drives it. See fuzz/README.md.
//
// Each input is a client's text frame, exactly as the server hands it to the
// hub (lws has already checked UTF-8 there, but the decoder must not rely on
// that, so any bytes are fed). Three passes:
//
//   1. `WireCodec.decode` on the bytes, with checks on what it returns.
//   2. A fresh `Hub` (open control): one viewer connects, `receive`s the
//      bytes, then every frame is drained with `nextFrame` until none is left.
//   3. A fresh `Hub` in `--control key` mode with a controller and a viewer:
//      the input is split at newlines into up to 16 commands, sent
//      alternately by the two connections while the clock moves on, so
//      sequences such as start-then-cancel reach the state machine.
//   4. A fresh `Hub` whose sequencer holds commands, as storage does until
//      its commit: the input's lines are sent by one connection, and each
//      line's last byte decides whether the oldest held command is then
//      applied, refused as unavailable, or left waiting, while time moves
//      on. What viewers see must stay a valid stream, and the session's
//      record must always be one the command rules could have produced.
//
// Every frame the hub writes must itself be a JSON object with a string
// "type" (our own strict parser is the oracle). A broken invariant is a
// crash (`fatalError`, whose message survives -O), which libFuzzer reports
// with a reproducer.

/// Fails the run with a message libFuzzer prints next to the crash.
private func check(_ condition: Bool, _ message: @autoclosure () -> String) {
  if !condition { fatalError("invariant broken: \(message())") }
}

/// A server frame must be one JSON object with a string "type".
private func checkFrame(_ frame: [UInt8], _ context: String) {
  let value: JSONValue
  do throws(JSONParseError) {
    value = try JSONParser.parse(frame, maxDepth: 64)
  } catch {
    fatalError(
      "\(context): the server wrote invalid JSON (\(error)): \(String(decoding: frame, as: UTF8.self))"
    )
  }
  guard case .object(let fields) = value, case .string(let type)? = fields["type"] else {
    fatalError("\(context): frame without a string type: \(String(decoding: frame, as: UTF8.self))")
  }
  let known = ["snapshot", "patch", "ack", "error", "pong"]
  check(known.contains(type), "\(context): unknown frame type \(type)")
}

/// Drains every frame waiting for `connection`; a bounded loop, so a hub that
/// never runs dry is reported as a bug rather than hanging the fuzzer.
private func drain(_ hub: Hub, _ connection: ConnectionID, now: Int64, _ context: String) {
  var written = 0
  while let frame = hub.nextFrame(for: connection, now: now) {
    checkFrame(frame, context)
    written += 1
    check(written <= Hub.maxPendingReplyBytes / 16 + 8, "\(context): nextFrame never returned nil")
  }
  check(!hub.hasPending(connection), "\(context): hasPending after nextFrame returned nil")
}

/// Pass 1: the decoder alone.
private func fuzzDecode(_ bytes: [UInt8]) {
  let defaultSeconds = SessionConfig().defaultSeconds
  let first = WireCodec.decode(bytes, defaultSeconds: defaultSeconds)
  // Deterministic: the same text decodes the same way.
  check(
    WireCodec.decode(bytes, defaultSeconds: defaultSeconds) == first, "decode is not deterministic")
  switch first {
  case .success(let message):
    if let id = message.id { checkFrame(WireCodec.ack(id: id, seq: 1), "ack") }
    switch message.request {
    case .command(.start(let length, let label, let options)):
      check(options.isValid, "start options \(options)")
      switch length {
      case .seconds(let seconds):
        check(SessionRecord.secondsRange.contains(seconds), "seconds \(seconds)")
      case .until(let deadline):
        check(SessionRecord.epochMsRange.contains(deadline), "until \(deadline)")
      }
      if let label {
        check(SessionRecord.isValidFinishedLabel(label), "label \(label.debugDescription)")
      }
    case .command(.adjust(let seconds)):
      check(seconds != 0 && SessionRecord.adjustRange.contains(seconds), "adjust \(seconds)")
    case .auth(let key):
      check(key.unicodeScalars.count <= WireCodec.maxKeyLength, "auth key")
    case .command(.rotateKey):
      check(false, "the decoder made a key: only the hub makes one")
    case .command(.wait(let label, let timeoutSeconds, let timeoutLabel)):
      if let timeoutSeconds {
        check(
          SessionRecord.timeoutSecondsRange.contains(timeoutSeconds), "timeout \(timeoutSeconds)")
      }
      for label in [label, timeoutLabel] {
        if let label {
          check(SessionRecord.isValidFinishedLabel(label), "label \(label.debugDescription)")
        }
      }
    case .command(.done(let label)), .command(.fail(let label)):
      if let label {
        check(SessionRecord.isValidFinishedLabel(label), "label \(label.debugDescription)")
      }
    case .command(.message(let text)):
      if let text {
        check(SessionRecord.isValidMessage(text), "message \(text.debugDescription)")
      }
    case .command(.cancel), .command(.pause), .command(.resume), .command(.stop),
      .command(.blackout), .rotateKey:
      break
    case .ping(let t):
      check(t.utf8.count <= WireCodec.maxPingTLength && Double(t)?.isFinite == true, "t \(t)")
      checkFrame(WireCodec.pong(t: t, serverTime: 0), "pong")
    }
  case .failure(let error):
    checkFrame(WireCodec.error(error), "error")
    // Quoted input is cut: no error costs much more than its fixed words.
    check(error.message.unicodeScalars.count <= 160, "error message of \(error.message.count)")
    if error.code == .badJSON {
      check(error.id == nil, "bad_json error carries an id")
    }
  }
}

/// Pass 2: the whole command path for one message.
private func fuzzHubOnce(_ bytes: [UInt8]) {
  let hub = Hub(config: HubConfig(), epoch: "fuzz")
  let now: Int64 = 1_000_000
  guard case .joined(let viewer) = hub.connect(session: "fuzz", peer: "192.0.2.1", now: now) else {
    fatalError("a first join was refused")
  }
  drain(hub, viewer, now: now, "open/snapshot")
  _ = hub.receive(bytes, from: viewer, now: now)
  hub.drainWritable { _ in }
  drain(hub, viewer, now: now, "open/reply")
  hub.advance(now: now + 90_000_000)
  drain(hub, viewer, now: now + 90_000_000, "open/after")
  hub.disconnect(viewer, now: now + 90_000_000)
  check(hub.connectionCount == 0, "connection count after disconnect")
}

/// Pass 3: a short conversation in a keyed session.
private func fuzzHubConversation(_ bytes: [UInt8]) {
  let lines = bytes.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false)
  guard lines.count > 1 else { return }
  let hub = Hub(config: HubConfig(control: .key), epoch: "fuzz")
  var now: Int64 = 5_000_000
  guard case .joined(let controller) = hub.connect(session: "s", peer: "192.0.2.1", now: now),
    case .joined(let viewer) = hub.connect(session: "s", key: "wrong", peer: "192.0.2.2", now: now)
  else { fatalError("joins to a keyed session were refused") }
  for (index, line) in lines.prefix(16).enumerated() {
    let from = index % 2 == 0 ? controller : viewer
    if case .close = hub.receive(Array(line), from: from, now: now) {
      fatalError("a 16-command conversation was closed as a flood")
    }
    now += 700
    hub.advance(now: now)
    hub.drainWritable { _ in }
    drain(hub, controller, now: now, "key/controller")
    drain(hub, viewer, now: now, "key/viewer")
  }
  hub.disconnect(viewer, now: now)
  hub.disconnect(controller, now: now)
}

/// Holds every command until the fuzzer says what becomes of it.
private final class HeldSequencer: CommandSequencer {
  var held: [SequenceRequest] = []

  func sequence(_ request: SequenceRequest) -> SequenceResult {
    held.append(request)
    return .pending
  }
  func created(session: String, record: SessionRecord, keyHash: KeyHash?) -> SessionLoad {
    .ready
  }
  func forgot(session: String) {}
}

/// Pass 4: the command path with a sequencer that completes late, or fails.
private func fuzzHeldCommands(_ bytes: [UInt8]) {
  let lines = bytes.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false)
  guard lines.count > 1 else { return }
  let sequencer = HeldSequencer()
  let hub = Hub(config: HubConfig(commandsPerSecond: 1000), epoch: "fuzz", sequencer: sequencer)
  var now: Int64 = 9_000_000
  guard case .joined(let sender) = hub.connect(session: "h", peer: "192.0.2.1", now: now),
    case .joined(let watcher) = hub.connect(session: "h", peer: "192.0.2.1", now: now)
  else { fatalError("joins were refused") }
  for line in lines.prefix(16) {
    _ = hub.receive(Array(line), from: sender, now: now)
    now += 450
    if !sequencer.held.isEmpty {
      let request = sequencer.held.removeFirst()
      switch (line.last ?? 0) % 3 {
      case 0:
        switch request.current.applying(request.command, at: request.now) {
        case .success(let record): hub.complete(request.ticket, .applied(record), now: now)
        case .failure(let code): hub.complete(request.ticket, .rejected(code), now: now)
        }
      case 1:
        hub.complete(request.ticket, .unavailable("fuzz"), now: now)
      default:
        sequencer.held.insert(request, at: 0)
      }
    }
    hub.advance(now: now)
    hub.drainWritable { _ in }
    drain(hub, sender, now: now, "held/sender")
    drain(hub, watcher, now: now, "held/watcher")
    if let record = hub.record(of: "h") {
      switch record.phase {
      case .running: check(record.endsAt != nil && record.remainingMs == nil, "running \(record)")
      case .paused:
        check(record.remainingMs.map { $0 > 0 } == true && record.endsAt == nil, "paused \(record)")
      case .waiting:
        check(record.startedAt != nil && record.endsAt == nil && record.duration == 0, "\(record)")
      case .overtime:
        check(
          record.overSince != nil && record.run.overtime && record.remainingMs == nil, "\(record)")
      case .idle, .finished: check(record.endsAt == nil && record.remainingMs == nil, "\(record)")
      }
      check(record.damage == nil, "damaged record \(record)")
      check(record.duration >= 0, "negative duration \(record)")
    }
  }
  hub.disconnect(watcher, now: now)
  hub.disconnect(sender, now: now)
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
  let bytes = size > 0 && data != nil ? Array(UnsafeBufferPointer(start: data, count: size)) : []
  fuzzDecode(bytes)
  fuzzHubOnce(bytes)
  fuzzHubConversation(bytes)
  fuzzHeldCommands(bytes)
  return 0
}
