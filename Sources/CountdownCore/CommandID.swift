/// A command's `id`, kept as the JSON text to echo back.
///
/// An integer within ±2^63 (as every integer field takes one, so `7.0` is 7,
/// echoed as `7`: an echo is at most 20 bytes) or a string of at most
/// `maxStringLength` Unicode scalars, echoed verbatim. Both rules are JSON
/// Schema's own (`integer`, `minimum`, `maximum`, `maxLength`), so the
/// OpenAPI document states them exactly. `null`, as JSON-RPC clients send
/// it, is no id.
public struct CommandID: Equatable, Sendable {
  public let json: [UInt8]
  public static let maxStringLength = 128

  init?(_ value: JSONValue) {
    var writer = JSONWriter(reservingCapacity: 16)
    switch value {
    case .number:
      guard let integer = value.integer else { return nil }
      writer.integer(integer)
    case .string(let text) where text.unicodeScalars.count <= Self.maxStringLength:
      writer.string(text)
    default: return nil
    }
    json = writer.bytes
  }
}
