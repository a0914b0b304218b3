/// Which pages may open a WebSocket. Pure, so the rule reads, and is tested,
/// in one place.
///
/// The server's own origin is always allowed: an `Origin` whose host and port
/// are the request's `Host`. On a loopback `--host` that holds only when the
/// Host is an IP address, `localhost` or the `--host` name: a page on a
/// domain name that rebinds to 127.0.0.1 would otherwise pass for the
/// server's own, and a loopback server is often a developer's, reachable by
/// any page the browser opens. Elsewhere the name the page was served under
/// is the server's own. Others must be listed (`--allow-origin`; `*` is any).
/// Requests without `Origin` are not from a browser page and are allowed.
struct OriginPolicy: Sendable {
  /// Lowercased origins of `--allow-origin`.
  var allowed: [String]
  var listenHost: String
  var listenIsLoopback: Bool

  init(allowed: [String], listenHost: String) {
    self.allowed = allowed.map { $0.lowercased() }
    self.listenHost = listenHost.lowercased()
    listenIsLoopback = ServerConfig.isLoopback(listenHost)
  }

  func allows(origin: String, host: String?) -> Bool {
    let origin = origin.lowercased()
    if allowed.contains(where: { $0 == "*" || $0 == origin }) { return true }
    guard let host, let page = Origin(origin), let asked = Authority(host.lowercased()),
      page.authority.host == asked.host,
      (page.authority.port ?? page.defaultPort) == (asked.port ?? page.defaultPort)
    else { return false }
    return !listenIsLoopback || isLocalName(asked.host)
  }

  /// A host name that cannot be a rebound DNS name.
  private func isLocalName(_ name: String) -> Bool {
    name.hasPrefix("[") || name == "localhost" || name == listenHost
      || IPAddress(name) != nil
  }
}
