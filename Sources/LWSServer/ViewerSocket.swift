/// What the server keeps beside lws's wsi for one hub connection: one slot
/// per `ConnectionID`, reset when the connection closes. Widest fields first,
/// since every viewer has one.
struct ViewerSocket {
  var wsi: Wsi?
  /// Fragments received so far of the current message.
  var partialMessage: [UInt8] = []
  /// When it began waiting to be written (0: not waiting).
  var waitingSince: Int64 = 0
  /// When anything (a message, a fragment, a pong) last arrived.
  var lastHeard: Int64 = 0
  /// When it was last pinged (0: not in this silence).
  var pingedAt: Int64 = 0
  /// The peer address, for the per-IP cap.
  var peer = PeerID.none
  /// Owed a ping frame at its next WRITEABLE.
  var pingDue = false
}
