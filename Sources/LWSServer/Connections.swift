import CountdownCore

/// What became of a received chunk.
enum ReceiveOutcome: Equatable {
  case buffered
  case delivered
  /// Over `maxMessageBytes`: the connection must close with 1009.
  case tooLarge
}

extension CountdownServer {
  /// A WebSocket finished its handshake on `/ws/<session>`.
  func opened(_ wsi: OpaquePointer, session: String) -> ConnectionID {
    let id = hub.connect(session: session, now: clock.nowMilliseconds())
    let slot = Int(id)
    if slot >= sockets.count {
      sockets.append(contentsOf: repeatElement(nil, count: slot - sockets.count + 1))
      partialMessages.append(contentsOf: repeatElement([], count: slot - partialMessages.count + 1))
    }
    sockets[slot] = wsi
    flush()
    return id
  }

  /// A chunk of a client message. The size limit counts every fragment, and
  /// what lws says is still to come, so an oversized message is refused before
  /// it is buffered whole.
  func received(
    _ chunk: UnsafeRawBufferPointer, from id: ConnectionID, announcedRemaining: Int, isLast: Bool
  ) -> ReceiveOutcome {
    let slot = Int(id)
    guard partialMessages[slot].count + chunk.count + announcedRemaining <= config.maxMessageBytes
    else {
      partialMessages[slot] = []
      return .tooLarge
    }
    partialMessages[slot].append(contentsOf: chunk)
    guard isLast else { return .buffered }
    let message = partialMessages[slot]
    partialMessages[slot].removeAll(keepingCapacity: false)
    hub.receive(message, from: id, now: clock.nowMilliseconds())
    flush()
    return .delivered
  }

  /// lws says `id` may be written: send one frame, and ask again if more waits.
  func writable(_ wsi: OpaquePointer, connection id: ConnectionID) -> Bool {
    guard let frame = hub.nextFrame(for: id, now: clock.nowMilliseconds()) else { return true }
    guard write(frame, to: wsi) else { return false }
    if hub.hasPending(id) { requestWritable(wsi) }
    return true
  }

  func closed(_ id: ConnectionID) {
    sockets[Int(id)] = nil
    partialMessages[Int(id)] = []
    hub.disconnect(id, now: clock.nowMilliseconds())
    flush()
  }
}
