/// The facts of an upgrade request that admission depends on, read from lws.
struct UpgradeRequest {
  var path: String
  var origin: String?
  var host: String?
  /// The client's address: the TCP peer, or whom a trusted proxy forwarded for.
  var peer: String
  /// The TCP peer, when it is a trusted proxy that forwarded for `peer`.
  var via: String? = nil
  var version: String?
  /// Sec-WebSocket-Key.
  var key: String?
  /// The `key` URL argument: a controller key.
  var controllerKey: String? = nil
  /// The `since` URL argument: the last seq the client saw.
  var since: UInt64? = nil
}
