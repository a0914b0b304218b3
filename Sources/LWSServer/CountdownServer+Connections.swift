import CountdownCore
import Observability

/// What became of a received chunk.
enum ChunkOutcome: Equatable {
  case buffered
  case delivered
  /// Close the connection with this WebSocket status.
  case close(CloseDirective)
}

/// What the writable callback should do after writing.
enum WriteOutcome: Equatable {
  case keepOpen
  /// Close with this WebSocket status (after the frame, if any, was written).
  case close(CloseDirective)
  /// Hang up at once (the write failed).
  case fail
}

extension CountdownServer {
  /// A WebSocket finished its handshake on `/ws/<session>`.
  /// Returns nil when the hub refused it; the refusal frame is then pending.
  func opened(
    _ wsi: Wsi, session: String, key: String?, since: UInt64?, peer: String
  ) -> ConnectionID? {
    let peerID = admission.admitted(peer: peer)
    network.accepted += 1
    switch join(wsi, .webSocket, session: session, key: key, since: since, peer: peer, peerID) {
    case .refused(let code):
      refusedByHub(code, peer: peer)
      table.refuse(wsi, peer: peerID, code: code)
      requestWritable(wsi)
      return nil
    case .joined(let id):
      return id
    }
  }

  /// Joins the hub as a viewer on either transport, and takes its slot in the table.
  func join(
    _ wsi: Wsi, _ transport: Transport, session: String, key: String?, since: UInt64?,
    peer: String, _ peerID: PeerID
  ) -> JoinOutcome {
    let now = clock.nowMilliseconds()
    let outcome = hub.connect(
      session: session, key: key, since: since, peer: admission.budget.key(peer), now: now,
      viewerOnly: transport == .eventStream)
    guard case .joined(let id) = outcome else { return outcome }
    table.place(
      ViewerSocket(wsi: wsi, keepalive: Keepalive(now: now), transport: transport, peer: peerID),
      at: id)
    flush()
    return outcome
  }

  /// A chunk of a client message. The size limit counts every fragment, and
  /// what lws says is still to come, so an oversized message is refused before
  /// it is buffered whole.
  func received(
    _ chunk: UnsafeRawBufferPointer, from id: ConnectionID, announcedRemaining: Int, isLast: Bool
  ) -> ChunkOutcome {
    let slot = Int(id)
    heard(id)
    let buffered = table.viewers[slot].partialMessage.count
    guard buffered + chunk.count + announcedRemaining <= config.maxMessageBytes else {
      table.viewers[slot].partialMessage = []
      return .close(CloseDirective(.messageTooBig, "message over \(config.maxMessageBytes) bytes"))
    }
    table.viewers[slot].partialMessage.append(contentsOf: chunk)
    guard isLast else { return .buffered }
    let message = table.viewers[slot].partialMessage
    table.viewers[slot].partialMessage = []
    let outcome = hub.receive(message, from: id, now: clock.nowMilliseconds())
    flush()
    if case .close(let directive) = outcome { return .close(directive) }
    return .delivered
  }

  /// Anything arrived: the connection is alive.
  func heard(_ id: ConnectionID) {
    _ = table.viewers[Int(id)].keepalive.heard(now: clock.nowMilliseconds())
  }

  /// lws says `id` may be written: send one frame, and ask again if more waits.
  /// `direct`: called outside lws's writable callback (a tick's direct write).
  func writable(
    _ wsi: Wsi, connection id: ConnectionID, now: Int64? = nil, direct: Bool = false
  ) -> WriteOutcome {
    // Read once per frame; a tick's direct writes pass the time they all share.
    let now = now ?? clock.nowMilliseconds()
    _ = table.viewers[Int(id)].keepalive.writable()
    if stopping { return .close(CloseDirective(.goingAway, "server shutting down")) }
    // One frame per callback. A ping owed by the keepalive sweep waits for
    // what the hub has, so a ping round (19k pings at once) never delays a
    // tick; the hub's backlog is finite (one merged patch, 16 KiB of replies).
    guard writeNextFrame(id, to: wsi, now: now) else { return .fail }
    if table.viewers[Int(id)].keepalive.owesPing || hub.hasPending(id) {
      markWaiting(id, wsi, now: now)
    } else if table.viewers[Int(id)].transport == .eventStream {
      streamWritten(wsi, inCallback: !direct)
    }
    return .keepOpen
  }

