import CountdownCore

/// The `webhook-signature` header of Standard Webhooks: `v1,` and the base64
/// HMAC-SHA256 of `id.timestamp.body` under the secret's key.
public struct StandardWebhookSigner: Sendable {
  private let innerPad: [UInt8]
  private let outerPad: [UInt8]

  public init(secret: WebhookSecret) { self.init(key: secret.key) }

  /// Any key, as HMAC takes it: the test vectors use keys no secret may hold.
  init(key: [UInt8]) {
    // HMAC (RFC 2104): a key longer than SHA-256's 64-byte block is hashed first.
    var key = key
    if key.count > 64 { key = Self.bytes(SHA256.digest(key)) }
    key += [UInt8](repeating: 0, count: 64 - key.count)
    innerPad = key.map { $0 ^ 0x36 }
    outerPad = key.map { $0 ^ 0x5c }
  }

  /// The header's value for one attempt; `timestamp` in epoch seconds.
  public func signature(id: String, timestamp: Int64, body: [UInt8]) -> String {
    var message = Array(id.utf8)
    message.append(UInt8(ascii: "."))
    message += String(timestamp).utf8
    message.append(UInt8(ascii: "."))
    message += body
    return "v1," + Base64.encode(mac(message))
  }

  func mac(_ message: [UInt8]) -> [UInt8] {
    let inner = Self.bytes(SHA256.digest(innerPad + message))
    return Self.bytes(SHA256.digest(outerPad + inner))
  }

  private static func bytes(_ digest: SIMD32<UInt8>) -> [UInt8] {
    (0..<32).map { digest[$0] }
  }
}
