import CountdownCore
import Observability

extension SQLiteStore {
  /// The store's side of its contract with the hub (`SessionStore`): each
  /// ticketed write's outcome completes its command in `hub`, on the hub's
  /// thread, stamped by `clock`; a command that could not be stored is
  /// logged there. The writer thread reports each batch through `hop`'s
  /// function, which carries it to the hub's thread and runs the handler
  /// there (the server's `onServiceThread`). Call before the first ticketed
  /// write.
  public func completeCommands(
    in hub: Hub, clock: any WallClock,
    through hop: (@escaping ([StoreCompletion]) -> Void) -> @Sendable ([StoreCompletion]) -> Void
  ) {
    onCompleted = hop { completions in
      let now = clock.nowMilliseconds()
      for completion in completions {
        if case .unavailable(let message) = completion.outcome {
          Logger.shared.warn(
            "command_not_stored",
            ["session": LogValue(completion.session), "error": LogValue(message)])
        }
        hub.complete(completion.ticket, completion.outcome, now: now)
      }
    }
  }
}
