/// An IPv4 or IPv6 address as 128 bits. IPv4 is held in its IPv4-mapped form
/// (`::ffff:a.b.c.d`), so a v4 client seen on a dual-stack socket matches a
/// v4 range, and prints as plain dotted v4 again.
public struct IPAddress: Hashable, Sendable, CustomStringConvertible {
  let high: UInt64
  let low: UInt64

  var isV4: Bool { high == 0 && low >> 32 == 0xffff }

  init(high: UInt64, low: UInt64) {
    self.high = high
    self.low = low
  }

  /// Parses dotted IPv4 (four decimal parts, no leading zeros, which some
  /// parsers read as octal) or textual IPv6 (RFC 4291 2.2, without a zone).
  public init?(_ text: some StringProtocol) {
    let bytes = Array(text.utf8)
    // The longest IPv6 text, with an embedded IPv4 tail, is 45 characters.
    guard !bytes.isEmpty, bytes.count <= 45 else { return nil }
    if bytes.contains(UInt8(ascii: ":")) {
      guard let groups = Self.parseV6(bytes[...]) else { return nil }
      var high: UInt64 = 0
      var low: UInt64 = 0
      for (index, group) in groups.enumerated() {
        if index < 4 {
          high = high << 16 | UInt64(group)
        } else {
          low = low << 16 | UInt64(group)
        }
      }
      self.init(high: high, low: low)
    } else {
      guard let v4 = Self.parseV4(bytes[...]) else { return nil }
      self.init(high: 0, low: 0xffff << 32 | UInt64(v4))
    }
  }

  private static func parseV4(_ bytes: ArraySlice<UInt8>) -> UInt32? {
    let parts = bytes.split(separator: UInt8(ascii: "."), omittingEmptySubsequences: false)
    guard parts.count == 4 else { return nil }
    var value: UInt32 = 0
    for part in parts {
      guard (1...3).contains(part.count), part.allSatisfy({ (48...57).contains($0) }),
        part.count == 1 || part.first != UInt8(ascii: "0")
      else { return nil }
      let number = part.reduce(0) { $0 * 10 + UInt32($1 - 48) }
      guard number <= 255 else { return nil }
      value = value << 8 | number
    }
    return value
  }

  /// Eight 16-bit groups, or nil.
  private static func parseV6(_ bytes: ArraySlice<UInt8>) -> [UInt16]? {
    let colon = UInt8(ascii: ":")
    var head = bytes
    var tail: ArraySlice<UInt8> = []
    var elided = false
    if let at = bytes.indices.first(where: {
      bytes[$0] == colon && $0 + 1 < bytes.endIndex && bytes[$0 + 1] == colon
    }) {
      head = bytes[..<at]
      tail = bytes[(at + 2)...]
      elided = true
    }
    // An IPv4 tail ends the address, so only the right of "::" may have one.
    guard let left = groups(head, v4Tail: !elided), let right = groups(tail, v4Tail: true)
    else { return nil }
    let count = left.count + right.count
    if elided {
      // "::" stands for at least one group of zeros (RFC 5952 4.2.2 allows one).
      guard count <= 7 else { return nil }
      return left + [UInt16](repeating: 0, count: 8 - count) + right
    }
    guard count == 8 else { return nil }
    return left + right
  }

  /// The colon-separated groups of one side of "::"; the last may be IPv4.
  private static func groups(_ bytes: ArraySlice<UInt8>, v4Tail: Bool) -> [UInt16]? {
    if bytes.isEmpty { return [] }
    let parts = bytes.split(separator: UInt8(ascii: ":"), omittingEmptySubsequences: false)
    var out: [UInt16] = []
    for (index, part) in parts.enumerated() {
      if v4Tail, index == parts.count - 1, part.contains(UInt8(ascii: ".")) {
        guard let v4 = parseV4(part) else { return nil }
        out += [UInt16(v4 >> 16), UInt16(v4 & 0xffff)]
        continue
      }
      guard (1...4).contains(part.count) else { return nil }
      var group: UInt16 = 0
      for byte in part {
        guard let digit = hexDigit(byte) else { return nil }
        group = group << 4 | UInt16(digit)
      }
      out.append(group)
    }
    return out
  }

