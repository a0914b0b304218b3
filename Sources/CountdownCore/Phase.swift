/// What a countdown session is doing.
public enum Phase: String, Equatable, Sendable, CaseIterable {
  case idle
  case running
  case paused
  case finished
  /// The seed's spinner with no deadline: a job outside (a deploy, a CI run)
  /// ends it with `done` or `fail`, or its own timeout does.
  case waiting
}

/// How a finished session came to its end: what a viewer shows in words and colour.
public enum Outcome: String, Equatable, Sendable, CaseIterable {
  /// A countdown ran out (or was adjusted to nothing).
  case elapsed
  case done
  case failed
  /// A wait reached its `timeoutAt`.
  case timeout
}
