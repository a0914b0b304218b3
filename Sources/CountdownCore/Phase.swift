/// What a countdown session is doing.
public enum Phase: String, Equatable, Sendable, CaseIterable {
  case idle
  case running
  case paused
  case finished
}
