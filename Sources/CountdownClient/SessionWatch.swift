import Foundation

/// What the watch loop does after an event.
enum WatchAction: Sendable, Hashable {
  /// Hand this update to the sequence.
  case emit(SessionUpdate)
  /// Nothing changed (a stale patch, an event type this client does not read).
  case ignore
  /// The stream said something that cannot be applied: close it and reconnect.
  case drop(CountdownError)
  /// Hand this update on, wait `after` seconds, connect again.
  case retry(after: Double, SessionUpdate)
  /// Hand this update on and end the sequence.
  case stop(SessionUpdate)
}

/// A watch of one session as a value: the state it has built from the stream's snapshots
/// and patches, and its reconnect attempts. One `mutating func` per event, the time and the
/// randomness passed in, so every path is tested without a network.
struct SessionWatch: Sendable {
  private(set) var update: SessionUpdate
  private var attempt = 0
  let backoff: Backoff
  /// The longest `Retry-After` waited out before reconnecting.
  let maxRetryAfter: Double

  init(session: String, backoff: Backoff, maxRetryAfter: Double = 30) {
    update = SessionUpdate(session: session)
    self.backoff = backoff
    self.maxRetryAfter = maxRetryAfter
  }

  /// The `Last-Event-ID` to resume from: the last seq applied, once a snapshot came.
  var lastEventID: Int64? { update.epoch == nil ? nil : update.seq }

  /// An event of a stream whose request went out at `sentAt`, received at `now`.
  mutating func received(_ event: ServerSentEvent, sentAt: Date, at now: Date) -> WatchAction {
    do {
      switch event.type {
      case "snapshot":
        let snap = try JSONDecoder().decode(SessionSnapshot.self, from: Data(event.data.utf8))
        guard snap.session == update.session else {
          return .drop(.badResponse(status: 200, "a snapshot of another session"))
        }
        if snap.epoch != update.epoch { update.clock.reset() }
        // Written after the request arrived and before it was read here: within that span.
        update.clock.add(serverTime: snap.serverTime, sentAt: sentAt, receivedAt: now)
        update.epoch = snap.epoch
        update.seq = snap.seq
        update.state = snap.state
        update.connection = .connected
        attempt = 0
        return .emit(update)
      case "patch":
        guard let state = update.state else {
          return .drop(.badResponse(status: 200, "a patch before any snapshot"))
        }
        let frame = try JSONDecoder().decode(PatchFrame.self, from: Data(event.data.utf8))
        guard frame.seq > update.seq else { return .ignore }
        update.seq = frame.seq
        update.state = frame.patch.applied(to: state)
        return .emit(update)
      default:
        return .ignore
      }
    } catch {
      return .drop(.badResponse(status: 200, "\(event.type): \(CountdownClient.describe(error))"))
    }
  }

  /// The stream ended, or could not be opened, because of `error`; `random` in [0, 1)
  /// draws the backoff's jitter.
  mutating func lost(_ error: CountdownError, random: Double) -> WatchAction {
    if Self.isFinal(error) {
      update.connection = .closed(error)
      return .stop(update)
    }
    var delay = backoff.delay(attempt: attempt, random: random)
    if case .refused(let r) = error, let after = r.retryAfter {
      delay = max(delay, min(after, maxRetryAfter))
    }
    attempt = attempt == Int.max ? attempt : attempt + 1
    update.connection = .reconnecting(attempt: attempt, retryIn: delay, reason: error)
    return .retry(after: delay, update)
  }

  /// A 200 that is not an event stream: another server, or a proxy's page, under the base
  /// URL. Final: retrying will not make it a countdown server.
  static func refusesStream(status: Int, isEventStream: Bool) -> CountdownError? {
    guard status == 200, !isEventStream else { return nil }
    return .invalidArgument("the base URL answers the event stream's path with no event stream")
  }

  /// Refusals that a retry cannot change: a 4xx other than 429 (an id or origin the server
  /// refuses), or a value this client would not send. Everything else (no answer, a 5xx,
  /// a garbled event) is retried: the next connection starts from a fresh snapshot.
  static func isFinal(_ error: CountdownError) -> Bool {
    switch error {
    case .refused(let r): return !r.isTransient && (400..<500).contains(r.status) && r.status != 429
    case .badResponse(let status, _): return (400..<500).contains(status) && status != 429
    case .invalidArgument: return true
    case .unreachable: return false
    }
  }
}
