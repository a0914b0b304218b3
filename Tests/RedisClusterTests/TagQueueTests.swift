import Testing

@testable import RedisCluster

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
