/// What a countdown session is doing.
public enum Phase: String, Equatable, Sendable, CaseIterable {
  case idle
  case running
  case paused
  case finished
}

/// Every field a viewer renders: the seed's button (spinner, enabled) and label.
///
/// This is the `state` object of the wire protocol; field order here is the
/// order in which the encoder writes them.
public struct CountdownState: Equatable, Sendable {
  public var phase: Phase
  public var spinner: Bool
  public var enabled: Bool
  public var label: String
  public var remaining: Int
  public var duration: Int
  /// Epoch milliseconds of the deadline while running.
  public var endsAt: Int64?
  /// The exact time left while paused.
  public var remainingMs: Int64?
  public var viewers: Int
  /// The server cannot confirm this state with the rest of its cluster
  /// (cluster mode, Redis unreachable): the countdown goes on from what it
  /// knew, but a change made elsewhere may be missing.
  public var stale: Bool

  public init(
    phase: Phase, spinner: Bool, enabled: Bool, label: String, remaining: Int, duration: Int,
    endsAt: Int64?, remainingMs: Int64? = nil, viewers: Int, stale: Bool = false
  ) {
    self.phase = phase
    self.spinner = spinner
    self.enabled = enabled
    self.label = label
    self.remaining = remaining
    self.duration = duration
    self.endsAt = endsAt
    self.remainingMs = remainingMs
    self.viewers = viewers
    self.stale = stale
  }

  /// The fields whose values differ between two states.
  public func changes(from old: CountdownState) -> FieldSet {
    var set: FieldSet = []
    if phase != old.phase { set.insert(.phase) }
    if spinner != old.spinner { set.insert(.spinner) }
    if enabled != old.enabled { set.insert(.enabled) }
    if label != old.label { set.insert(.label) }
    if remaining != old.remaining { set.insert(.remaining) }
    if duration != old.duration { set.insert(.duration) }
    if endsAt != old.endsAt { set.insert(.endsAt) }
    if remainingMs != old.remainingMs { set.insert(.remainingMs) }
    if viewers != old.viewers { set.insert(.viewers) }
    if stale != old.stale { set.insert(.stale) }
    return set
  }
}

/// A set of state fields, one bit each: what a patch carries.
public struct FieldSet: OptionSet, Hashable, Sendable {
  public let rawValue: UInt16
  public init(rawValue: UInt16) { self.rawValue = rawValue }

  public static let phase = FieldSet(rawValue: 1 << 0)
  public static let spinner = FieldSet(rawValue: 1 << 1)
  public static let enabled = FieldSet(rawValue: 1 << 2)
  public static let label = FieldSet(rawValue: 1 << 3)
  public static let remaining = FieldSet(rawValue: 1 << 4)
  public static let duration = FieldSet(rawValue: 1 << 5)
  public static let endsAt = FieldSet(rawValue: 1 << 6)
  public static let viewers = FieldSet(rawValue: 1 << 7)
  public static let remainingMs = FieldSet(rawValue: 1 << 8)
  public static let stale = FieldSet(rawValue: 1 << 9)

  public static let all: FieldSet = FieldSet(rawValue: 0x3FF)
}

/// An RFC 7396 merge patch over a flat state: the changed fields, with their new values.
///
/// Merge patches of a flat object compose by keeping the last value of each
/// field, so one `Patch` can also stand for several consecutive ones.
public struct Patch: Equatable, Sendable {
  /// The session sequence number this patch brings a viewer to.
  public var seq: UInt64
  public var fields: FieldSet
  /// The whole state at `seq`; only `fields` of it go on the wire.
  public var state: CountdownState

  public init(seq: UInt64, fields: FieldSet, state: CountdownState) {
    self.seq = seq
    self.fields = fields
    self.state = state
  }
}
