import CountdownCore
import Testing

@testable import LWSServer

@Suite struct ConnectionTableTests {
  let a = Wsi(raw: OpaquePointer(bitPattern: 0x1000)!)
  let b = Wsi(raw: OpaquePointer(bitPattern: 0x2000)!)

  /// Viewers take the slot of their ConnectionID, however far out, and give it back.
  @Test func viewersBySlot() {
    var table = ConnectionTable()
    var peers = PeerCounts()
    let peer = peers.add("10.0.0.1")
    table.place(ViewerSocket(wsi: a, transport: .eventStream, peer: peer), at: 5)
    #expect(table.viewers.count == 6)
    #expect(table.viewers[5].wsi == a && table.viewers[5].transport == .eventStream)
    #expect(table.viewers[..<5].allSatisfy { $0.wsi == nil })
    let released = table.remove(5)
    #expect(released == peer)
    #expect(table.viewers[5].wsi == nil && table.viewers[5].peer == .none)
  }

  /// A refusal and a close code live aside by wsi; the first close code wins, and
  /// once both are taken nothing is left behind.
  @Test func asideEntriesGoWhenTaken() {
    var table = ConnectionTable()
    var peers = PeerCounts()
    let peer = peers.add("10.0.0.1")
    table.refuse(a, peer: peer, code: .tooManySessions)
    #expect(table.refusal(of: a) == .tooManySessions && table.refusal(of: b) == nil)
    let noted = [
      table.noteClose(a, label: "1013"), table.noteClose(a, label: "1000"),
      table.noteClose(b, label: "1001"),
    ]
    #expect(noted == [true, false, true], "the first close code counts")
    let taken = [table.takeCloseCode(a), table.takeCloseCode(a)]
    #expect(taken == ["1013", nil])
    #expect(table.asideCount == 2, "a's refusal and b's close code")
    let peers2 = [table.removeRefusal(a), table.removeRefusal(a)]
    #expect(peers2 == [peer, nil])
    let last = table.takeCloseCode(b)
    #expect(last == "1001")
    #expect(table.asideCount == 0)
  }
}
