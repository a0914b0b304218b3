import Foundation
import Testing

@testable import QRCode

@Suite struct QRCodeTests {
  /// A link is drawn as one SVG document with a square viewBox and dark modules.
  @Test func drawsALink() throws {
    let svg = try #require(QRCode.svg(for: Array("http://127.0.0.1:8080/?session=team-a".utf8)))
    let text = String(decoding: svg, as: UTF8.self)
    #expect(text.hasPrefix("<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 "))
    #expect(text.contains("<path fill=\"#000\" d=\"M"))
    #expect(!text.contains("<script"))
  }

  /// Nothing, or more than the cap, is refused; the cap itself and binary bytes are taken.
  @Test(arguments: [0, 1, QRCode.maxTextBytes, QRCode.maxTextBytes + 1, 4096])
  func theCap(length: Int) {
    let drawn = QRCode.svg(for: [UInt8](repeating: 0x41, count: length)) != nil
    #expect(drawn == (1...QRCode.maxTextBytes).contains(length))
  }

  /// NUL and other bytes a C string would cut are encoded, not truncated: the data
  /// API is given the length.
  @Test func bytesPastANulStillCount() throws {
    let short = try #require(QRCode.svg(for: [0x61]))
    let long = try #require(QRCode.svg(for: [0x61, 0x00] + [UInt8](repeating: 0x62, count: 200)))
    #expect(long.count > short.count)
  }

  /// Each dark run of a row is one unit-high rectangle, offset by the quiet zone.
  @Test func rendersRunsWithAQuietZone() {
    let grid: [[Bool]] = [[true, true, false], [false, false, false], [true, false, true]]
    let svg = QRCode.render(width: 3) { row, column in grid[row][column] }
    #expect(svg.contains("viewBox=\"0 0 11 11\""))
    #expect(svg.contains("d=\"M4 4h2v1h-2zM4 6h1v1h-1zM6 6h1v1h-1z\""))
  }

  /// The page reads the cap from the contract (Public/constants.js), so it never
  /// asks for a code the server refuses.
  @Test func theContractHasTheCap() throws {
    let url = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
      .appendingPathComponent("../../Public/constants.js").standardized
    let text = try String(contentsOf: url, encoding: .utf8)
    let match = try #require(text.firstMatch(of: /"qrTextMaxBytes": (\d+)/))
    #expect(Int(match.1) == QRCode.maxTextBytes)
  }
}
