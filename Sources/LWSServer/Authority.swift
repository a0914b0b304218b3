/// `host[:port]`, as in a Host header or an origin: a bracketed IPv6
/// address or a name, and an optional decimal port.
struct Authority: Equatable {
  var host: String
  var port: Int?

  init?(_ text: some StringProtocol) {
    var name = Substring(text)
    var portText: Substring?
    if name.hasPrefix("[") {
      guard let close = name.firstIndex(of: "]") else { return nil }
      let rest = name[name.index(after: close)...]
      guard rest.isEmpty || rest.first == ":" else { return nil }
      guard IPAddress(name[name.index(after: name.startIndex)..<close]) != nil else { return nil }
      if !rest.isEmpty { portText = rest.dropFirst() }
      name = name[...close]
    } else if let colon = name.firstIndex(of: ":") {
      portText = name[name.index(after: colon)...]
      name = name[..<colon]
    }
    // RFC 3986 reg-name characters, without percent-encoding or userinfo.
    guard !name.isEmpty,
      name.hasPrefix("[")
        || name.utf8.allSatisfy({
          (0x61...0x7a).contains($0) || (0x41...0x5a).contains($0) || (0x30...0x39).contains($0)
            || $0 == UInt8(ascii: ".") || $0 == UInt8(ascii: "-") || $0 == UInt8(ascii: "_")
        })
    else { return nil }
    if let portText {
      guard let port = Self.port(portText) else { return nil }
      self.port = port
    }
    host = String(name)
  }

  /// A decimal port, 1 to 5 ASCII digits up to 65535, as a Host header, an
  /// origin or an X-Forwarded-For entry may carry one.
  static func port(_ text: Substring) -> Int? {
    guard (1...5).contains(text.utf8.count), text.utf8.allSatisfy({ (0x30...0x39).contains($0) }),
      let port = Int(text), port <= 65_535
    else { return nil }
    return port
  }
}
