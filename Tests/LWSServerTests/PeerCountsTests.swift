import Testing

@testable import LWSServer

@Suite struct PeerCountsTests {
  /// Connections from one address share an id and add up; the last one to
  /// close frees the address, and a new one may take its id.
  @Test func countsPerAddress() {
    var peers = PeerCounts()
    let a1 = peers.add("10.0.0.1")
    let a2 = peers.add("10.0.0.1")
    let b = peers.add("10.0.0.2")
    #expect(a1 == a2 && a1 != b)
    #expect(peers.count(of: "10.0.0.1") == 2 && peers.count(of: "10.0.0.2") == 1)
    peers.release(a1)
    #expect(peers.count(of: "10.0.0.1") == 1)
    peers.release(a2)
    #expect(peers.count(of: "10.0.0.1") == 0)
    // Released once too often, or never added: nothing moves.
    peers.release(a2)
    peers.release(.none)
    #expect(peers.count(of: "10.0.0.2") == 1)
    let c = peers.add("10.0.0.3")
    #expect(c == a1, "the freed id is reused")
    #expect(peers.count(of: "10.0.0.3") == 1 && peers.count(of: "10.0.0.1") == 0)
  }

  /// Every viewer has a socket slot, so its layout is budgeted: the peer is
  /// an id, not its address, and the fields leave no padding but the flag's.
  @Test func viewerSocketStaysSmall() {
    #expect(MemoryLayout<ViewerSocket>.stride <= 48, "\(MemoryLayout<ViewerSocket>.stride) bytes")
  }
}
