import CLibWebSockets
import Synchronization

/// The one way for other threads to reach the service thread: `post` queues a
/// closure and wakes the loop with `lws_cancel_service`, and the service
/// thread runs the queue in `LWS_CALLBACK_EVENT_WAIT_CANCELLED`, in posting
/// order, then pushes whatever the work changed in the hub to lws. Values for
/// a handler that lives on the service thread (and so cannot travel in a
/// Sendable closure) come through the same queue, in the same order, from
/// `CountdownServer.onServiceThread`. Work already on the service thread does
/// not come here: it runs directly (`CountdownServer.runOnServiceThread`).
///
/// Works the same on poll and libev, because both wake through lws's event
/// pipe. Work posted before `run` starts runs once it does; work posted after
/// the server stopped is refused (`post` returns false), and work still queued
/// when it stops is dropped without running.
public final class ServiceQueue: Sendable {
  /// One thing posted: work, or a value for the service thread's handler number `handler`.
  enum Item: Sendable {
    case work(@Sendable () -> Void)
    case value(any Sendable, handler: Int)
  }

  private struct State {
    /// The running context's address, or nil before `run` and after it ends;
    /// an address because a pointer is not Sendable, and the context is only
    /// ever passed to lws_cancel_service, which any thread may call.
    var contextAddress: UInt?
    var context: OpaquePointer? { contextAddress.flatMap { OpaquePointer(bitPattern: $0) } }
    var work: [Item] = []
    var closed = false
  }

  private let state = Mutex(State())

  init() {}

  /// Runs `work` on the service thread soon. Thread-safe; never blocks on the
  /// service thread. Returns false when the server has already stopped.
  @discardableResult
  public func post(_ work: @escaping @Sendable () -> Void) -> Bool {
    post(.work(work))
  }

  /// Queues `value` for the service thread's handler number `handler`; as `post`.
  @discardableResult
  func post(_ value: any Sendable, to handler: Int) -> Bool {
    post(.value(value, handler: handler))
  }

  private func post(_ item: Item) -> Bool {
    state.withLock { state in
      guard !state.closed else { return false }
      state.work.append(item)
      // One wake-up per batch: a non-empty queue already has one coming.
      if state.work.count == 1, let context = state.context { lws_cancel_service(context) }
      return true
    }
  }

  /// Called on the service thread once the context exists.
  func open(_ context: LWSContext) {
    let address = UInt(bitPattern: context.raw)
    state.withLock { state in
      state.contextAddress = address
      state.closed = false
      if !state.work.isEmpty, let context = state.context { lws_cancel_service(context) }
    }
  }

  /// Called on the service thread before the context is destroyed.
  func close() {
    state.withLock { state in
      state.contextAddress = nil
      state.closed = true
      state.work = []
    }
  }

  /// Everything posted so far, taken off the queue.
  func take() -> [Item] {
    state.withLock { state in
      let work = state.work
      state.work = []
      return work
    }
  }
}
