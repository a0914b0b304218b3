extension SessionRecord {
  /// Why a record that came from outside (a database row, a Redis hash or
  /// message) cannot be taken as it is.
  public struct Damage: Error, Equatable, Sendable {
    public let reason: String
    public init(_ reason: String) { self.reason = reason }
  }

  /// The record as storage lays it out: a phase and two optional times, one
  /// column or hash field each. The SQLite row, the Redis hash and the
  /// record line all read and write this form, so their layout stays what
  /// it was before the phase carried its time.
  public struct Fields: Equatable, Sendable {
    public var phase: Phase
    public var duration: Int
    public var endsAt: Int64?
    public var remainingMs: Int64?
    public var finishedLabel: String?
    public var seq: UInt64
    public var revision: UInt64
    public var updatedAt: Int64

    public init(
      phase: Phase = .idle, duration: Int = 0, endsAt: Int64? = nil, remainingMs: Int64? = nil,
      finishedLabel: String? = nil, seq: UInt64 = 0, revision: UInt64 = 0, updatedAt: Int64 = 0
    ) {
      self.phase = phase
      self.duration = duration
      self.endsAt = endsAt
      self.remainingMs = remainingMs
      self.finishedLabel = finishedLabel
      self.seq = seq
      self.revision = revision
      self.updatedAt = updatedAt
    }

    /// Why these fields are no record, or nil when `init(validating:)` takes them.
    public var damage: String? {
      do throws(Damage) {
        _ = try SessionRecord(validating: self)
        return nil
      } catch {
        return error.reason
      }
    }
  }

  /// The flat view, for storage to write.
  public var fields: Fields {
    Fields(
      phase: phase, duration: duration, endsAt: endsAt, remainingMs: remainingMs,
      finishedLabel: finishedLabel, seq: seq, revision: revision, updatedAt: updatedAt)
  }

  /// The one way in from storage: every field in range and agreeing with its
  /// phase, checked before any arithmetic, or the damage that says which not.
  public init(validating fields: Fields) throws(Damage) {
    guard Self.durationRange.contains(fields.duration) else {
      throw Damage("duration \(fields.duration) out of range")
    }
    guard Self.epochMsRange.contains(fields.updatedAt) else {
      throw Damage("updatedAt \(fields.updatedAt) out of range")
    }
    guard fields.seq <= Self.maxCounter, fields.revision <= Self.maxCounter else {
      throw Damage("seq or revision out of range")
    }
    if let label = fields.finishedLabel, !Self.isValidFinishedLabel(label) {
      throw Damage(
        "finishedLabel is not 1 to \(SessionConfig.maxFinishedLabelLength) characters of text")
    }
    let status: Status
    switch fields.phase {
    case .running:
      guard let endsAt = fields.endsAt, Self.epochMsRange.contains(endsAt),
        fields.remainingMs == nil
      else { throw Damage("a running record needs endsAt in range and no remainingMs") }
      // No command sets a deadline more than the longest run past its own
      // time; a later one would overflow the 32-bit seconds a tick shows.
      guard endsAt - fields.updatedAt <= Self.aheadMsRange.upperBound else {
        throw Damage("a running record's endsAt is more than 30 days after its updatedAt")
      }
      status = .running(endsAt: endsAt)
    case .paused:
      guard let remainingMs = fields.remainingMs,
        (1...Self.aheadMsRange.upperBound).contains(remainingMs), fields.endsAt == nil
      else { throw Damage("a paused record needs remainingMs in range and no endsAt") }
      status = .paused(remainingMs: remainingMs)
    case .idle, .finished:
      guard fields.endsAt == nil, fields.remainingMs == nil else {
        throw Damage("an \(fields.phase.rawValue) record holds no endsAt or remainingMs")
      }
      status = fields.phase == .idle ? .idle : .finished
    }
    self.init(
      status, duration: fields.duration, finishedLabel: fields.finishedLabel, seq: fields.seq,
      revision: fields.revision, updatedAt: fields.updatedAt)
  }
}
