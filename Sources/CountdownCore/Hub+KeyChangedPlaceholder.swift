// PLACEHOLDER for core-control's `Hub.keyChanged(session:keyHash:now:)`:
// RedisSequencer calls this when another instance rotated a session's key.
// Delete this file once that method is merged, and call it instead.
extension Hub {
  /// Another instance rotated the key of a session open here: the old key
  /// stops working, and every controller here (who holds the old one) is a
  /// viewer from now on.
  public func keyChangedPlaceholder(session id: String, keyHash: KeyHash, now: Int64) {
    guard config.control == .key, let handle = sessionIndex[id] else { return }
    guard Int(handle.index) < keyHashes.count, keyHashes[Int(handle.index)] != keyHash else {
      return
    }
    keyHashes[Int(handle.index)] = keyHash
    for viewer in sessions[handle].viewers {
      keysToSend[viewer] = nil
      connections[ConnectionHandle(viewer)].isController = false
    }
    dirtyConnections.append(contentsOf: sessions[handle].viewers)
  }
}
