/// The ranges of `--trusted-proxy`, and how X-Forwarded-For is read through them.
public struct TrustedProxies: Sendable, Equatable {
  public var ranges: [CIDR]

  public init(_ ranges: [CIDR] = []) { self.ranges = ranges }

  func trusts(_ address: IPAddress) -> Bool { ranges.contains { $0.contains(address) } }

  /// The client behind `peer`, the TCP peer as lws reports it. Only a peer
  /// inside a trusted range is believed about X-Forwarded-For. The header is
  /// walked from the right, where the nearest proxy appended the address it
  /// saw, past every trusted hop; the first untrusted address is the client,
  /// since anything left of it the client may have written itself. When every
  /// hop is trusted, the leftmost is the client.
  func resolve(peer: String, forwardedFor: String?) -> ClientAddress {
    guard !ranges.isEmpty, let forwardedFor, let peerAddress = IPAddress(peer),
      trusts(peerAddress)
    else { return ClientAddress(address: peer) }
    var client: IPAddress?
    for entry in forwardedFor.split(separator: ",", omittingEmptySubsequences: false).reversed() {
      guard let hop = Self.hopAddress(entry) else {
        return ClientAddress(address: peer, malformed: true)
      }
      client = hop
      if !trusts(hop) { break }
    }
    return client.map { ClientAddress(address: $0.description) } ?? ClientAddress(address: peer)
  }

  /// One X-Forwarded-For entry: an address, a bracketed IPv6 address, or
  /// either with a port (some proxies add one).
  private static func hopAddress(_ entry: Substring) -> IPAddress? {
    var text = entry.drop { $0 == " " || $0 == "\t" }
    while let last = text.last, last == " " || last == "\t" { text.removeLast() }
    if text.hasPrefix("[") {
      guard let close = text.firstIndex(of: "]") else { return nil }
      let rest = text[text.index(after: close)...]
      guard rest.isEmpty || Authority.port(rest.dropFirst()) != nil && rest.first == ":" else {
        return nil
      }
      return IPAddress(text[text.index(after: text.startIndex)..<close])
    }
    if text.filter({ $0 == ":" }).count == 1, let colon = text.firstIndex(of: ":") {
      guard Authority.port(text[text.index(after: colon)...]) != nil else { return nil }
      return IPAddress(text[..<colon])
    }
    return IPAddress(text)
  }
}

/// Where a connection comes from, once proxies the operator trusts are seen
/// through (`--trusted-proxy`).
struct ClientAddress: Equatable {
  /// The address the per-IP cap counts and the logs show.
  var address: String
  /// Set when X-Forwarded-For was consulted but held an entry that is not an
  /// address, where the walk would have had to read it; `address` is then the peer.
  var malformed: Bool = false
}
