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
    openSockets += 1
    let peerID = peerCounts.add(peer)
    network.accepted += 1
    switch hub.connect(
      session: session, key: key, since: since, peer: peer, now: clock.nowMilliseconds())
    {
    case .refused(let code):
      network.refuse(.sessionCap)
      Logger.shared.info(
        "upgrade_refused",
        [
          "cause": LogValue(RefusalCause.sessionCap.rawValue), "code": LogValue(code.rawValue),
          "peer": LogValue(peer),
        ])
      refusals[wsi] = (peerID, code)
      requestWritable(wsi)
      return nil
    case .joined(let id):
      let slot = Int(id)
      if slot >= sockets.count {
        sockets.append(contentsOf: repeatElement(ViewerSocket(), count: slot - sockets.count + 1))
      }
      sockets[slot] = ViewerSocket(wsi: wsi, peer: peerID)
      heard(id)
      flush()
      return id
    }
  }

  /// A chunk of a client message. The size limit counts every fragment, and
  /// what lws says is still to come, so an oversized message is refused before
  /// it is buffered whole.
  func received(
    _ chunk: UnsafeRawBufferPointer, from id: ConnectionID, announcedRemaining: Int, isLast: Bool
  ) -> ChunkOutcome {
    let slot = Int(id)
    heard(id)
    let buffered = sockets[slot].partialMessage.count
    guard buffered + chunk.count + announcedRemaining <= config.maxMessageBytes else {
      sockets[slot].partialMessage = []
      return .close(CloseDirective(.messageTooBig, "message over \(config.maxMessageBytes) bytes"))
    }
    sockets[slot].partialMessage.append(contentsOf: chunk)
    guard isLast else { return .buffered }
    let message = sockets[slot].partialMessage
    sockets[slot].partialMessage = []
    let outcome = hub.receive(message, from: id, now: clock.nowMilliseconds())
    flush()
    if case .close(let directive) = outcome { return .close(directive) }
    return .delivered
  }

  /// Anything arrived: the connection is alive.
  func heard(_ id: ConnectionID) {
    sockets[Int(id)].lastHeard = clock.nowMilliseconds()
    sockets[Int(id)].pingedAt = 0
  }

  /// lws says `id` may be written: send one frame, and ask again if more waits.
  func writable(
    _ wsi: Wsi, connection id: ConnectionID, now: Int64? = nil
  ) -> WriteOutcome {
    // Read once per frame; a tick's direct writes pass the time they all share.
    let now = now ?? clock.nowMilliseconds()
    sockets[Int(id)].waitingSince = 0
    if stopping { return .close(CloseDirective(.goingAway, "server shutting down")) }
    // One frame per callback. A ping owed by the keepalive sweep waits for
    // what the hub has, so a ping round (19k pings at once) never delays a
    // tick; the hub's backlog is finite (one merged patch, 16 KiB of replies).
    if let frame = hub.nextFrame(for: id, now: now) {
      guard write(frame, to: wsi, binary: false) else { return .fail }
    } else if sockets[Int(id)].pingDue {
      sockets[Int(id)].pingDue = false
      guard writePing(wsi) else { return .fail }
    } else {
      return .keepOpen
    }
    if sockets[Int(id)].pingDue || hub.hasPending(id) {
      markWaiting(id, wsi, now: now)
    }
    return .keepOpen
  }

  /// A refused join: its one error frame, then close 1013 (try again later).
  func writableRefused(_ wsi: Wsi) -> WriteOutcome {
    guard let (_, code) = refusals[wsi] else { return .fail }
    guard write(hub.refusalFrame(code), to: wsi, binary: false) else { return .fail }
    return .close(CloseDirective(.tryAgainLater, "try again later"))
  }

  func closed(_ id: ConnectionID) {
    let slot = Int(id)
    releasePeer(sockets[slot].peer)
    sockets[slot] = ViewerSocket()
    hub.disconnect(id, now: clock.nowMilliseconds())
    flush()
  }

  func closedRefused(_ wsi: Wsi) {
    guard let (peer, _) = refusals.removeValue(forKey: wsi) else { return }
    releasePeer(peer)
  }

  private func releasePeer(_ peer: PeerID) {
    openSockets -= 1
    peerCounts.release(peer)
    socketReleased()
  }

  /// Remembers when a connection began waiting to be written, for the unwritable sweep.
  func markWaiting(_ id: ConnectionID, _ wsi: Wsi, now: Int64) {
    if sockets[Int(id)].waitingSince == 0 { sockets[Int(id)].waitingSince = now }
    requestWritable(wsi)
  }

  /// One pass over every connection, once a second: who is owed a ping
  /// (silent for --ping-after), and who must go (silent for --hangup-after,
  /// or unable to take what it is owed for --unwritable-timeout).
  func sweepConnections(now: Int64) -> (ping: [Wsi], close: [Wsi]) {
    let stuckAfter = Int64(config.unwritableTimeoutSeconds) * 1000
    let pingAfter = Int64(config.pingAfterSeconds) * 1000
    let hangUpAfter = Int64(config.hangUpAfterSeconds) * 1000
    var ping: [Wsi] = []
    var close: [Wsi] = []
    for slot in sockets.indices {
      guard let wsi = sockets[slot].wsi else { continue }
      // Fields read in place: a copy of the slot would retain its buffers.
      let silent = now - sockets[slot].lastHeard
      let waitingSince = sockets[slot].waitingSince
      // Hang up only after a ping went unanswered: a sweep that comes late
      // could otherwise skip the ping window and close a live connection.
      if (silent >= hangUpAfter && sockets[slot].pingedAt != 0)
        || (waitingSince != 0 && now - waitingSince >= stuckAfter)
      {
        close.append(wsi)
      } else if silent >= pingAfter && sockets[slot].pingedAt == 0 {
        sockets[slot].pingedAt = now
        sockets[slot].pingDue = true
        ping.append(wsi)
      }
    }
    return (ping, close)
  }

  // MARK: The test-only echo route

  func echoOpened(_ wsi: Wsi, peer: String) {
    network.accepted += 1
    openSockets += 1
    echo.open(wsi, peer: peerCounts.add(peer))
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
