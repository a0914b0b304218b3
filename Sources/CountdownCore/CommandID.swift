/// A command's `id`, kept as the JSON text to echo back verbatim.
public struct CommandID: Equatable, Sendable {
  public let json: [UInt8]
  public static let maxStringLength = 128
  /// Longer number literals are refused: every echo of one is queued per reply.
  public static let maxNumberLength = 32

  init?(_ value: JSONValue) {
    var writer = JSONWriter(reservingCapacity: 16)
    switch value {
    case .number(let literal) where literal.utf8.count <= Self.maxNumberLength:
      writer.raw(Array(literal.utf8))
    case .string(let text) where text.unicodeScalars.count <= Self.maxStringLength:
      writer.string(text)
    default: return nil
    }
    json = writer.bytes
  }
}
