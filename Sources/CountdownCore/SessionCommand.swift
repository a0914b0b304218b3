/// What a controller asks of a session, admitted and typed: the one schema of
/// the command path, from the decoder (`WireCodec.decode`) through the gate
/// and the sequencer to the rules (`SessionRecord.applying`) and Redis's
/// function (`CommandCall`). A new op is a case here plus its rules; every
/// switch over it is exhaustive, so the compiler names each place to change.
public enum SessionCommand: Equatable, Sendable {
  /// `length` is already resolved: a start that named no length has the server's default.
  case start(StartLength, finishedLabel: String?, options: RunOptions = .none)
  case cancel
  /// Ends a run (before zero or in overtime) with outcome `stopped`.
  case stop
  /// Sets the presenter's message, or clears it (nil).
  case message(String?)
  /// Blanks every viewer's screen, or shows them again.
  case blackout(Bool)
  case pause
  case resume
  /// Moves the deadline (or the frozen time left) by this many seconds, either way.
  case adjust(seconds: Int)
  /// Replaces the session's controller key (key mode): the hash of the new
  /// key, which the sequencer stores so the old key stops working everywhere.
  /// The hub makes the key when it admits the request (`ClientRequest.rotateKey`).
  case rotateKey(KeyHash)
  /// The spinner until a job outside says how it went: `label` while
  /// waiting, and the session finishes with `timeoutLabel` at the timeout.
  case wait(label: String?, timeoutSeconds: Int?, timeoutLabel: String?)
  /// A wait ended well, or badly; the label is the finished one.
  case done(label: String?)
  case fail(label: String?)

  /// The ops, by their name on the wire and in metrics, and in Redis's function.
  public enum Op: String, CaseIterable, Sendable {
    case start
    case cancel
    case pause
    case resume
    case adjust
    case rotateKey = "rotate_key"
    case wait
    case done
    case fail
    case stop
    case message
    case blackout
  }

  public var op: Op {
    switch self {
    case .start: .start
    case .cancel: .cancel
    case .pause: .pause
    case .resume: .resume
    case .adjust: .adjust
    case .rotateKey: .rotateKey
    case .wait: .wait
    case .done: .done
    case .fail: .fail
    case .stop: .stop
    case .message: .message
    case .blackout: .blackout
    }
  }

  /// A command that may begin a run or a wait, either of which holds a
  /// place in its address's count of sessions.
  public var takesAddressPlace: Bool {
    switch self {
    case .start, .wait: true
    case .cancel, .pause, .resume, .adjust, .rotateKey, .done, .fail, .stop, .message, .blackout:
      false
    }
  }
}

/// How long a start runs: a number of seconds, or until a moment.
public enum StartLength: Equatable, Sendable {
  case seconds(Int)
  /// A deadline in epoch ms.
  case until(Int64)
}
