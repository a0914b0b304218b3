/// A parsed JSON value, as the command decoder needs it.
///
/// Numbers keep their literal text so an `id` can be echoed back exactly as
/// the client wrote it, and so integers are not forced through `Double`.
public indirect enum JSONValue: Equatable, Sendable {
  case null
  case bool(Bool)
  case number(String)
  case string(String)
  case array([JSONValue])
  case object([String: JSONValue])

  /// The value as an integer, when it is a number literal with no fraction
  /// or exponent that fits an `Int`: `1e2`, `5.0` and anything past ±2^63
  /// are not integers here, and `-0` is the integer 0 (which every command
  /// field then refuses, as 0 is outside its range).
  public var integer: Int? {
    guard case .number(let literal) = self,
      !literal.contains(where: { $0 == "." || $0 == "e" || $0 == "E" })
    else { return nil }
    return Int(literal)
  }
}

/// Why a client's text was not acceptable JSON.
public enum JSONParseError: Error, Equatable, Sendable {
  /// Not JSON at all.
  case syntax(offset: Int)
  /// Valid JSON nested deeper than the parser allows.
  case tooDeep
  /// An object names the same key twice. RFC 8259 leaves the meaning open, so we refuse it.
  case duplicateKey(String)
}

/// A small strict JSON parser (RFC 8259) with a nesting limit.
///
/// Recursion is bounded by `maxDepth`, so hostile input cannot exhaust the stack.
public struct JSONParser {
  public static let defaultMaxDepth = 16

  private let bytes: [UInt8]
  private var index = 0
  private let maxDepth: Int

  private init(_ bytes: [UInt8], maxDepth: Int) {
    self.bytes = bytes
    self.maxDepth = maxDepth
  }

  /// Parses one JSON text; anything but whitespace after it is an error.
  public static func parse(_ bytes: [UInt8], maxDepth: Int = defaultMaxDepth) throws(JSONParseError)
    -> JSONValue
  {
    var parser = JSONParser(bytes, maxDepth: maxDepth)
    parser.skipWhitespace()
    let value = try parser.parseValue(depth: 0)
    parser.skipWhitespace()
    guard parser.index == parser.bytes.count else { throw .syntax(offset: parser.index) }
    return value
  }

  private var peek: UInt8? { index < bytes.count ? bytes[index] : nil }

  private mutating func skipWhitespace() {
    while let byte = peek, byte == 0x20 || byte == 0x09 || byte == 0x0A || byte == 0x0D {
      index += 1
    }
  }

  private mutating func expect(_ literal: StaticString) throws(JSONParseError) {
    let count = literal.utf8CodeUnitCount
    guard index + count <= bytes.count else { throw .syntax(offset: index) }
    let matches = literal.withUTF8Buffer { expected in
      expected.elementsEqual(bytes[index..<(index + count)])
    }
    guard matches else { throw .syntax(offset: index) }
    index += count
  }

  private mutating func parseValue(depth: Int) throws(JSONParseError) -> JSONValue {
    guard let byte = peek else { throw .syntax(offset: index) }
    switch byte {
    case UInt8(ascii: "{"): return try parseObject(depth: depth + 1)
    case UInt8(ascii: "["): return try parseArray(depth: depth + 1)
    case UInt8(ascii: "\""): return .string(try parseString())
    case UInt8(ascii: "t"):
      try expect("true")
      return .bool(true)
    case UInt8(ascii: "f"):
      try expect("false")
      return .bool(false)
    case UInt8(ascii: "n"):
      try expect("null")
      return .null
    case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"):
      return .number(try parseNumber())
    default:
      throw .syntax(offset: index)
    }
  }

  private mutating func parseObject(depth: Int) throws(JSONParseError) -> JSONValue {
    guard depth <= maxDepth else { throw .tooDeep }
    index += 1
    var members: [String: JSONValue] = [:]
    skipWhitespace()
    if peek == UInt8(ascii: "}") {
      index += 1
      return .object(members)
    }
    while true {
      skipWhitespace()
      guard peek == UInt8(ascii: "\"") else { throw .syntax(offset: index) }
      let key = try parseString()
      skipWhitespace()
      guard peek == UInt8(ascii: ":") else { throw .syntax(offset: index) }
      index += 1
      skipWhitespace()
      let value = try parseValue(depth: depth)
      guard members.updateValue(value, forKey: key) == nil else { throw .duplicateKey(key) }
      skipWhitespace()
      switch peek {
      case UInt8(ascii: ","): index += 1
      case UInt8(ascii: "}"):
        index += 1
        return .object(members)
      default: throw .syntax(offset: index)
      }
    }
  }

