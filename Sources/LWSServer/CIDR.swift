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
    // Host bits are ignored, as nginx's set_real_ip_from does.
    self.init(address, bits: length + (address.isV4 ? 96 : 0))
  }

  /// The range of `bits` (in the 128-bit space) that holds `address`.
  init(_ address: IPAddress, bits: Int) {
    self.bits = bits
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

/// What a client's per-address budgets count under: connections per IP,
/// sessions per address, the HTTP rate and remembered idempotency keys. One
/// IPv6 host is usually given a /64 (RFC 6177), and may pick any address in
/// it, so an IPv6 client counts by its prefix; an IPv4 address, or an
/// IPv4-mapped IPv6 one, counts as itself.
public struct AddressBudget: Sendable, Equatable {
  /// Shorter than a /32, a typical provider's whole allocation, one budget
  /// would be shared by unrelated networks.
  public static let ipv6PrefixRange = 32...128
  public static let defaultIPv6Prefix = 64

  public var ipv6Prefix: Int

  public init(ipv6Prefix: Int = defaultIPv6Prefix) {
    self.ipv6Prefix = min(max(ipv6Prefix, Self.ipv6PrefixRange.lowerBound), 128)
  }

  /// The budget's name for a client address: dotted IPv4, or the IPv6
  /// prefix as a range (`2001:db8::/64`). What is not an address (lws's
  /// `?` for a peer it could not name) is its own budget.
  public func key(_ peer: String) -> String {
    guard let address = IPAddress(peer) else { return peer }
    if address.isV4 { return address.description }
    return CIDR(address, bits: ipv6Prefix).description
  }
}
