import CountdownCore

/// The test-only echo route (`--autobahn-echo`, for the Autobahn suite): every
/// message comes back as it came, text or binary. Pure bookkeeping, by
/// socket; `CountdownServer` makes the lws calls.
struct EchoRoute {
  private struct Connection {
    let peer: PeerID
    var partial: [UInt8] = []
    var partialIsBinary = false
    var outgoing: [(bytes: [UInt8], binary: Bool)] = []
  }

  private var connections: [Wsi: Connection] = [:]

  /// Every open echo socket.
  var sockets: [Wsi] { Array(connections.keys) }

  mutating func open(_ wsi: Wsi, peer: PeerID) {
    connections[wsi] = Connection(peer: peer)
  }

  /// A chunk of a message, at most `limit` bytes in all. `.delivered`: a
  /// whole message now waits to be written.
  mutating func receive(
    _ chunk: UnsafeRawBufferPointer, on wsi: Wsi, binary: Bool, isFirst: Bool,
    isLast: Bool, limit: Int
  ) -> ChunkOutcome {
    guard var connection = connections[wsi] else {
      return .close(CloseDirective(.internalError, "unknown"))
    }
    if isFirst { connection.partialIsBinary = binary }
    guard connection.partial.count + chunk.count <= limit else {
      return .close(CloseDirective(.messageTooBig, "message too large"))
    }
    connection.partial.append(contentsOf: chunk)
    if isLast {
      connection.outgoing.append((connection.partial, connection.partialIsBinary))
      connection.partial = []
    }
    connections[wsi] = connection
    return isLast ? .delivered : .buffered
  }

  /// The next message to write back, and whether more wait after it.
  mutating func next(for wsi: Wsi) -> (bytes: [UInt8], binary: Bool, more: Bool)? {
    guard var connection = connections[wsi], !connection.outgoing.isEmpty else { return nil }
    let message = connection.outgoing.removeFirst()
    connections[wsi] = connection
    return (message.bytes, message.binary, !connection.outgoing.isEmpty)
  }

  /// Forgets a closed socket; its peer, to release.
  mutating func close(_ wsi: Wsi) -> PeerID? {
    connections.removeValue(forKey: wsi)?.peer
  }
}
