/// What `countdown` exits with, as the README's "Command-line client" documents it. `run`
/// exits with its command's status instead (see `RunSupervisor`).
public enum ExitCode: Int32, Sendable, Equatable {
  /// The command was applied, or the session finished elapsed or done.
  case ok = 0
  /// The server refused the command, or the session finished failed or timed out.
  case failed = 1
  /// The command line is wrong: nothing was sent.
  case usage = 2
  /// The server could not be reached.
  case unreachable = 3
}

/// A command line that cannot be run, in words for stderr.
public struct UsageError: Error, Equatable, CustomStringConvertible {
  public let message: String
  public init(_ message: String) { self.message = message }
  public var description: String { message }
}
