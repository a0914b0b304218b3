/// What the server keeps beside lws's wsi for one hub connection: one slot
/// per `ConnectionID`, reset when the connection closes. Widest fields first,
/// since every viewer has one: the one-byte transport fills the keepalive's
/// tail padding.
struct ViewerSocket {
  var wsi: Wsi?
  /// Fragments received so far of the current message.
  var partialMessage: [UInt8] = []
  var keepalive = Keepalive(now: 0)
  var transport = Transport.webSocket
  /// The peer address, for the per-IP cap.
  var peer = PeerID.none
}
