/// Session ids in order, for a paged list: a sorted array cut into chunks of
/// at most `chunkLimit`, so an insert or a removal moves at most one chunk's
/// elements (plus a binary search over the chunks' first ids), and a page
/// `after` an id is a search plus the page itself, never a sort of them all.
struct SortedIDs {
  static let chunkLimit = 512

  private var chunks: [[String]] = []
  private(set) var count = 0

  /// The chunk that holds `id`, or would: the last whose first id is not after it.
  private func chunkIndex(for id: String) -> Int {
    var low = 0
    var high = chunks.count
    while low < high {
      let middle = (low + high) / 2
      if chunks[middle][0] <= id { low = middle + 1 } else { high = middle }
    }
    return max(0, low - 1)
  }

  /// The first position in `chunk` whose id is not before `id` (or, `after`, not `id` itself).
  private static func position(of id: String, in chunk: [String], after: Bool = false) -> Int {
    var low = 0
    var high = chunk.count
    while low < high {
      let middle = (low + high) / 2
      if chunk[middle] < id || (after && chunk[middle] == id) {
        low = middle + 1
      } else {
        high = middle
      }
    }
    return low
  }

  mutating func insert(_ id: String) {
    guard !chunks.isEmpty else {
      chunks = [[id]]
      count = 1
      return
    }
    let index = chunkIndex(for: id)
    let at = Self.position(of: id, in: chunks[index])
    if at < chunks[index].count, chunks[index][at] == id { return }
    chunks[index].insert(id, at: at)
    count += 1
    if chunks[index].count > Self.chunkLimit {
      let half = chunks[index].count / 2
      let tail = Array(chunks[index][half...])
      chunks[index].removeSubrange(half...)
      chunks.insert(tail, at: index + 1)
    }
  }

  mutating func remove(_ id: String) {
    guard !chunks.isEmpty else { return }
    let index = chunkIndex(for: id)
    let at = Self.position(of: id, in: chunks[index])
    guard at < chunks[index].count, chunks[index][at] == id else { return }
    chunks[index].remove(at: at)
    count -= 1
    if chunks[index].isEmpty { chunks.remove(at: index) }
  }

  /// At most `limit` ids in order, each after `after` when given.
  func page(after: String?, limit: Int) -> [String] {
    guard !chunks.isEmpty, limit > 0 else { return [] }
    var index = 0
    var at = 0
    if let after {
      index = chunkIndex(for: after)
      at = Self.position(of: after, in: chunks[index], after: true)
    }
    var page: [String] = []
    page.reserveCapacity(min(limit, count))
    while index < chunks.count, page.count < limit {
      let chunk = chunks[index]
      let take = min(chunk.count - at, limit - page.count)
      if take > 0 { page.append(contentsOf: chunk[at..<(at + take)]) }
      index += 1
      at = 0
    }
    return page
  }
}
