/// The event loop libwebsockets runs on.
public enum EventLoop: String, Sendable, CaseIterable {
  /// lws's built-in poll(): every wake-up passes over every descriptor.
  case poll
  /// libev (epoll on Linux) through lws's event-library plugin: a wake-up
  /// costs the descriptors that are ready, not all of them.
  case libev

  public static var platformDefault: EventLoop {
    #if os(Linux)
      .libev
    #else
      .poll
    #endif
  }
}
