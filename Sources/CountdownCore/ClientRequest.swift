/// A message from a client, decoded and validated: a session command, or
/// one of the few requests the hub answers without sequencing.
public enum ClientRequest: Equatable, Sendable {
  case command(SessionCommand)
  /// A controller asks for a new key; the old one stops working. The hub
  /// makes the key, then sequences `SessionCommand.rotateKey` with its hash.
  case rotateKey
  /// Clock-offset probe: `t` is the client's send time, echoed verbatim in the pong.
  case ping(t: String)
  /// Presents a controller key after the handshake, so that it need not
  /// travel in the URL (where proxies and browser history keep it).
  case auth(key: String)

  /// The ops that are not session commands (`SessionCommand.Op`).
  public enum MessageOp: String, CaseIterable, Sendable {
    case ping
    case auth
  }
}

/// A decoded message: the request and its id.
public struct ClientMessage: Equatable, Sendable {
  public var request: ClientRequest
  public var id: CommandID?
}
