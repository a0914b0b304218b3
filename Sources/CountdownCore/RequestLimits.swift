/// The command rate of HTTP requests, which may each come on a new
/// connection: one bucket per client address and one per API token, in a
/// table of bounded size. A bucket left alone for a second is full again, as
/// good as none, so those are what a full table drops; when every one is in
/// use, a new client is refused as over the rate rather than let the table
/// grow without bound.
///
/// The buckets are kept in the order they were last used, so the one a full
/// table could drop is always at the head: a request looks at a few entries
/// at most, however many there are, and a flood of new addresses against a
/// full table costs each refusal one look rather than a pass over the table.
public struct RequestLimits {
  public static let maxEntries = 65_536
  /// Idle buckets dropped from the head per request beyond the one a new
  /// key needs, so that a table drains once its flood has passed.
  static let dropsPerRequest = 2

  private struct Entry {
    var key: String
    var bucket: TokenBucket
    var lastUsed: Int64
    var older: Int32
    var newer: Int32
  }

  let capacity: Int
  private var slots: [String: Int32] = [:]
  private var entries: [Entry] = []
  private var free: [Int32] = []
  /// The least recently used entry, and the most (-1: none).
  private var oldest: Int32 = -1
  private var newest: Int32 = -1
  /// Entries looked at to find idle ones, since the table was made: what a
  /// test counts to prove the work per request stays bounded.
  private(set) var visited = 0

  public init(capacity: Int = maxEntries) { self.capacity = max(1, capacity) }

  public var count: Int { slots.count }

  /// Takes one command from each bucket named in `keys`; false (and nothing
  /// taken from the others) when any is empty.
  public mutating func take(_ keys: [String], rate: Double, now: Int64) -> Bool {
    dropIdle(now: now, atMost: Self.dropsPerRequest)
    for key in keys where slots[key] == nil {
      if slots.count >= capacity { dropIdle(now: now, atMost: 1) }
      guard slots.count < capacity else { return false }
      insert(key, TokenBucket(rate: rate, now: now), now: now)
    }
    // Checked on copies first, so that one full bucket does not cost the others.
    for key in keys {
      var probe = entries[Int(slots[key]!)].bucket
      guard probe.take(rate: rate, now: now) else { return false }
    }
    for key in keys {
      let slot = slots[key]!
      _ = entries[Int(slot)].bucket.take(rate: rate, now: now)
      entries[Int(slot)].lastUsed = now
      moveToNewest(slot)
    }
    return true
  }

  /// Drops up to `atMost` buckets idle a second, oldest first: the head is
  /// the least recently used, so the first one in use ends the look.
  private mutating func dropIdle(now: Int64, atMost: Int) {
    for _ in 0..<atMost {
      guard oldest >= 0 else { return }
      visited += 1
      let slot = oldest
      guard now - entries[Int(slot)].lastUsed >= 1000 else { return }
      unlink(slot)
      slots[entries[Int(slot)].key] = nil
      entries[Int(slot)].key = ""
      free.append(slot)
    }
  }

  private mutating func insert(_ key: String, _ bucket: TokenBucket, now: Int64) {
    let entry = Entry(key: key, bucket: bucket, lastUsed: now, older: -1, newer: -1)
    let slot: Int32
    if let reused = free.popLast() {
      slot = reused
      entries[Int(slot)] = entry
    } else {
      slot = Int32(entries.count)
      entries.append(entry)
    }
    slots[key] = slot
    link(slot)
  }

  private mutating func moveToNewest(_ slot: Int32) {
    guard slot != newest else { return }
    unlink(slot)
    link(slot)
  }

  private mutating func link(_ slot: Int32) {
    entries[Int(slot)].older = newest
    entries[Int(slot)].newer = -1
    if newest >= 0 { entries[Int(newest)].newer = slot } else { oldest = slot }
    newest = slot
  }

  private mutating func unlink(_ slot: Int32) {
    let (older, newer) = (entries[Int(slot)].older, entries[Int(slot)].newer)
    if older >= 0 { entries[Int(older)].newer = newer } else { oldest = newer }
    if newer >= 0 { entries[Int(newer)].older = older } else { newest = older }
  }
}
