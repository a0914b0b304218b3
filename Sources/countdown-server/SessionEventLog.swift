import CountdownCore
import Observability

/// Logs each session's phase changes (`session_running`, `session_finished`,
/// …) and, at debug level, every tick. Reads only the patch it is handed, so
/// it costs nothing per viewer.
final class SessionEventLog: HubObserver {
  let logger: Logger
  /// Whoever else listens to the hub (storage, Redis) in a later issue.
  let next: (any HubObserver)?

  init(logger: Logger, next: (any HubObserver)? = nil) {
    self.logger = logger
    self.next = next
  }

  func hub(published patch: Patch, session: String) {
    if patch.fields.contains(.phase) {
      var fields: [(String, LogValue)] = [
        ("session", LogValue(session)), ("seq", LogValue(patch.seq)),
        ("remaining", LogValue(patch.state.remaining)),
      ]
      // How it ended: a CI job's result reads in the log as on the page.
      if let outcome = patch.state.outcome {
        fields.append(("outcome", LogValue(outcome.rawValue)))
      }
      logger.info("session_\(patch.state.phase.rawValue)", fields: fields)
    } else if patch.fields.contains(.remaining) && logger.enabled(.debug) {
      logger.debug(
        "session_tick",
        [
          "session": LogValue(session), "seq": LogValue(patch.seq),
          "remaining": LogValue(patch.state.remaining),
        ])
    }
    next?.hub(published: patch, session: session)
  }

  func hub(forgot session: String) {
    logger.debug("session_forgotten", ["session": LogValue(session)])
    next?.hub(forgot: session)
  }
}
