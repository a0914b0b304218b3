import CountdownCore

/// What the network layer needs to know, already validated by the command line.
public struct ServerConfig: Sendable {
  /// Address to listen on (an IP address or interface name).
  public var host: String = "127.0.0.1"
  /// TCP port; 0 lets the kernel choose (the chosen one is reported by `run`).
  public var port: Int = 8080
  /// Directory whose files are served over HTTP.
  public var publicDirectory: String = "Public"
  /// Largest client message, counted across fragments, before close 1009.
  public var maxMessageBytes: Int = WireCodec.maxMessageBytes
  /// Send a WebSocket ping after this much silence.
  public var pingAfterSeconds: Int = 20
  /// Hang up when nothing valid (not even a pong) arrived for this long.
  public var hangUpAfterSeconds: Int = 30
  /// A connection that has had something to write but could not for this long is closed.
  public var unwritableTimeoutSeconds: Int = 60
  /// WebSocket connections at most, over all clients (HTTP 503 past it).
  public var maxConnections: Int = 19_500
  /// WebSocket connections at most from one IP address (HTTP 429 past it).
  public var maxConnectionsPerIP: Int = 4096
  /// How many leading bits of an IPv6 client address name its per-address
  /// budgets (`AddressBudget`).
  public var ipv6Prefix: Int = AddressBudget.defaultIPv6Prefix
  /// Origins allowed to open a WebSocket besides the server's own; "*" allows any.
  public var allowedOrigins: [String] = []
  /// Sites that may embed the page in an iframe (`--frame-ancestors`); nil keeps lws's deny.
  public var frameAncestors: FrameAncestors?
  /// Bearer tokens of `--api-token-file`, for the HTTP API.
  public var apiTokens = APITokens()
  /// Peers whose X-Forwarded-For names the client (`--trusted-proxy`).
  public var trustedProxies = TrustedProxies()
  /// Serve the test-only echo route `/echo` (for the Autobahn conformance suite).
  public var echoRoute = false
  /// Largest echoed message on the echo route.
  public var echoMaxMessageBytes: Int = 16 * 1024 * 1024
  /// Seconds an HTTP client may take to send its request headers.
  public var headerTimeoutSeconds: Int = 5
  /// Where `/metrics` is answered on the main port.
  public var metrics: MetricsExposure = .auto
  /// A second listener for `/metrics`, `/healthz` and `/readyz` only.
  public var metricsPort: Int?
  /// The address of that listener; loopback unless an operator says otherwise.
  public var metricsHost: String = "127.0.0.1"
  /// On SIGTERM, keep serving (with `/readyz` at 503) this long before closing
  /// every WebSocket with 1001. A second signal ends the wait.
  public var drainSeconds: Int = 0

  /// Whether the main port answers `/metrics`.
  public var metricsOnMainPort: Bool {
    switch metrics {
    case .main: true
    case .off: false
    case .auto: metricsPort == nil && Self.isLoopback(host)
    }
  }

  /// An address only this machine can reach.
  public static func isLoopback(_ host: String) -> Bool {
    host == "localhost" || host == "::1" || host == "lo" || host.hasPrefix("127.")
  }
  /// What waits for socket events under libwebsockets.
  public var eventLoop: EventLoop = .platformDefault

  public init() {}
}
