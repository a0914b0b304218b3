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
