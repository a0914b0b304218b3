/// What the network layer needs to know, already validated by the command line.
public struct ServerConfig: Sendable {
  /// Address to listen on (an IP address or interface name).
  public var host: String
  /// TCP port; 0 lets the kernel choose (the chosen one is reported by `run`).
  public var port: Int
  /// Directory whose files are served over HTTP.
  public var publicDirectory: String
  /// Largest client message, counted across fragments, before close 1009.
  public var maxMessageBytes: Int
  /// Send a WebSocket ping after this much silence.
  public var pingAfterSeconds: Int
  /// Hang up when nothing valid (not even a pong) arrived for this long.
  public var hangUpAfterSeconds: Int

  public init(
    host: String = "127.0.0.1", port: Int = 8080, publicDirectory: String = "Public",
    maxMessageBytes: Int = 4096, pingAfterSeconds: Int = 20, hangUpAfterSeconds: Int = 30
  ) {
    self.host = host
    self.port = port
    self.publicDirectory = publicDirectory
    self.maxMessageBytes = maxMessageBytes
    self.pingAfterSeconds = pingAfterSeconds
    self.hangUpAfterSeconds = hangUpAfterSeconds
  }
}

/// Failures of the C library, turned into Swift values in one place.
public enum LWSError: Error, CustomStringConvertible, Sendable {
  case contextCreationFailed(host: String, port: Int)
  case serviceFailed(code: Int32)

  public var description: String {
    switch self {
    case .contextCreationFailed(let host, let port):
      "could not listen on \(host):\(port) (address in use, or not an address of this machine?)"
    case .serviceFailed(let code):
      "the libwebsockets service loop failed with code \(code)"
    }
  }
}
