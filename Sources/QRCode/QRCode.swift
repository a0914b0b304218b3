import CQREncode

/// QR codes for the page's Share panel, drawn by libqrencode: this module is
/// the only one that imports it, and it hands out nothing but SVG text.
public enum QRCode {
  /// The longest text encoded. A link to a session with its key is well
  /// under this; a longer text would make a code too dense to scan from a
  /// projected screen, and the cap bounds the work one request can ask for.
  public static let maxTextBytes = 512

  /// The code for `text` as a standalone SVG document (black modules on
  /// white, a four-module quiet zone as the standard asks), or nil when the
  /// text is empty, longer than `maxTextBytes`, or cannot be encoded.
  public static func svg(for text: [UInt8]) -> [UInt8]? {
    guard !text.isEmpty, text.count <= maxTextBytes else { return nil }
    // Level M: readable with a fifth of the code damaged or glared over,
    // while keeping a link at a version a phone reads across a room.
    let encoded = text.withUnsafeBufferPointer { bytes in
      QRcode_encodeData(Int32(bytes.count), bytes.baseAddress, 0, QR_ECLEVEL_M)
    }
    guard let code = encoded else { return nil }
    defer { QRcode_free(code) }
    let width = Int(code.pointee.width)
    guard width > 0, let data = code.pointee.data else { return nil }
    let modules = UnsafeBufferPointer(start: data, count: width * width)
    return Array(
      render(width: width) { row, column in modules[row * width + column] & 1 != 0 }.utf8)
  }

  /// One path of unit squares, one run per dark stretch of a row: a small
  /// document with crisp edges at any size.
  static func render(width: Int, dark: (Int, Int) -> Bool) -> String {
    let quiet = 4
    let side = width + 2 * quiet
    var path = ""
    for row in 0..<width {
      var column = 0
      while column < width {
        guard dark(row, column) else {
          column += 1
          continue
        }
        let start = column
        while column < width, dark(row, column) { column += 1 }
        path += "M\(start + quiet) \(row + quiet)h\(column - start)v1h-\(column - start)z"
      }
    }
    return """
      <svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 \(side) \(side)" \
      shape-rendering="crispEdges"><rect width="\(side)" height="\(side)" fill="#fff"/>\
      <path fill="#000" d="\(path)"/></svg>

      """
  }
}
