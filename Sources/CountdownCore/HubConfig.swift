/// Who may start and cancel a session's countdown.
public enum ControlMode: String, Sendable, CaseIterable {
  /// Anyone who can open the session.
  case open
  /// Only connections that present the session's controller key.
  case key
}

/// Everything the hub is told at start-up: session behaviour and the limits
/// that keep one client from costing the others.
public struct HubConfig: Sendable {
  public var session: SessionConfig
  /// Live sessions at most; joining a new id past this is refused.
  public var maxSessions: Int
  /// Running or paused sessions started from one client address at most;
  /// a start past this gets `too_many_sessions`.
  public var maxSessionsPerAddress: Int
  /// Sustained commands per second per connection (the token bucket's rate and size).
  public var commandsPerSecond: Double
  /// A connection still over its rate after this long is closed with 1008.
  public var floodCloseAfterMs: Int64
  public var control: ControlMode
  /// Webhooks are on: every change a webhook reports is recorded with it
  /// (`WebhookEvent`, through the sequencer). Off, nothing is recorded.
  public var recordsEvents: Bool

  public init(
    session: SessionConfig = SessionConfig(), maxSessions: Int = 100_000,
    maxSessionsPerAddress: Int = 1000, commandsPerSecond: Double = 20,
    floodCloseAfterMs: Int64 = 5000, control: ControlMode = .open, recordsEvents: Bool = false
  ) {
    self.session = session
    self.maxSessions = maxSessions
    self.maxSessionsPerAddress = maxSessionsPerAddress
    self.commandsPerSecond = commandsPerSecond
    self.floodCloseAfterMs = floodCloseAfterMs
    self.control = control
    self.recordsEvents = recordsEvents
  }
}
