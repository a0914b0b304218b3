import Observability

/// The bearer tokens of `--api-token-file`: each may command and read any
/// session, in either control mode, and list sessions. Compared in constant
/// time, and never logged or shown (the description hides them).
public struct APITokens: Sendable, CustomStringConvertible {
  /// Shorter tokens are guessable; real ones come from a generator.
  public static let minLength = 16
  public static let maxLength = 256

  private var tokens: [[UInt8]] = []

  public init() {}

  public var isEmpty: Bool { tokens.isEmpty }
  public var count: Int { tokens.count }
  public var description: String { "APITokens(\(tokens.count) tokens)" }

  public enum ParseError: Error, Equatable, CustomStringConvertible {
    case tooShort(line: Int)
    case tooLong(line: Int)
    case notPrintable(line: Int)
    case none
    case unreadable(String)

    public var description: String {
      switch self {
      case .tooShort(let line):
        "line \(line): a token is at least \(APITokens.minLength) characters"
      case .tooLong(let line): "line \(line): a token is at most \(APITokens.maxLength) characters"
      case .notPrintable(let line):
        "line \(line): a token is printable ASCII with no spaces"
      case .none: "the file holds no token"
      case .unreadable(let reason): reason
      }
    }
  }

  /// The tokens of the file at `path`, read at start-up (before the loop runs).
  public init(file path: String) throws(ParseError) {
    let bytes: [UInt8]
    do throws(SmallFile.Failure) {
      bytes = try SmallFile.read(path, limit: 1 << 20)
    } catch {
      switch error {
      case .unreadable(let reason): throw .unreadable("cannot read \(path): \(reason)")
      case .overLimit: throw .unreadable("\(path) is over 1 MiB")
      }
    }
    try self.init(parsing: bytes)
  }

  /// One token per line; blank lines (and a trailing `\r`) are ignored.
  public init(parsing text: [UInt8]) throws(ParseError) {
    var line = 0
    for raw in text.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false) {
      line += 1
      var token = Array(raw)
      if token.last == UInt8(ascii: "\r") { token.removeLast() }
      if token.allSatisfy({ $0 == 0x20 || $0 == 0x09 }) { continue }
      guard token.allSatisfy({ (0x21...0x7e).contains($0) }) else {
        throw .notPrintable(line: line)
      }
      guard token.count >= Self.minLength else { throw .tooShort(line: line) }
      guard token.count <= Self.maxLength else { throw .tooLong(line: line) }
      tokens.append(token)
    }
    guard !tokens.isEmpty else { throw .none }
  }

  /// The line number (from 0, among tokens) of the token `presented` is, if
  /// any. Every token is compared over its whole length whatever matched, so
  /// the time taken tells nothing of how near a guess came.
  public func match(_ presented: String) -> Int? {
    let bytes = Array(presented.utf8)
    var found = -1
    for (index, token) in tokens.enumerated() {
      var difference = UInt8(token.count == bytes.count ? 0 : 1)
      for offset in 0..<token.count {
        difference |= token[offset] ^ (offset < bytes.count ? bytes[offset] : 0)
      }
      if difference == 0 { found = index }
    }
    return found >= 0 ? found : nil
  }
}
