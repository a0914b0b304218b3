/// How a viewer's connection carries frames.
enum Transport: UInt8 {
  case webSocket
  /// Server-Sent Events: `text/event-stream` on a plain HTTP response.
  case eventStream
}

/// The facts of a request to open a viewer's connection (a WebSocket upgrade
/// or an event stream) that admission depends on, read from lws.
struct UpgradeRequest {
  var transport = Transport.webSocket
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
  /// The last seq the client saw: the `since` URL argument, or an event
  /// stream's `Last-Event-ID`.
  var since: UInt64? = nil
}
