/// What a cluster adapter tells the hub: the hub's one inbound interface for
/// a cluster (`Hub.apply(_:now:)`), whatever part of the adapter it comes from.
///
/// Who owns what: the hub owns `loading` (viewers and commands wait on it)
/// and each session's key hash; the adapter owns revisions, and hands the
/// hub a record only when it is newer than the one it last took.
public enum ClusterEvent: Equatable, Sendable {
  /// A command the sequencer answered `.pending` for is done.
  case completed(Ticket, SequenceOutcome)
  /// A session's state fetched after `.loading`. In key mode, `keyHash` is
  /// the session's key there; a nil record keeps the fresh one.
  case loaded(session: String, record: SessionRecord?, keyHash: KeyHash?)
  /// A newer record sequenced elsewhere (or read back after a gap).
  case adopted(session: String, record: SessionRecord)
  /// The session's key changed elsewhere (a `rotate_key` on another instance).
  case keyChanged(session: String, keyHash: KeyHash)
  /// Viewers of the session on other instances.
  case remoteViewers(session: String, count: Int)
  /// Whether this instance can confirm its sessions' state with the cluster.
  case stale(Bool)
}

/// Where a cluster adapter sends its events: the hub, or in a test of one
/// part alone, a recorder.
public protocol ClusterEventSink: AnyObject {
  func apply(_ event: ClusterEvent, now: Int64)
  /// The session's key hash as the hub holds it (key mode), which a read of
  /// the session settles in the cluster.
  func keyHash(ofSession id: String) -> KeyHash?
}

/// A sequencer that counts viewers across instances: the hub pushes each
/// change of a session's local viewer count to it, as it happens, so that
/// the adapter never polls the hub.
public protocol ViewerCountObserver: AnyObject {
  func localViewersChanged(session: String, count: Int)
}

extension Hub {
  /// What only a cluster needs, by session handle.
  struct ClusterTables {
    /// For sessions whose records come from elsewhere: the last such record,
    /// which bounds the seq any instance may have reached since.
    var records: [SessionHandle: SessionRecord] = [:]
    /// Viewers of the session on other instances.
    var remoteViewers: [SessionHandle: Int] = [:]
    /// The highest `since` of viewers that joined a session still loading.
    var sinceWhileLoading: [SessionHandle: UInt64] = [:]

    mutating func forget(_ handle: SessionHandle) {
      records[handle] = nil
      remoteViewers[handle] = nil
      sinceWhileLoading[handle] = nil
    }
  }
}

extension Hub: ClusterEventSink {
  public func apply(_ event: ClusterEvent, now: Int64) {
    switch event {
    case .completed(let ticket, let outcome):
      complete(ticket, outcome, now: now)
    case .loaded(let session, let record, let keyHash):
      loaded(session: session, record: record, keyHash: keyHash, now: now)
    case .adopted(let session, let record):
      adoptRemote(session: session, record: record, now: now)
    case .keyChanged(let session, let keyHash):
      keyChanged(session: session, keyHash: keyHash)
    case .remoteViewers(let session, let count):
      setRemoteViewers(session: session, count: count, now: now)
    case .stale(let stale):
      setStale(stale, now: now)
    }
  }

  public func keyHash(ofSession id: String) -> KeyHash? {
    sessionIndex[id].flatMap { keyHash(of: $0) }
  }

  /// Its viewers get their snapshots, and its waiting commands go on. A
  /// viewer that was shown another key (it created the session here, racing
  /// another instance) is a viewer after all.
  private func loaded(session id: String, record: SessionRecord?, keyHash: KeyHash?, now: Int64) {
    guard let handle = sessionIndex[id], sessions[handle].loading else { return }
    sessions[handle].loading = false
    if config.control == .key, let keyHash {
      keyHashes[Int(handle.index)] = keyHash
      for viewer in sessions[handle].viewers {
        if let offered = keysOfferedWhileLoading.removeValue(forKey: viewer),
          keyHash.matches(offered)
        {
          grant(viewer, key: offered)
        }
      }
      demote(handle, unlessHolding: keyHash)
    }
    if let record { adoptClusterRecord(record, handle, now: now) }
    if let since = cluster.sinceWhileLoading.removeValue(forKey: handle) {
      movingSeq(handle) { $0.raiseSeq(to: since) }
    }
    dirtyConnections.append(contentsOf: sessions[handle].viewers)
    dispatchWaiting(handle, now: now)
  }

  /// Sessions not open here are not kept. The adapter has checked that the
  /// record is newer (it owns revisions). Both here and in `loaded`, seq
  /// moves past what the record says any instance may have sent
  /// (`record.seq` and the time since `record.updatedAt`), so a client
  /// moving between instances never sees it go back.
  private func adoptRemote(session id: String, record: SessionRecord, now: Int64) {
    guard let handle = sessionIndex[id], !sessions[handle].loading else { return }
    adoptClusterRecord(record, handle, now: now)
  }

  /// Takes a record sequenced in the cluster, with seq moved past whatever
  /// any instance may have sent since it was written.
  private func adoptClusterRecord(_ record: SessionRecord, _ handle: SessionHandle, now: Int64) {
    cluster.records[handle] = record
    transition(handle) { machine in
      machine.skipSeq(pastPatchesSince: record, now: now)
      return machine.adopt(record, now: now)
    }
  }

  /// Every controller here that holds another key becomes a viewer.
  private func keyChanged(session id: String, keyHash: KeyHash) {
    guard config.control == .key, let handle = sessionIndex[id] else { return }
    rekey(handle, to: keyHash, holder: nil)
  }

  /// The count shown here becomes the sum, patched at the usual viewer-count pace.
  private func setRemoteViewers(session id: String, count: Int, now: Int64) {
    guard let handle = sessionIndex[id] else { return }
    cluster.remoteViewers[handle] = count > 0 ? count : nil
    let shown = shownViewers(handle)
    transition(handle) { $0.viewersChanged(to: shown, now: now) }
  }

  /// Every session's viewers are told, in a patch of `stale`.
  private func setStale(_ stale: Bool, now: Int64) {
    for handle in sessionIndex.values {
      transition(handle) { $0.staleChanged(to: stale, now: now) }
    }
  }

  /// Tells the cluster adapter, if there is one, that this instance's count
  /// of a session's viewers changed.
  func localViewersChanged(_ handle: SessionHandle) {
    viewerCountObserver?.localViewersChanged(
      session: sessions[handle].id, count: sessions[handle].viewers.count)
  }
}