  private static func hexDigit(_ byte: UInt8) -> UInt8? {
    switch byte {
    case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
    case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
    case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
    default: nil
    }
  }

  /// Dotted IPv4, or IPv6 in RFC 5952's canonical form, so that one address
  /// written two ways counts once against the per-IP cap.
  public var description: String {
    if isV4 {
      let v4 = UInt32(truncatingIfNeeded: low)
      return [24, 16, 8, 0].map { String(v4 >> $0 & 0xff) }.joined(separator: ".")
    }
    let groups = (0..<8).map { index -> UInt16 in
      let word = index < 4 ? high : low
      return UInt16(truncatingIfNeeded: word >> (UInt64(3 - index % 4) * 16))
    }
    // The first longest run of two or more zero groups becomes "::".
    var best = (start: -1, length: 0)
    var index = 0
    while index < 8 {
      guard groups[index] == 0 else {
        index += 1
        continue
      }
      var end = index
      while end < 8 && groups[end] == 0 { end += 1 }
      if end - index > best.length { best = (index, end - index) }
      index = end
    }
    let hex = groups.map { String($0, radix: 16) }
    guard best.length >= 2 else { return hex.joined(separator: ":") }
    let left = hex[..<best.start].joined(separator: ":")
    let right = hex[(best.start + best.length)...].joined(separator: ":")
    return left + "::" + right
  }
}

/// An address range, `ADDRESS/BITS` or one address. An IPv4 range covers the
/// IPv4-mapped addresses too; `::/0` covers everything, `0.0.0.0/0` all IPv4.
public struct CIDR: Hashable, Sendable, CustomStringConvertible {
  let network: IPAddress
  /// Prefix length in the 128-bit space (an IPv4 /n is 96 + n).
  let bits: Int

  public init?(_ text: some StringProtocol) {
    let parts = text.split(separator: "/", maxSplits: 1, omittingEmptySubsequences: false)
    guard let address = IPAddress(parts[0]) else { return nil }
    let width = address.isV4 ? 32 : 128
    var length = width
    if parts.count == 2 {
      let digits = parts[1]
      guard (1...3).contains(digits.count), digits.allSatisfy({ $0.isASCII && $0.isNumber }),
        let number = Int(digits), (0...width).contains(number),
        digits.count == 1 || digits.first != "0"
      else { return nil }
      length = number
    }
    bits = length + (address.isV4 ? 96 : 0)
    // Host bits are ignored, as nginx's set_real_ip_from does.
    let mask = Self.mask(bits)
    network = IPAddress(high: address.high & mask.high, low: address.low & mask.low)
  }

  private static func mask(_ bits: Int) -> (high: UInt64, low: UInt64) {
    let high: UInt64 = bits >= 64 ? .max : (bits == 0 ? 0 : .max << (64 - bits))
    let low: UInt64 = bits <= 64 ? 0 : (bits >= 128 ? .max : .max << (128 - bits))
    return (high, low)
  }

  public func contains(_ address: IPAddress) -> Bool {
    let mask = Self.mask(bits)
    return address.high & mask.high == network.high && address.low & mask.low == network.low
  }

  public var description: String {
    network.isV4 && bits >= 96 ? "\(network)/\(bits - 96)" : "\(network)/\(bits)"
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
      guard rest.isEmpty || isPort(rest.dropFirst()) && rest.first == ":" else { return nil }
      return IPAddress(text[text.index(after: text.startIndex)..<close])
    }
    if text.filter({ $0 == ":" }).count == 1, let colon = text.firstIndex(of: ":") {
      guard isPort(text[text.index(after: colon)...]) else { return nil }
      return IPAddress(text[..<colon])
    }
    return IPAddress(text)
  }

  private static func isPort(_ text: Substring) -> Bool {
    (1...5).contains(text.count) && text.allSatisfy { $0.isASCII && $0.isNumber }
      && Int(text).map { $0 <= 65_535 } == true
  }
}