  /// The fan-out's last step: the connection's next frame (or the keepalive
  /// it is owed) in its transport's framing. False: the write failed.
  private func writeNextFrame(_ id: ConnectionID, to wsi: Wsi, now: Int64) -> Bool {
    switch table.viewers[Int(id)].transport {
    case .webSocket:
      if let frame = hub.nextFrame(for: id, now: now) {
        return write(frame, to: wsi, binary: false)
      }
      guard table.viewers[Int(id)].keepalive.nothingElseToWrite() == .ping else { return true }
      return writePing(wsi)
    case .eventStream:
      // A reply (an ack, an error) answers a WebSocket message; none is due
      // here, and any that were would be skipped.
      while let event = hub.nextEvent(for: id, now: now) {
        guard event.kind != .reply else { continue }
        // The client never speaks: a write is what shows the stream alive,
        // and the keepalive comment is owed after a silence of writes.
        _ = table.viewers[Int(id)].keepalive.heard(now: now)
        return writeEvent(
          event.kind == .snapshot ? Self.snapshotEvent : Self.patchEvent, event.frame,
          seq: event.seq, to: wsi)
      }
      guard table.viewers[Int(id)].keepalive.nothingElseToWrite() == .ping else { return true }
      _ = table.viewers[Int(id)].keepalive.heard(now: now)
      return writeEventComment(to: wsi)
    }
  }

  /// A refused join: its one error frame, then close 1013 (try again later).
  func writableRefused(_ wsi: Wsi) -> WriteOutcome {
    guard let code = table.refusal(of: wsi) else { return .fail }
    guard write(hub.refusalFrame(code), to: wsi, binary: false) else { return .fail }
    return .close(CloseDirective(.tryAgainLater, "try again later"))
  }

  func closed(_ id: ConnectionID) {
    releasePeer(table.remove(id))
    hub.disconnect(id, now: clock.nowMilliseconds())
    flush()
  }

  func closedRefused(_ wsi: Wsi) {
    guard let peer = table.removeRefusal(wsi) else { return }
    releasePeer(peer)
  }

  func releasePeer(_ peer: PeerID) {
    admission.released(peer)
    socketReleased()
  }

  /// Remembers when a connection began waiting to be written, for the unwritable sweep.
  func markWaiting(_ id: ConnectionID, _ wsi: Wsi, now: Int64) {
    if table.viewers[Int(id)].keepalive.waiting(now: now) == .requestWritable {
      requestWritable(id, wsi)
    }
  }

  /// One pass over every connection, once a second: who is owed a keepalive
  /// (silent for --ping-after; an event stream, for at most 15 s of no
  /// writes), and who must go (a WebSocket silent for --hang-up-after after
  /// its ping, or any connection unable to take what it is owed for
  /// --unwritable-timeout).
  func sweepConnections(now: Int64) -> (ping: [(ConnectionID, Wsi)], close: [Wsi]) {
    let webSocket = Keepalive.Limits(
      pingAfter: Int64(config.pingAfterSeconds) * 1000,
      hangUpAfter: Int64(config.hangUpAfterSeconds) * 1000,
      stuckAfter: Int64(config.unwritableTimeoutSeconds) * 1000)
    // An event stream's client cannot answer; its comment is for proxies.
    let eventStream = Keepalive.Limits(
      pingAfter: min(webSocket.pingAfter, Self.eventStreamCommentMs), hangUpAfter: .max,
      stuckAfter: webSocket.stuckAfter)
    var ping: [(ConnectionID, Wsi)] = []
    var close: [Wsi] = []
    for slot in table.viewers.indices {
      guard let wsi = table.viewers[slot].wsi else { continue }
      // Swept in place: a copy of the slot would retain its buffers.
      let limits = table.viewers[slot].transport == .webSocket ? webSocket : eventStream
      switch table.viewers[slot].keepalive.swept(now: now, limits: limits) {
      case .hangUp: close.append(wsi)
      case .requestWritable, .ping: ping.append((ConnectionID(slot), wsi))
      case .none: break
      }
    }
    return (ping, close)
  }

  /// An event stream gets a comment after this long without a write, so
  /// that proxies do not time it out: under 15 s even when the sweep that
  /// finds it comes 1.5 s late.
  static let eventStreamCommentMs: Int64 = 13_000

  // MARK: The test-only echo route

  func echoOpened(_ wsi: Wsi, peer: String) {
    network.accepted += 1
    echo.open(wsi, peer: admission.admitted(peer: peer))
  }

  func echoReceived(
    _ wsi: Wsi, _ chunk: UnsafeRawBufferPointer, binary: Bool, isFirst: Bool,
    isLast: Bool
  ) -> ChunkOutcome {
    let outcome = echo.receive(
      chunk, on: wsi, binary: binary, isFirst: isFirst, isLast: isLast,
      limit: config.echoMaxMessageBytes)
    if outcome == .delivered { requestWritable(wsi) }
    return outcome
  }

  func echoWritable(_ wsi: Wsi) -> WriteOutcome {
    if stopping { return .close(CloseDirective(.goingAway, "server shutting down")) }
    guard let message = echo.next(for: wsi) else { return .keepOpen }
    guard write(message.bytes, to: wsi, binary: message.binary) else { return .fail }
    if message.more { requestWritable(wsi) }
    return .keepOpen
  }

  func echoClosed(_ wsi: Wsi) {
    if let peer = echo.close(wsi) { releasePeer(peer) }
  }
}
