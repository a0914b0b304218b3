/// Every session's next due time in one binary min-heap, keyed by small
/// integer handles so a session can move its deadline in O(log n).
///
/// One lws timer is armed for `earliest`; it never holds one timer per session.
public struct DeadlineHeap: Sendable {
  private struct Entry: Sendable {
    var due: Int64
    var key: Int32
  }

  private var entries: [Entry] = []
  /// Position in `entries` for each key, or -1.
  private var positions: [Int32] = []

  public init() {}

  public var count: Int { entries.count }
  public var isEmpty: Bool { entries.isEmpty }

  /// The soonest deadline, if any.
  public var earliest: Int64? { entries.first?.due }

  public func deadline(of key: Int32) -> Int64? {
    let position = Int(key) < positions.count ? positions[Int(key)] : -1
    return position < 0 ? nil : entries[Int(position)].due
  }

  /// Sets, moves or (with nil) removes the deadline of `key`.
  public mutating func set(_ key: Int32, to due: Int64?) {
    let slot = Int(key)
    if slot >= positions.count {
      positions.append(contentsOf: repeatElement(-1, count: slot - positions.count + 1))
    }
    let position = Int(positions[slot])
    switch (position >= 0, due) {
    case (false, nil):
      return
    case (false, let due?):
      entries.append(Entry(due: due, key: key))
      positions[slot] = Int32(entries.count - 1)
      siftUp(entries.count - 1)
    case (true, nil):
      remove(at: position)
    case (true, let due?):
      let old = entries[position].due
      entries[position].due = due
      if due < old { siftUp(position) } else { siftDown(position) }
    }
  }

  /// Removes and returns the key with the soonest deadline if it is due at `now`.
  public mutating func popDue(now: Int64) -> Int32? {
    guard let first = entries.first, first.due <= now else { return nil }
    remove(at: 0)
    return first.key
  }

  private mutating func remove(at position: Int) {
    let removed = entries[position].key
    positions[Int(removed)] = -1
    let last = entries.removeLast()
    guard position < entries.count else { return }
    entries[position] = last
    positions[Int(last.key)] = Int32(position)
    siftDown(position)
    siftUp(position)
  }

  private mutating func siftUp(_ start: Int) {
    var child = start
    let entry = entries[child]
    while child > 0 {
      let parent = (child - 1) / 2
      guard entry.due < entries[parent].due else { break }
      entries[child] = entries[parent]
      positions[Int(entries[child].key)] = Int32(child)
      child = parent
    }
    entries[child] = entry
    positions[Int(entry.key)] = Int32(child)
  }

  private mutating func siftDown(_ start: Int) {
    var parent = start
    let entry = entries[parent]
    let count = entries.count
    while true {
      var child = 2 * parent + 1
      guard child < count else { break }
      if child + 1 < count && entries[child + 1].due < entries[child].due { child += 1 }
      guard entries[child].due < entry.due else { break }
      entries[parent] = entries[child]
      positions[Int(entries[parent].key)] = Int32(parent)
      parent = child
    }
    entries[parent] = entry
    positions[Int(entry.key)] = Int32(parent)
  }
}
