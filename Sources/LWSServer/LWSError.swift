/// Failures of the C library, turned into Swift values in one place.
public enum LWSError: Error, CustomStringConvertible, Sendable {
  case contextCreationFailed(host: String, port: Int)
  /// libwebsockets could not set up even its poll() loop.
  case eventLoopFailed
  case serviceFailed(code: Int32)

  public var description: String {
    switch self {
    case .contextCreationFailed(let host, let port):
      "could not listen on \(host):\(port) (address in use, or not an address of this machine?)"
    case .eventLoopFailed:
      "libwebsockets could not create its context (out of memory or descriptors?)"
    case .serviceFailed(let code):
      "the libwebsockets service loop failed with code \(code)"
    }
  }
}
