import Foundation

/// Where a watch's event stream stands.
public enum ConnectionState: Sendable, Hashable {
  /// Opening the first connection.
  case connecting
  /// The stream is open and its snapshot arrived: the state is live.
  case connected
  /// Lost (or never reached); the next try starts in `retryIn` seconds. Stays so through
  /// that try until a snapshot arrives, as the page's indicator does.
  case reconnecting(attempt: Int, retryIn: Double, reason: CountdownError)
  /// The server refused the stream in a way retrying cannot change (an unknown route, a
  /// refused origin); the sequence ends after this.
  case closed(CountdownError)
}

/// What a watch knows of its session at one moment: an element of `changes()`.
///
/// The time left and the time elapsed are computed when asked, from the server's deadline
/// and the estimated offset of its clock, so a display that redraws every frame never
/// drifts from the server's, however late the events arrive.
public struct SessionUpdate: Sendable, Hashable {
  public let session: String
  /// The server's run: nil before the first snapshot; a new one means a restarted server.
  public internal(set) var epoch: String?
  /// The last applied snapshot's or patch's seq (0 before any).
  public internal(set) var seq: Int64 = 0
  /// The session's state; nil until the first snapshot. Kept through a reconnect, so a
  /// display can go on showing it (marked by `connection`).
  public internal(set) var state: SessionState?
  public internal(set) var connection: ConnectionState = .connecting
  /// Server minus local clock, from the snapshots' `serverTime`.
  public internal(set) var clock = ClockOffset()

  public init(session: String) { self.session = session }

  public var phase: Phase? { state?.phase }
  /// Show the spinner: true exactly while running or waiting.
  public var spinner: Bool { state?.spinner ?? false }
  /// Whether the big button may be pressed; false until the state is known.
  public var enabled: Bool { state?.enabled ?? false }
  /// The server's label (`""` until known).
  public var label: String { state?.label ?? "" }
  public var outcome: Outcome? { state?.outcome }

  /// The server's clock at local time `now`, epoch ms.
  public func serverTime(at now: Date = Date()) -> Int64 { clock.serverTime(at: now) }

  /// Seconds left while running or paused, else nil.
  public func timeLeft(now: Date = Date()) -> Double? {
    state?.millisecondsLeft(serverNow: serverTime(at: now)).map { Double($0) / 1000 }
  }

  /// Seconds elapsed: of a wait since it began; of a run, its duration less what is left.
  public func elapsed(now: Date = Date()) -> Double? {
    state?.millisecondsElapsed(serverNow: serverTime(at: now)).map { Double($0) / 1000 }
  }

  /// Seconds past the deadline in overtime, else nil.
  public func timeOver(now: Date = Date()) -> Double? {
    state?.millisecondsOver(serverNow: serverTime(at: now)).map { Double($0) / 1000 }
  }

  /// The big label as the page draws it at `now`: while running or paused the whole seconds
  /// left, rounded up, as a clock ("5", "1:05", "1:02:05", "2d 01:02:05"); in overtime the
  /// whole seconds over, counting up ("+0", "+1:05"); otherwise the server's label.
  public func clockLabel(now: Date = Date()) -> String {
    guard let state else { return "" }
    let serverNow = serverTime(at: now)
    if let over = state.millisecondsOver(serverNow: serverNow) {
      return ClockFormat.over(seconds: over / 1000)
    }
    guard let ms = state.millisecondsLeft(serverNow: serverNow) else {
      return state.label
    }
    return ClockFormat.clock(seconds: ms / 1000 + (ms % 1000 > 0 ? 1 : 0))
  }

  /// While waiting, the time elapsed as a clock that counts up ("0:05", "12:34"), else nil.
  public func elapsedLabel(now: Date = Date()) -> String? {
    guard state?.phase == .waiting,
      let ms = state?.millisecondsElapsed(serverNow: serverTime(at: now))
    else { return nil }
    return ClockFormat.elapsed(seconds: ms / 1000)
  }
}

/// Seconds as the page's clocks show them (Public/logic.js formatClock and formatElapsed).
public enum ClockFormat {
  /// Plain seconds under a minute ("5"), then m:ss, h:mm:ss, and from a day "Nd hh:mm:ss".
  public static func clock(seconds: Int64) -> String {
    let total = max(0, seconds)
    let (d, h, m, s) = (total / 86400, total % 86400 / 3600, total % 3600 / 60, total % 60)
    if total < 60 { return String(total) }
    if total < 3600 { return "\(m):\(pad(s))" }
    if total < 86400 { return "\(h):\(pad(m)):\(pad(s))" }
    return "\(d)d \(pad(h)):\(pad(m)):\(pad(s))"
  }

  /// Overtime as the server's label spells it: "+" and plain seconds under a minute ("+5"),
  /// then m:ss ("+1:05"), then h:mm:ss ("+1:00:00"), with no day part.
  public static func over(seconds: Int64) -> String {
    let s = max(0, seconds)
    if s < 60 { return "+\(s)" }
    if s < 3600 { return "+\(s / 60):\(pad(s % 60))" }
    return "+\(s / 3600):\(pad(s % 3600 / 60)):\(pad(s % 60))"
  }

  /// A clock counting up: m:ss from the first second ("0:05"), then as `clock`.
  public static func elapsed(seconds: Int64) -> String {
    let s = max(0, seconds)
    return s < 60 ? "0:\(pad(s))" : clock(seconds: s)
  }

  private static func pad(_ n: Int64) -> String { n < 10 ? "0\(n)" : String(n) }
}
