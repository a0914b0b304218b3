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

  public init(
    session: SessionConfig = SessionConfig(), maxSessions: Int = 100_000,
    maxSessionsPerAddress: Int = 1000, commandsPerSecond: Double = 20,
    floodCloseAfterMs: Int64 = 5000, control: ControlMode = .open
  ) {
    self.session = session
    self.maxSessions = maxSessions
    self.maxSessionsPerAddress = maxSessionsPerAddress
    self.commandsPerSecond = commandsPerSecond
    self.floodCloseAfterMs = floodCloseAfterMs
    self.control = control
  }
}

/// A token bucket holding up to one second of commands, refilled continuously.
struct TokenBucket: Sendable {
  private var tokens: Double
  private var refilledAt: Int64
  /// When the current unbroken run of refusals began (`Int64.min`: none yet),
  /// kept without an optional's padding since every viewer has a bucket.
  private var floodStart = Int64.min
  private var lastRefusalAt = Int64.min / 2

  /// When the current unbroken run of refusals began, if one is under way.
  var floodingSince: Int64? { floodStart == .min ? nil : floodStart }

  init(rate: Double, now: Int64) {
    tokens = rate
    refilledAt = now
  }

  /// Takes one token if there is one. A refusal more than a second after the
  /// previous one starts a new run, so a client that merely bursts now and
  /// then is never taken for a flooder.
  mutating func take(rate: Double, now: Int64) -> Bool {
    tokens = min(rate, tokens + Double(now - refilledAt) * rate / 1000)
    refilledAt = now
    if tokens >= 1 {
      tokens -= 1
      return true
    }
    if now - lastRefusalAt > 1000 { floodStart = now }
    lastRefusalAt = now
    return false
  }
}

/// A controller key: 128 random bits from the system CSPRNG, held as bits (16
/// bytes, no allocation) and shown as 32 hex digits. Kept and compared as a
/// `KeyHash`.
public struct ControllerKey: Equatable, Sendable {
  private let bits: UInt128

  public init(bits: UInt128) { self.bits = bits }

  public static func generate() -> ControllerKey {
    var generator = SystemRandomNumberGenerator()
    return ControllerKey(bits: generator.next())
  }

  /// The key as clients see it: 32 lowercase hex digits.
  public var hex: String { Self.hex(bits) }

  static func hex<T: FixedWidthInteger & UnsignedInteger>(_ value: T) -> String {
    let digits = String(value, radix: 16)
    return String(repeating: "0", count: T.bitWidth / 4 - digits.count) + digits
  }
}
