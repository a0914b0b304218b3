/// One connection's keepalive: ping it after a silence, hang up when the
/// ping goes unanswered, and hang up when it cannot take what it is owed.
/// A value with one `mutating func` per event, each returning what the
/// server must do; time comes in as a parameter. The limits are passed to
/// `swept` rather than kept here, since every viewer holds one of these.
///
/// Not lws's own keepalive, nor a timer per connection: those re-arm a timer
/// on every frame and pong, in one sorted list, so a ping round over many
/// quiet viewers cost O(n²) (bench/PROFILE.md). The server sweeps every
/// connection in one pass per interval instead (`CountdownServer`).
struct Keepalive {
  struct Limits: Equatable {
    /// Silence after which the connection is owed a ping (ms).
    var pingAfter: Int64
    /// Silence after which a pinged connection is hung up (ms).
    var hangUpAfter: Int64
    /// How long it may wait to be written before it is hung up (ms).
    var stuckAfter: Int64
  }

  enum Action: Equatable {
    case none
    /// Ask lws for a writable callback.
    case requestWritable
    /// Write the keepalive frame now (a ping, or an event stream's comment).
    case ping
    /// Close it: silent past its ping, or stuck.
    case hangUp
  }

  /// When anything last showed the connection alive (ms).
  private var lastHeard: Int64
  /// When it was pinged in this silence (0: not yet).
  private var pingedAt: Int64 = 0
  /// When it began waiting to be written (0: not waiting).
  private var waitingSince: Int64 = 0
  /// Owed a keepalive frame at its next writable callback.
  private var pingDue = false

  init(now: Int64) {
    lastHeard = now
  }

  /// Something arrived (a message, a fragment, a pong): it is alive.
  mutating func heard(now: Int64) -> Action {
    lastHeard = now
    pingedAt = 0
    return .none
  }

  /// It has something to be written: the stuck clock starts, unless it runs.
  mutating func waiting(now: Int64) -> Action {
    if waitingSince == 0 { waitingSince = now }
    return .requestWritable
  }

  /// lws says it may be written: it is not stuck.
  mutating func writable() -> Action {
    waitingSince = 0
    return .none
  }

  /// At a writable callback with no frame to write: the ping, when one is owed.
  mutating func nothingElseToWrite() -> Action {
    guard pingDue else { return .none }
    pingDue = false
    return .ping
  }

  /// Whether a ping still waits for its writable callback.
  var owesPing: Bool { pingDue }

  /// The periodic sweep. Hangs up only after a ping went unanswered: a sweep
  /// that came late could otherwise skip the ping window and close a live
  /// connection.
  mutating func swept(now: Int64, limits: Limits) -> Action {
    let silent = now - lastHeard
    if (silent >= limits.hangUpAfter && pingedAt != 0)
      || (waitingSince != 0 && now - waitingSince >= limits.stuckAfter)
    {
      return .hangUp
    }
    guard silent >= limits.pingAfter && pingedAt == 0 else { return .none }
    pingedAt = now
    pingDue = true
    return .requestWritable
  }
}
