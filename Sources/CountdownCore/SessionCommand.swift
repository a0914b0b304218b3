/// What a controller asks of a session, admitted and typed: the one schema of
/// the command path, from the decoder (`WireCodec.decode`) through the gate
/// and the sequencer to the rules (`SessionRecord.applying`) and Redis's
/// function (`CommandCall`). A new op is a case here plus its rules; every
/// switch over it is exhaustive, so the compiler names each place to change.
public enum SessionCommand: Equatable, Sendable {
  /// `length` is already resolved: a start that named no length has the server's default.
  case start(StartLength, finishedLabel: String?)
  case cancel
  case pause
  case resume
  /// Moves the deadline (or the frozen time left) by this many seconds, either way.
  case adjust(seconds: Int)
  /// Replaces the session's controller key (key mode): the hash of the new
  /// key, which the sequencer stores so the old key stops working everywhere.
  /// The hub makes the key when it admits the request (`ClientRequest.rotateKey`).
  case rotateKey(KeyHash)

  /// The ops, by their name on the wire and in metrics, and in Redis's function.
  public enum Op: String, CaseIterable, Sendable {
    case start
    case cancel
    case pause
    case resume
    case adjust
    case rotateKey = "rotate_key"
  }

  public var op: Op {
    switch self {
    case .start: .start
    case .cancel: .cancel
    case .pause: .pause
    case .resume: .resume
    case .adjust: .adjust
    case .rotateKey: .rotateKey
    }
  }
}

/// How long a start runs: a number of seconds, or until a moment.
public enum StartLength: Equatable, Sendable {
  case seconds(Int)
  /// A deadline in epoch ms.
  case until(Int64)
}
