/// The command rate of HTTP requests, which may each come on a new
/// connection: one bucket per client address and one per API token, in a
/// table of bounded size. A bucket left alone for a second is full again, as
/// good as none, so those are what a full table drops; when every one is in
/// use, a new client is refused as over the rate rather than let the table
/// grow without bound.
struct RequestLimits {
  static let maxEntries = 65_536

  private struct Entry {
    var bucket: TokenBucket
    var lastUsed: Int64
  }

  private var entries: [String: Entry] = [:]

  var count: Int { entries.count }

  /// Takes one command from each bucket named in `keys`; false (and nothing
  /// taken from the others) when any is empty.
  mutating func take(_ keys: [String], rate: Double, now: Int64) -> Bool {
    for key in keys where entries[key] == nil {
      if entries.count >= Self.maxEntries {
        entries = entries.filter { now - $0.value.lastUsed < 1000 }
      }
      guard entries.count < Self.maxEntries else { return false }
      entries[key] = Entry(bucket: TokenBucket(rate: rate, now: now), lastUsed: now)
    }
    // Checked on copies first, so that one full bucket does not cost the others.
    for key in keys {
      var probe = entries[key]!.bucket
      guard probe.take(rate: rate, now: now) else { return false }
    }
    for key in keys {
      _ = entries[key]!.bucket.take(rate: rate, now: now)
      entries[key]!.lastUsed = now
    }
    return true
  }
}
