/// Counters the hub keeps for operators: plain integers bumped on the events
/// that change them, so reading them costs O(1) whatever the session count.
/// Never keyed by session id, so their cardinality is bounded.
public struct HubStats: Sendable {
  /// Sessions created and forgotten since start.
  public var sessionsCreated: UInt64 = 0
  public var sessionsForgotten: UInt64 = 0
  /// Live sessions in each phase, indexed by `Phase.allCases`.
  public var sessionsByPhase: [Int] = Array(repeating: 0, count: Phase.allCases.count)
  /// Commands by op and by result (`ok` or an error code), e.g. ["start"]["busy"].
  public var commands: [String: [String: UInt64]] = [:]
  /// Merged catch-up patches sent to viewers that fell behind.
  public var patchesMerged: UInt64 = 0
  /// How late each tick was applied against its deadline, in milliseconds.
  public var tickLatenessMs = Histogram(bounds: [1, 2, 5, 10, 25, 50, 100, 250, 500, 1000, 2500])
  /// Commands waiting for the sequencer (storage or Redis) to complete them.
  public var commandsInFlight = 0
  /// Acks, errors and pongs dropped because their connection had
  /// `Hub.maxPendingReplyBytes` waiting (a client that does not read).
  public var repliesDropped: UInt64 = 0

  public init() {}

  mutating func countCommand(_ op: String, result: String) {
    commands[op, default: [:]][result, default: 0] += 1
  }
}
