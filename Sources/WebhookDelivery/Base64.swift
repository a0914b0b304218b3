/// Standard base64 (RFC 4648 §4, with padding), for the secret and the
/// signature: the core has no Foundation, and this module needs only these two.
enum Base64 {
  private static let digits = Array(
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)

  static func encode(_ bytes: some Collection<UInt8>) -> String {
    var out: [UInt8] = []
    out.reserveCapacity((bytes.count + 2) / 3 * 4)
    var iterator = bytes.makeIterator()
    while let first = iterator.next() {
      let second = iterator.next()
      let third = iterator.next()
      let group = UInt32(first) << 16 | UInt32(second ?? 0) << 8 | UInt32(third ?? 0)
      out.append(digits[Int(group >> 18 & 63)])
      out.append(digits[Int(group >> 12 & 63)])
      out.append(second == nil ? UInt8(ascii: "=") : digits[Int(group >> 6 & 63)])
      out.append(third == nil ? UInt8(ascii: "=") : digits[Int(group & 63)])
    }
    return String(decoding: out, as: UTF8.self)
  }

  /// nil unless `text` is whole groups of four digits, `=` only as the last
  /// one or two, and no other character (no spaces, no URL-safe alphabet).
  static func decode(_ text: String) -> [UInt8]? {
    let input = Array(text.utf8)
    guard input.count % 4 == 0 else { return nil }
    var out: [UInt8] = []
    out.reserveCapacity(input.count / 4 * 3)
    for start in stride(from: 0, to: input.count, by: 4) {
      let isLast = start + 4 == input.count
      var group: UInt32 = 0
      var padding = 0
      for offset in 0..<4 {
        let character = input[start + offset]
        let value: UInt32
        if character == UInt8(ascii: "=") {
          // Only the last group pads, in its last one or two places.
          guard isLast, offset >= 2 else { return nil }
          padding += 1
          value = 0
        } else {
          guard padding == 0, let found = Self.value(of: character) else { return nil }
          value = found
        }
        group = group << 6 | value
      }
      out.append(UInt8(truncatingIfNeeded: group >> 16))
      if padding < 2 { out.append(UInt8(truncatingIfNeeded: group >> 8)) }
      if padding < 1 { out.append(UInt8(truncatingIfNeeded: group)) }
    }
    return out
  }

  private static func value(of character: UInt8) -> UInt32? {
    switch character {
    case UInt8(ascii: "A")...UInt8(ascii: "Z"): UInt32(character - UInt8(ascii: "A"))
    case UInt8(ascii: "a")...UInt8(ascii: "z"): UInt32(character - UInt8(ascii: "a")) + 26
    case UInt8(ascii: "0")...UInt8(ascii: "9"): UInt32(character - UInt8(ascii: "0")) + 52
    case UInt8(ascii: "+"): 62
    case UInt8(ascii: "/"): 63
    default: nil
    }
  }
}
