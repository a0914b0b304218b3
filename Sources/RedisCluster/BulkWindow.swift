/// Reads and recounts for many sessions at once (a reconcile, a recount
/// after a lapse) go out `size` at a time, the next as replies come back:
/// one loop iteration then costs a window, not the session count, and a
/// command queues behind a window at most. The change feed's reads and
/// presence's counts share the one window, since they share the connection.
final class BulkWindow {
  enum Item: Hashable {
    case read(String)
    case viewers(String)
  }

  /// Sends an item when its turn comes, calling `done` with its reply. Returns
  /// nil when there is nothing to send any more, false when the connection is down.
  typealias Send = (_ item: Item, _ done: @escaping RedisConnection.Handler) -> Bool?

  static let defaultSize = 256

  let size: Int
  /// Set by whoever composes the parts: the change feed sends reads, presence counts.
  var send: Send = { _, _ in nil }
  /// Hears what a lost connection dropped unsent (presence queues its counts again).
  var onDrop: ([Item]) -> Void = { _ in }
  /// The most that were in flight at once.
  private(set) var peakInFlight = 0

  /// Waiting work, from `head` on, and how much of it is sent.
  private var queue: [Item] = []
  private var head = 0
  private var inFlight = 0
  /// Items waiting, so none is queued twice.
  private var waiting: Set<Item> = []

  init(size: Int = BulkWindow.defaultSize) { self.size = size }

  /// Queues an item unless it is waiting already.
  func add(_ item: Item) {
    if waiting.insert(item).inserted { queue.append(item) }
  }

  /// Sends waiting work while fewer than `size` are in flight.
  func pump() {
    while inFlight < size, head < queue.count {
      let item = queue[head]
      head += 1
      waiting.remove(item)
      let sent = send(item) { [weak self] _ in
        guard let self else { return }
        inFlight -= 1
        pump()
      }
      guard let sent else { continue }
      guard sent else {
        // The connection is down: what it comes back to sends it all again.
        drop()
        return
      }
      inFlight += 1
      peakInFlight = max(peakInFlight, inFlight)
    }
    if head == queue.count {
      queue.removeAll(keepingCapacity: true)
      head = 0
    }
  }

  /// Forgets every waiting item, and says which.
  func drop() {
    let dropped = Array(queue[head...])
    queue.removeAll()
    head = 0
    waiting.removeAll()
    if !dropped.isEmpty { onDrop(dropped) }
  }
}
