import CountdownClient
import Foundation
import Testing

/// Consumes a `changes()` sequence and lets a test await the first element that matches,
/// with a deadline: woken by each element, never by polling.
actor Recorder {
  private(set) var updates: [SessionUpdate] = []
  private var waiters:
    [(UUID, @Sendable (SessionUpdate) -> Bool, CheckedContinuation<SessionUpdate, any Error>)] = []
  private var ended = false
  /// Where the next search starts: after the last element a `next` returned.
  private var cursor = 0
  private var consumer: Task<Void, Never>?

  struct Timeout: Error, CustomStringConvertible {
    let what: String
    let last: SessionUpdate?
    var description: String { "timed out waiting for \(what); last: \(String(describing: last))" }
  }
  struct Ended: Error {}

  init(_ stream: AsyncStream<SessionUpdate>) {
    let task = Task { [weak self] in
      for await update in stream { await self?.add(update) }
      await self?.finish()
    }
    Task { await self.keep(task) }
  }

  private func keep(_ task: Task<Void, Never>) { consumer = task }

  /// Stops consuming, which ends the watch (its stream is closed).
  func cancel() { consumer?.cancel() }

  var isEnded: Bool { ended }

  private func add(_ update: SessionUpdate) {
    updates.append(update)
    var still:
      [(UUID, @Sendable (SessionUpdate) -> Bool, CheckedContinuation<SessionUpdate, any Error>)] =
        []
    for w in waiters {
      if w.1(update) {
        cursor = updates.count
        w.2.resume(returning: update)
      } else {
        still.append(w)
      }
    }
    waiters = still
  }

  private func finish() {
    ended = true
    for w in waiters { w.2.resume(throwing: Ended()) }
    waiters = []
  }

  private func expire(_ id: UUID, _ what: String) {
    guard let i = waiters.firstIndex(where: { $0.0 == id }) else { return }
    waiters.remove(at: i).2.resume(throwing: Timeout(what: what, last: updates.last))
  }

  /// The first element after the one the last `next` returned for which `match` holds,
  /// waiting for it at most `seconds`.
  func next(
    _ what: String, within seconds: Double = 10,
    where match: @escaping @Sendable (SessionUpdate) -> Bool
  ) async throws -> SessionUpdate {
    if let i = updates[cursor...].firstIndex(where: match) {
      cursor = i + 1
      return updates[i]
    }
    if ended { throw Ended() }
    let id = UUID()
    return try await withCheckedThrowingContinuation { c in
      waiters.append((id, match, c))
      Task {
        try? await Task.sleep(nanoseconds: UInt64(seconds * 1_000_000_000))
        self.expire(id, what)
      }
    }
  }
}

extension SessionUpdate {
  var isConnected: Bool { connection == .connected }
  var isReconnecting: Bool {
    if case .reconnecting = connection { return true }
    return false
  }
}
