/// What a countdown session is doing.
public enum Phase: String, Equatable, Sendable, CaseIterable {
  case idle
  case running
  case paused
  case finished
  /// The seed's spinner with no deadline: a job outside (a deploy, a CI run)
  /// ends it with `done` or `fail`, or its own timeout does.
  case waiting
  /// A run started with `overtime` reached zero and counts up from its
  /// deadline, until a `stop` or `cancel` (or a day over).
  case overtime
}

/// How a finished session came to its end: what a viewer shows in words and colour.
public enum Outcome: String, Equatable, Sendable, CaseIterable {
  /// A countdown ran out (or was adjusted to nothing).
  case elapsed
  case done
  case failed
  /// A wait reached its `timeoutAt`.
  case timeout
  /// A run ended by `stop` (before zero or in overtime), or a day into overtime.
  case stopped
}

/// How near the end a run is, for the colour every screen shows.
public enum Level: String, Equatable, Sendable, CaseIterable {
  case normal
  case warning
  case danger
  /// In overtime.
  case over
}
