// The fan-out: which connections have something to write, and the one frame
// each gets when lws says it may write. Each patch is encoded once per
// session; a viewer only remembers the last seq it was sent, so a slow viewer
// costs one merged frame, not a queue.
extension Hub {
  /// Calls `body` for every connection that has something new to write since
  /// the last drain. A connection may be named more than once.
  public func drainWritable(_ body: (ConnectionID) -> Void) {
    for handle in dirtySessions where sessions.contains(handle) {
      // Indexed in place: binding the Session would copy it per dirty session.
      sessions[handle].dirty = false
      var index = 0
      while index < sessions[handle].viewers.count {
        body(sessions[handle].viewers[index])
        index += 1
      }
    }
    dirtySessions.removeAll(keepingCapacity: true)
    for connection in dirtyConnections where connections.contains(ConnectionHandle(connection)) {
      body(connection)
    }
    dirtyConnections.removeAll(keepingCapacity: true)
  }

  /// The one frame to write now to `connection`, or nil when it is up to date.
  /// Order: the snapshot, then the state (merged into one patch if it lags),
  /// then acks and errors, so an ack never precedes its patch.
  public func nextFrame(for id: ConnectionID, now: Int64) -> [UInt8]? {
    let slot = ConnectionHandle(id)
    guard connections.contains(slot) else { return nil }
    let handle = connections[slot].session
    // Nothing to show until the session's state has arrived.
    if sessions[handle].loading { return nil }
    let seq = sessions[handle].machine.seq
    // The hot path, once per viewer per tick: one patch behind, no snapshot
    // owed. Fields are read and written in place, and the frame every such
    // viewer shares is returned without copying its bytes.
    if connections[slot].sentSeq &+ 1 == seq && !connections[slot].needsSnapshot {
      connections[slot].sentSeq = seq
      if !sessions[handle].patchFrameFresh { encodeLatestPatch(handle) }
      return sessions[handle].patchFrame
    }
    return catchUpFrame(slot, handle: handle, now: now)
  }

  /// What a frame is, for a transport that frames each kind its own way (an
  /// event stream names the event and its seq).
  public enum FrameKind: Equatable, Sendable {
    case snapshot
    case patch
    /// An ack, error or pong, meant for a WebSocket that sent something.
    case reply
  }

  /// `nextFrame`, with the frame's kind and the seq the connection is at after it.
  public func nextEvent(
    for id: ConnectionID, now: Int64
  ) -> (frame: [UInt8], kind: FrameKind, seq: UInt64)? {
    let slot = ConnectionHandle(id)
    guard connections.contains(slot) else { return nil }
    let owedSnapshot = connections[slot].needsSnapshot
    let before = connections[slot].sentSeq
    guard let frame = nextFrame(for: id, now: now) else { return nil }
    let after = connections[slot].sentSeq
    let kind: FrameKind = owedSnapshot ? .snapshot : after != before ? .patch : .reply
    return (frame, kind, after)
  }

  /// Whether `connection` still has something to write after the last frame.
  public func hasPending(_ id: ConnectionID) -> Bool {
    let slot = ConnectionHandle(id)
    guard connections.contains(slot), !sessions[connections[slot].session].loading else {
      return false
    }
    return connections[slot].needsSnapshot
      || connections[slot].sentSeq < sessions[connections[slot].session].machine.seq
      || !connections[slot].replies.isEmpty
  }

  /// Encodes a session's latest patch, reusing the buffer. Lazy, so a session
  /// nobody watches never encodes its ticks.
  private func encodeLatestPatch(_ handle: SessionHandle) {
    let machine = sessions[handle].machine
    let patch = Patch(
      seq: machine.seq, fields: machine.changes(since: machine.seq - 1), state: machine.published)
    sessions[handle].patchFrame.removeAll(keepingCapacity: true)
    WireCodec.appendPatch(patch, to: &sessions[handle].patchFrame)
    sessions[handle].patchFrameFresh = true
  }

  /// Everything but the hot path: the snapshot, a merged patch for a viewer
  /// that lags, then acks, errors and pongs.
  private func catchUpFrame(_ slot: ConnectionHandle, handle: SessionHandle, now: Int64) -> [UInt8]?
  {
    let machine = sessions[handle].machine
    if connections[slot].needsSnapshot {
      connections[slot].needsSnapshot = false
      connections[slot].sentSeq = machine.seq
      let control: WireCodec.Control? =
        switch config.control {
        case .open: nil
        case .key:
          keysToSend.removeValue(forKey: slot.index).map { .controller(key: $0) } ?? .viewer
        }
      return WireCodec.snapshot(
        session: sessions[handle].id, epoch: epoch, seq: machine.seq, serverTime: now,
        state: machine.published, control: control)
    }
    let from = connections[slot].sentSeq
    if from < machine.seq {
      connections[slot].sentSeq = machine.seq
      stats.patchesMerged += 1
      if let merged = mergedFrames[handle], merged.from == from, merged.to == machine.seq {
        return merged.frame
      }
      let frame = WireCodec.patch(
        Patch(seq: machine.seq, fields: machine.changes(since: from), state: machine.published))
      mergedFrames[handle] = MergedFrame(from: from, to: machine.seq, frame: frame)
      return frame
    }
    guard !connections[slot].replies.isEmpty else { return nil }
    switch takeReply(slot) {
    case .frame(let frame): return frame
    case .pong(let t): return WireCodec.pong(t: t, serverTime: now)
    }
  }
}
