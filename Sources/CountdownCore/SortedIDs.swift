/// Sessions in id order, for a paged list: a sorted array cut into chunks of
/// at most `chunkLimit`, so an insert or a removal moves at most one chunk's
/// elements (plus a binary search over the chunks' first ids), and a page
/// `after` an id is a search plus the page itself, never a sort of them all.
///
/// It holds handles, not ids: the hub's slot already holds each id, and a
/// handle costs a quarter of a `String`, for every session. Each call takes
/// `idOf`, the id a handle names now; a handle must leave before its slot does.
struct SortedIDs<Handle: Equatable> {
  static var chunkLimit: Int { 512 }

  private var chunks: [[Handle]] = []
  private(set) var count = 0

  /// The chunk that holds `id`, or would: the last whose first id is not after it.
  private func chunkIndex(for id: String, _ idOf: (Handle) -> String) -> Int {
    var low = 0
    var high = chunks.count
    while low < high {
      let middle = (low + high) / 2
      if idOf(chunks[middle][0]) <= id { low = middle + 1 } else { high = middle }
    }
    return max(0, low - 1)
  }

  /// The first position in `chunk` whose id is not before `id` (or, `after`, not `id` itself).
  private static func position(
    of id: String, in chunk: [Handle], after: Bool = false, _ idOf: (Handle) -> String
  ) -> Int {
    var low = 0
    var high = chunk.count
    while low < high {
      let middle = (low + high) / 2
      let there = idOf(chunk[middle])
      if there < id || (after && there == id) {
        low = middle + 1
      } else {
        high = middle
      }
    }
    return low
  }

  /// Adds `handle`, which names `id`; an id already here is not added again.
  mutating func insert(_ handle: Handle, id: String, idOf: (Handle) -> String) {
    guard !chunks.isEmpty else {
      chunks = [[handle]]
      count = 1
      return
    }
    let index = chunkIndex(for: id, idOf)
    let at = Self.position(of: id, in: chunks[index], idOf)
    if at < chunks[index].count, idOf(chunks[index][at]) == id { return }
    chunks[index].insert(handle, at: at)
    count += 1
    if chunks[index].count > Self.chunkLimit {
      let half = chunks[index].count / 2
      let tail = Array(chunks[index][half...])
      chunks[index].removeSubrange(half...)
      chunks.insert(tail, at: index + 1)
    }
  }

  /// Drops `handle`, which names `id`, if it is here.
  mutating func remove(_ handle: Handle, id: String, idOf: (Handle) -> String) {
    guard !chunks.isEmpty else { return }
    let index = chunkIndex(for: id, idOf)
    let at = Self.position(of: id, in: chunks[index], idOf)
    guard at < chunks[index].count, chunks[index][at] == handle else { return }
    chunks[index].remove(at: at)
    count -= 1
    if chunks[index].isEmpty { chunks.remove(at: index) }
  }

  /// At most `limit` handles in id order, each naming an id after `after` when given.
  func page(after: String?, limit: Int, idOf: (Handle) -> String) -> [Handle] {
    guard !chunks.isEmpty, limit > 0 else { return [] }
    var index = 0
    var at = 0
    if let after {
      index = chunkIndex(for: after, idOf)
      at = Self.position(of: after, in: chunks[index], after: true, idOf)
    }
    var page: [Handle] = []
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
