/// Sequences in memory, in order, at the service thread's clock; with a
/// store, a command that changes a session completes once it is durable.
public final class LocalSequencer: CommandSequencer {
  private let store: (any SessionStore)?

  public init(store: (any SessionStore)? = nil) { self.store = store }

  public func sequence(_ request: SequenceRequest) -> SequenceResult {
    switch request.current.applying(request.command, at: request.now) {
    case .failure(let code):
      return .done(.rejected(code))
    case .success(let record):
      guard let store else { return .done(.applied(record)) }
      var keyHash = request.keyHash
      if case .rotateKey(let rotated) = request.command { keyHash = rotated }
      store.write(
        .save(session: request.session, record: record, keyHash: keyHash, ticket: request.ticket))
      return .pending
    }
  }

  public func created(session: String, record: SessionRecord, keyHash: KeyHash?) -> SessionLoad {
    // An open-mode session has nothing durable until its first command.
    if let keyHash {
      store?.write(.save(session: session, record: record, keyHash: keyHash, ticket: nil))
    }
    return .ready
  }

  public func forgot(session: String) {
    store?.write(.delete(session: session))
  }
}
