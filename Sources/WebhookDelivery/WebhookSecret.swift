import Observability

/// A Standard Webhooks signing secret: `whsec_` and the key in base64. The
/// key is what signs; the text is never shown or logged.
public struct WebhookSecret: Sendable, Equatable {
  /// The HMAC key: the base64 after `whsec_`, decoded.
  public let key: [UInt8]

  /// The specification's bounds on a key (24 to 64 bytes): shorter is
  /// guessable, and longer only hashes down to a block anyway.
  public static let keyBytes = 24...64

  public enum ParseError: Error, Equatable, CustomStringConvertible {
    case empty
    case missingPrefix
    case badBase64
    case wrongLength(Int)
    case tooLong
    case unreadable(String)

    public var description: String {
      switch self {
      case .empty: "the secret is empty"
      case .missingPrefix: "the secret must start with 'whsec_'"
      case .badBase64:
        "the secret after 'whsec_' must be standard base64 (A-Z a-z 0-9 + /, = padding)"
      case .wrongLength(let count):
        "the secret's key is \(count) bytes; it must be \(keyBytes.lowerBound) to \(keyBytes.upperBound)"
      case .tooLong: "the secret's key is longer than \(keyBytes.upperBound) bytes"
      case .unreadable(let reason): reason
      }
    }
  }

  /// A key as it is, for tests.
  init(unchecked key: [UInt8]) { self.key = key }

  /// `text` as a file holds it: spaces and line ends around it are dropped.
  public init(parsing text: String) throws(ParseError) {
    // By Character, so a CRLF (one Character) goes too.
    let trimmed = String(
      text.drop(while: \.isWhitespace).reversed().drop(while: \.isWhitespace).reversed())
    guard !trimmed.isEmpty else { throw .empty }
    guard trimmed.hasPrefix("whsec_") else { throw .missingPrefix }
    let encoded = String(trimmed.dropFirst("whsec_".count))
    // Bound the work before decoding: past this, the key is too long anyway.
    let longest = (Self.keyBytes.upperBound + 2) / 3 * 4
    guard encoded.utf8.count <= longest else { throw .tooLong }
    guard let key = Base64.decode(encoded) else { throw .badBase64 }
    guard Self.keyBytes.contains(key.count) else { throw .wrongLength(key.count) }
    self.key = key
  }

  /// The secret in a file (`--webhook-secret-file`), so it is never on a
  /// command line where `ps` shows it. Errors say what is wrong, never the
  /// content; the caller names the path.
  public init(file path: String) throws(ParseError) {
    let bytes: [UInt8]
    do throws(SmallFile.Failure) {
      // Far past any secret: a larger file is not one.
      bytes = try SmallFile.read(path, limit: 4096)
    } catch {
      throw .unreadable(error.description)
    }
    guard let text = String(validating: bytes, as: UTF8.self) else { throw .badBase64 }
    try self.init(parsing: text)
  }
}
