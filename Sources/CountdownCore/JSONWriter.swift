/// Appends JSON tokens to a byte buffer. Used for every server message, so it
/// works on bytes and never goes through Foundation.
public struct JSONWriter {
  public var bytes: [UInt8]

  public init(reservingCapacity capacity: Int = 256) {
    bytes = []
    bytes.reserveCapacity(capacity)
  }

  /// Continues an existing buffer.
  public init(appendingTo existing: [UInt8]) {
    bytes = existing
  }

  public mutating func raw(_ text: StaticString) {
    text.withUTF8Buffer { bytes.append(contentsOf: $0) }
  }

  public mutating func raw(_ fragment: [UInt8]) { bytes.append(contentsOf: fragment) }

  /// Decimal digits written straight into the buffer: this runs for every
  /// seq, time and count of every message, and `String(value)` would allocate.
  public mutating func integer<T: BinaryInteger>(_ value: T) {
    var magnitude = UInt64(value.magnitude)
    if value < 0 { bytes.append(UInt8(ascii: "-")) }
    var digits: (UInt64, UInt64, UInt64) = (0, 0, 0)  // 24 bytes: room for 20 digits
    var count = 0
    withUnsafeMutableBytes(of: &digits) { buffer in
      repeat {
        buffer[23 - count] = UInt8(truncatingIfNeeded: magnitude % 10) &+ 0x30
        magnitude /= 10
        count += 1
      } while magnitude > 0
      bytes.append(contentsOf: buffer[(24 - count)...])
    }
  }

  public mutating func bool(_ value: Bool) { value ? raw("true") : raw("false") }

  private static let hexDigits = Array("0123456789abcdef".utf8)

  /// Writes a quoted string, escaping what RFC 8259 requires.
  public mutating func string(_ value: String) {
    bytes.append(UInt8(ascii: "\""))
    for byte in value.utf8 {
      switch byte {
      case UInt8(ascii: "\""): raw("\\\"")
      case UInt8(ascii: "\\"): raw("\\\\")
      case UInt8(ascii: "\n"): raw("\\n")
      case UInt8(ascii: "\r"): raw("\\r")
      case UInt8(ascii: "\t"): raw("\\t")
      case 0x00..<0x20:
        raw("\\u00")
        bytes.append(Self.hexDigits[Int(byte >> 4)])
        bytes.append(Self.hexDigits[Int(byte & 0xF)])
      default: bytes.append(byte)
      }
    }
    bytes.append(UInt8(ascii: "\""))
  }
}
