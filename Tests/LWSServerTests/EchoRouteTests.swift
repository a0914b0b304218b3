import CountdownCore
import Testing

@testable import LWSServer

@Suite struct EchoRouteTests {
  let wsi = Wsi(raw: OpaquePointer(bitPattern: 0x1000)!)

  func receive(
    _ route: inout EchoRoute, _ text: String, binary: Bool = false, isFirst: Bool = true,
    isLast: Bool = true, limit: Int = 64
  ) -> ChunkOutcome {
    Array(text.utf8).withUnsafeBytes {
      route.receive(
        $0, on: wsi, binary: binary, isFirst: isFirst, isLast: isLast, limit: limit)
    }
  }

  /// Fragments are reassembled, keep the first fragment's kind, and messages
  /// go back in the order they came; closing hands back the peer to release.
  @Test func echoesWholeMessagesInOrder() {
    var peers = PeerCounts()
    let peer = peers.add("10.0.0.1")
    var route = EchoRoute()
    route.open(wsi, peer: peer)
    #expect(receive(&route, "he", binary: true, isLast: false) == .buffered)
    #expect(receive(&route, "llo", isFirst: false) == .delivered)
    #expect(receive(&route, "second") == .delivered)
    let first = route.next(for: wsi)
    #expect(first?.bytes == Array("hello".utf8) && first?.binary == true && first?.more == true)
    let second = route.next(for: wsi)
    #expect(second?.bytes == Array("second".utf8) && second?.binary == false)
    #expect(second?.more == false && route.next(for: wsi) == nil)
    #expect(route.close(wsi) == peer && route.sockets.isEmpty)
  }

  /// A message over the limit, counting every fragment, closes with 1009;
  /// a socket the route does not know closes with 1011.
  @Test func refusesOversizedAndUnknown() {
    var route = EchoRoute()
    route.open(wsi, peer: .none)
    #expect(receive(&route, "12345", isLast: false, limit: 8) == .buffered)
    #expect(
      receive(&route, "6789", isFirst: false, limit: 8)
        == .close(CloseDirective(.messageTooBig, "message too large")))
    _ = route.close(wsi)
    #expect(receive(&route, "x") == .close(CloseDirective(.internalError, "unknown")))
  }
}
