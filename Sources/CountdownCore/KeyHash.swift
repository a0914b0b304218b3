/// The SHA-256 of a controller key: what storage keeps instead of the key, so
/// a copy of the database hands out no control. Compared in constant time.
public struct KeyHash: Equatable, Sendable {
  public let bytes: SIMD32<UInt8>

  public init(bytes: SIMD32<UInt8>) { self.bytes = bytes }

  /// The hash of a key as clients present it (its text).
  public init(of key: String) { bytes = SHA256.digest(Array(key.utf8)) }

  /// From 32 stored bytes; nil for any other length.
  public init?(_ stored: [UInt8]) {
    guard stored.count == 32 else { return nil }
    var value = SIMD32<UInt8>()
    for index in 0..<32 { value[index] = stored[index] }
    bytes = value
  }

  public var array: [UInt8] { (0..<32).map { bytes[$0] } }

  /// True when `offered` hashes to this; the time taken does not depend on where they differ.
  public func matches(_ offered: String) -> Bool { matches(KeyHash(of: offered)) }

  /// True when both are the hash of one key; constant time, like `matches(_: String)`.
  public func matches(_ other: KeyHash) -> Bool {
    let difference = bytes ^ other.bytes
    var folded: UInt8 = 0
    for index in 0..<32 { folded |= difference[index] }
    return folded == 0
  }
}
