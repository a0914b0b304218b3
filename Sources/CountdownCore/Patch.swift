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
