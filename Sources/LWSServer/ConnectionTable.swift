import CountdownCore

/// What the server keeps beside lws for each WebSocket and event stream, in
/// one place. Hub viewers (either transport) are indexed by `ConnectionID`,
/// an array index on the hot path; what only a few connections have at a
/// time (a refusal waiting to be written, the close code of one closing) is
/// by its `Wsi`, so no viewer's slot pays for it. The test-only echo route
/// keeps its own (`EchoRoute`), as HTTP answers do theirs.
struct ConnectionTable {
  /// By `ConnectionID`; a free slot has no `wsi`.
  var viewers: [ViewerSocket] = []
  private var aside: [Wsi: Aside] = [:]

  private struct Aside {
    /// A join the hub refused: its peer's place, and the error to send before closing.
    var refusal: (peer: PeerID, code: ErrorCode)?
    /// The close code either side sent first, as a metrics label.
    var closeCode: String?

    var isEmpty: Bool { refusal == nil && closeCode == nil }
  }

  /// A hub connection opened: its slot, grown to fit.
  mutating func place(_ socket: ViewerSocket, at id: ConnectionID) {
    let slot = Int(id)
    if slot >= viewers.count {
      viewers.append(contentsOf: repeatElement(ViewerSocket(), count: slot - viewers.count + 1))
    }
    viewers[slot] = socket
  }

  /// A hub connection closed: its slot is free again; its peer, to release.
  mutating func remove(_ id: ConnectionID) -> PeerID {
    let peer = viewers[Int(id)].peer
    viewers[Int(id)] = ViewerSocket()
    return peer
  }

  mutating func refuse(_ wsi: Wsi, peer: PeerID, code: ErrorCode) {
    aside[wsi, default: Aside()].refusal = (peer, code)
  }

  func refusal(of wsi: Wsi) -> ErrorCode? { aside[wsi]?.refusal?.code }

  /// A refused join closed; its peer, to release.
  mutating func removeRefusal(_ wsi: Wsi) -> PeerID? {
    guard let refusal = aside[wsi]?.refusal else { return nil }
    update(wsi) { $0.refusal = nil }
    return refusal.peer
  }

  /// The first close code on a connection counts; later ones are ignored.
  mutating func noteClose(_ wsi: Wsi, label: String) -> Bool {
    guard aside[wsi]?.closeCode == nil else { return false }
    aside[wsi, default: Aside()].closeCode = label
    return true
  }

  /// The close code noted for a connection that has closed, forgotten now.
  mutating func takeCloseCode(_ wsi: Wsi) -> String? {
    let code = aside[wsi]?.closeCode
    update(wsi) { $0.closeCode = nil }
    return code
  }

  /// Connections with something aside (for tests: none may be left behind).
  var asideCount: Int { aside.count }

  private mutating func update(_ wsi: Wsi, _ change: (inout Aside) -> Void) {
    guard var entry = aside[wsi] else { return }
    change(&entry)
    aside[wsi] = entry.isEmpty ? nil : entry
  }
}
