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
