/// Where Redis listens: an IP address and port, or a unix socket, never a
/// host name, because hiredis 0.14 resolves names with a blocking
/// getaddrinfo that would stall the loop it runs on.
public struct RedisAddress: Equatable, Sendable, CustomStringConvertible {
  public enum Endpoint: Equatable, Sendable {
    case tcp(ip: String, port: Int)
    case unix(path: String)
  }

  public let endpoint: Endpoint
  /// The logical database (`SELECT`); Redis Functions are shared by all of them.
  public let database: Int
  /// The ACL user to authenticate as (`redis://user@IP:PORT`); its password
  /// comes from a file, never from the URL.
  public let username: String?

  public init(endpoint: Endpoint, database: Int = 0, username: String? = nil) {
    self.endpoint = endpoint
    self.database = database
    self.username = username
  }

  public var description: String {
    let base: String
    switch endpoint {
    case .tcp(let ip, let port):
      let user = username.map { "\($0)@" } ?? ""
      base = ip.contains(":") ? "redis://\(user)[\(ip)]:\(port)" : "redis://\(user)\(ip):\(port)"
    case .unix(let path): base = "unix://\(path)"
    }
    return database == 0 ? base : "\(base)/\(database)"
  }

  /// Parses `redis://[USER@]IP:PORT[/DB]` (an IPv6 address in brackets, the
  /// port 6379 when left out) or `unix:///path/to/socket[?db=N]`.
  public static func parse(_ text: String) throws(RedisError) -> RedisAddress {
    func bad(_ why: String) -> RedisError {
      RedisError(.badAddress, "'\(text)': \(why)")
    }
    if text.hasPrefix("unix://") {
      var rest = String(text.dropFirst("unix://".count))
      var database = 0
      if let query = rest.firstIndex(of: "?") {
        let parameter = rest[rest.index(after: query)...]
        guard parameter.hasPrefix("db="), let number = Int(parameter.dropFirst(3)),
          (0...15).contains(number)
        else { throw bad("the only query is ?db=N, N from 0 to 15") }
        database = number
        rest = String(rest[..<query])
      }
      guard rest.hasPrefix("/") else { throw bad("a unix socket needs an absolute path") }
      return RedisAddress(endpoint: .unix(path: rest), database: database)
    }
    guard text.hasPrefix("redis://") else {
      throw bad("expected redis://IP:PORT[/DB] or unix:///PATH")
    }
    var rest = Substring(text.dropFirst("redis://".count))
    var username: String?
    if let at = rest.firstIndex(of: "@") {
      let user = rest[..<at]
      guard !user.contains(":") else {
        // Not echoed: the URL holds a password.
        throw RedisError(
          .badAddress,
          "a password does not go in the --redis URL, where ps and logs would show it; "
            + "put it in a file and give --redis-password-file")
      }
      guard !user.isEmpty, user.unicodeScalars.allSatisfy({ $0.value > 0x20 && $0.value != 0x7F })
      else { throw bad("the user before '@' must be a name without spaces") }
      username = String(user)
      rest = rest[rest.index(after: at)...]
    }
    var database = 0
    if let slash = rest.firstIndex(of: "/") {
      let db = rest[rest.index(after: slash)...]
      guard let number = Int(db), (0...15).contains(number), String(number) == db else {
        throw bad("the database must be a number from 0 to 15, not '\(db)'")
      }
      database = number
      rest = rest[..<slash]
    }
    let host: Substring
    var portText: Substring?
    if rest.hasPrefix("[") {
      guard let close = rest.firstIndex(of: "]") else { throw bad("an unclosed '['") }
      host = rest[rest.index(after: rest.startIndex)..<close]
      let after = rest[rest.index(after: close)...]
      if !after.isEmpty {
        guard after.hasPrefix(":") else { throw bad("expected ':PORT' after ']'") }
        portText = after.dropFirst()
      }
    } else if let colon = rest.lastIndex(of: ":") {
      host = rest[..<colon]
      portText = rest[rest.index(after: colon)...]
    } else {
      host = rest
    }
    var port = 6379
    if let portText {
      guard let number = Int(portText), (1...65_535).contains(number) else {
        throw bad("the port must be a number from 1 to 65535, not '\(portText)'")
      }
      port = number
    }
    let ip = String(host)
    guard !ip.isEmpty else { throw bad("no address") }
    guard isIPv4(ip) || (rest.hasPrefix("[") && isIPv6(ip)) else {
      throw bad(
        "'\(ip)' is not an IP address; give an IP address (a host name would need a "
          + "blocking DNS look-up) or a unix socket")
    }
    return RedisAddress(endpoint: .tcp(ip: ip, port: port), database: database, username: username)
  }

  static func isIPv4(_ text: String) -> Bool {
    let parts = text.split(separator: ".", omittingEmptySubsequences: false)
    return parts.count == 4
      && parts.allSatisfy { part in
        !part.isEmpty && part.count <= 3 && part.allSatisfy(\.isASCII)
          && part.allSatisfy(\.isNumber) && Int(part)! <= 255
      }
  }

  static func isIPv6(_ text: String) -> Bool {
    let allowed = Set("0123456789abcdefABCDEF:.")
    return text.contains(":") && text.allSatisfy { allowed.contains($0) }
  }
}
