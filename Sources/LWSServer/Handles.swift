// lws hands out three kinds of `struct … *`, all imported as `OpaquePointer`,
// so a vhost could be passed where a connection was meant and the compiler
// would not notice. Each gets a type of its own here; only the files that
// make lws calls (Callbacks.swift, CountdownServer.swift, ServiceTimer.swift,
// ServiceQueue.swift) take `.raw` out. The libev loop already is a type of
// its own (`LibevLoop`).

/// One lws connection (`struct lws *`): a WebSocket, an HTTP transaction or
/// an event stream. Valid from lws's first callback for it until CLOSED.
struct Wsi: Hashable {
  let raw: OpaquePointer
}

/// One lws listener (`struct lws_vhost *`): the main port, or the metrics port.
struct Vhost: Hashable {
  let raw: OpaquePointer
}

/// The lws context (`struct lws_context *`), one per `CountdownServer.run`.
struct LWSContext: Hashable {
  let raw: OpaquePointer
}
