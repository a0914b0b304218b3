import CountdownCore
import Foundation
import Testing

@testable import RedisCluster

/// A reconnect reads every open session again, a bounded window at a time.
@Suite(.serialized) struct BulkWindowTests {
  let redis: RedisProcess
  let loop = LibevLoop()
  let epoch: String

  init() throws {
    redis = try RedisProcess()
    epoch = try RedisSequencer.prepare(redis.address, proposedEpoch: Hub.randomEpoch())
  }

  /// 700 open sessions: the reconcile after a reconnect reads all 700, never
  /// more than the window at once, and a command sent meanwhile is answered.
  @Test func reconcileReadsEverySessionInABoundedWindow() throws {
    let a = Instance(redis, loop: loop, epoch: epoch)
    waitFor(loop, "the connections") { a.sequencer.isConnected }
    let count = RedisSequencer.bulkWindow * 2 + 188
    var viewers = (0..<count).map { Viewer(a.hub, "w-\($0)") }
    waitFor(loop, "every snapshot") {
      for index in viewers.indices { viewers[index].read(a.hub) }
      return viewers.allSatisfy(\.hasSnapshot)
    }
    #expect(a.sequencer.stats.peakBulkInFlight == 0)
    let before = a.sequencer.stats.rereads
    try redis.blocking().command(["CLIENT", "KILL", "TYPE", "normal"])
    waitFor(loop, "the reconnect") { a.sequencer.stats.rereads > before }
    viewers[0].send(a.hub, #"{"op":"start","seconds":60,"id":1}"#)
    waitFor(loop, "every session read again, and the start's answer") {
      viewers[0].read(a.hub)
      return a.sequencer.stats.rereads >= before + count && viewers[0].reply(1) != nil
    }
    #expect(a.sequencer.stats.peakBulkInFlight == RedisSequencer.bulkWindow)
    #expect(viewers[0].reply(1)?["type"] as? String == "ack")
  }
}

/// The send-order queue of pending tags keeps its order across compactions.
@Test func tagQueueKeepsOrderAcrossCompaction() {
  var queue = TagQueue()
  for tag in UInt(1)...5000 { queue.append(tag) }
  for expected in UInt(1)...3000 {
    #expect(queue.first == expected)
    queue.removeFirst()
  }
  queue.append(5001)
  for expected in UInt(3001)...5001 {
    #expect(queue.first == expected)
    queue.removeFirst()
  }
  #expect(queue.first == nil)
}
