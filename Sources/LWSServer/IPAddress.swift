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