  private mutating func parseArray(depth: Int) throws(JSONParseError) -> JSONValue {
    guard depth <= maxDepth else { throw .tooDeep }
    index += 1
    var elements: [JSONValue] = []
    skipWhitespace()
    if peek == UInt8(ascii: "]") {
      index += 1
      return .array(elements)
    }
    while true {
      skipWhitespace()
      elements.append(try parseValue(depth: depth))
      skipWhitespace()
      switch peek {
      case UInt8(ascii: ","): index += 1
      case UInt8(ascii: "]"):
        index += 1
        return .array(elements)
      default: throw .syntax(offset: index)
      }
    }
  }

  private mutating func parseNumber() throws(JSONParseError) -> String {
    let start = index
    if peek == UInt8(ascii: "-") { index += 1 }
    guard let first = peek, isDigit(first) else { throw .syntax(offset: index) }
    index += 1
    if first != UInt8(ascii: "0") {
      while let byte = peek, isDigit(byte) { index += 1 }
    }
    if peek == UInt8(ascii: ".") {
      index += 1
      try requireDigits()
    }
    if peek == UInt8(ascii: "e") || peek == UInt8(ascii: "E") {
      index += 1
      if peek == UInt8(ascii: "+") || peek == UInt8(ascii: "-") { index += 1 }
      try requireDigits()
    }
    return String(decoding: bytes[start..<index], as: UTF8.self)
  }

  private mutating func requireDigits() throws(JSONParseError) {
    guard let byte = peek, isDigit(byte) else { throw .syntax(offset: index) }
    while let byte = peek, isDigit(byte) { index += 1 }
  }

  private func isDigit(_ byte: UInt8) -> Bool { byte >= 0x30 && byte <= 0x39 }

  private mutating func parseString() throws(JSONParseError) -> String {
    index += 1  // opening quote
    var scalars = String.UnicodeScalarView()
    var runStart = index
    func flushRun(_ parser: JSONParser, upTo end: Int) -> Bool {
      guard runStart < end else { return true }
      guard let run = String(validating: parser.bytes[runStart..<end], as: UTF8.self) else {
        return false
      }
      scalars.append(contentsOf: run.unicodeScalars)
      return true
    }
    while let byte = peek {
      switch byte {
      case UInt8(ascii: "\""):
        guard flushRun(self, upTo: index) else { throw .syntax(offset: index) }
        index += 1
        return String(scalars)
      case UInt8(ascii: "\\"):
        guard flushRun(self, upTo: index) else { throw .syntax(offset: index) }
        index += 1
        scalars.append(try parseEscape())
        runStart = index
      case 0x00..<0x20:
        throw .syntax(offset: index)
      default:
        index += 1
      }
    }
    throw .syntax(offset: index)
  }

  private mutating func parseEscape() throws(JSONParseError) -> Unicode.Scalar {
    guard let byte = peek else { throw .syntax(offset: index) }
    index += 1
    switch byte {
    case UInt8(ascii: "\""): return "\""
    case UInt8(ascii: "\\"): return "\\"
    case UInt8(ascii: "/"): return "/"
    case UInt8(ascii: "b"): return "\u{08}"
    case UInt8(ascii: "f"): return "\u{0C}"
    case UInt8(ascii: "n"): return "\n"
    case UInt8(ascii: "r"): return "\r"
    case UInt8(ascii: "t"): return "\t"
    case UInt8(ascii: "u"):
      let high = try parseHex4()
      if (0xD800..<0xDC00).contains(high) {
        // A high surrogate must be followed by an escaped low surrogate.
        try expect("\\u")
        let low = try parseHex4()
        guard (0xDC00..<0xE000).contains(low) else { throw .syntax(offset: index) }
        let combined = 0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00)
        guard let scalar = Unicode.Scalar(combined) else { throw .syntax(offset: index) }
        return scalar
      }
      guard let scalar = Unicode.Scalar(high) else { throw .syntax(offset: index) }
      return scalar
    default:
      throw .syntax(offset: index - 1)
    }
  }

  private mutating func parseHex4() throws(JSONParseError) -> UInt32 {
    guard index + 4 <= bytes.count else { throw .syntax(offset: index) }
    var value: UInt32 = 0
    for _ in 0..<4 {
      let byte = bytes[index]
      let digit: UInt32
      switch byte {
      case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = UInt32(byte - 0x30)
      case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = UInt32(byte - 0x61 + 10)
      case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = UInt32(byte - 0x41 + 10)
      default: throw .syntax(offset: index)
      }
      value = value << 4 | digit
      index += 1
    }
    return value
  }
}

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
