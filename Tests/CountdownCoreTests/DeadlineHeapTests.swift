import TestSupport
import Testing

@testable import CountdownCore

@Suite struct DeadlineHeapTests {
  /// 100k sessions due at mixed times come out in deadline order, each exactly once.
  @Test func hundredThousandMixedDeadlines() {
    var heap = DeadlineHeap()
    var generator = SeededRandom(seed: 42)
    var due: [Int64] = []
    for key in 0..<100_000 {
      let time = Int64(generator.next() % 1_000_000)
      due.append(time)
      heap.set(Int32(key), to: time)
    }
    // Move a tenth of them, and drop another tenth.
    for key in stride(from: 0, to: 100_000, by: 10) {
      due[key] = Int64(generator.next() % 1_000_000)
      heap.set(Int32(key), to: due[key])
      heap.set(Int32(key + 1), to: nil)
      due[key + 1] = -1
    }
    var popped: [Int32] = []
    var last = Int64.min
    while let key = heap.popDue(now: .max) {
      #expect(due[Int(key)] >= last)
      last = due[Int(key)]
      popped.append(key)
    }
    #expect(popped.count == 90_000)
    #expect(Set(popped).count == 90_000)
    #expect(!popped.contains { due[Int($0)] == -1 })
  }

  /// Only what is due is popped; the rest waits, and earliest names the next one.
  @Test func popsOnlyDue() {
    var heap = DeadlineHeap()
    heap.set(1, to: 300)
    heap.set(2, to: 100)
    heap.set(3, to: 200)
    #expect(heap.earliest == 100)
    #expect(heap.popDue(now: 150) == 2)
    #expect(heap.popDue(now: 150) == nil)
    #expect(heap.earliest == 200)
    heap.set(1, to: 50)
    #expect(heap.deadline(of: 1) == 50)
    #expect(heap.popDue(now: 250) == 1)
    #expect(heap.popDue(now: 250) == 3)
    #expect(heap.isEmpty)
  }
}
