/// A peer address's place in `PeerCounts`: what each connection keeps
/// instead of the address itself.
struct PeerID: Equatable {
  fileprivate let raw: UInt32
  static let none = PeerID(raw: .max)
}

/// Open connections per peer address, for the per-IP cap. Every connection
/// holds its peer's `PeerID`, four bytes, where the address as a `String`
/// took sixteen in every viewer's slot.
struct PeerCounts {
  private var ids: [String: UInt32] = [:]
  /// By id: the address and its open connections; a freed id has count 0.
  private var addresses: [String] = []
  private var counts: [Int] = []
  private var free: [UInt32] = []

  /// Open connections from `peer`.
  func count(of peer: String) -> Int {
    ids[peer].map { counts[Int($0)] } ?? 0
  }

  /// Counts one more connection from `peer`.
  mutating func add(_ peer: String) -> PeerID {
    if let id = ids[peer] {
      counts[Int(id)] += 1
      return PeerID(raw: id)
    }
    let id: UInt32
    if let reused = free.popLast() {
      id = reused
      addresses[Int(id)] = peer
      counts[Int(id)] = 1
    } else {
      id = UInt32(addresses.count)
      addresses.append(peer)
      counts.append(1)
    }
    ids[peer] = id
    return PeerID(raw: id)
  }

  /// One connection from that peer closed. `.none` is ignored.
  mutating func release(_ peer: PeerID) {
    guard peer != .none, Int(peer.raw) < counts.count, counts[Int(peer.raw)] > 0 else { return }
    let index = Int(peer.raw)
    counts[index] -= 1
    guard counts[index] == 0 else { return }
    ids[addresses[index]] = nil
    addresses[index] = ""
    free.append(peer.raw)
  }
}
