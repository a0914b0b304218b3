import QRCode

/// The Share panel's QR codes (GET /qr.svg?text=…). A code takes a few
/// milliseconds of the service thread to draw, and a page asks for the same
/// one or two links again and again (each viewer's Share panel, each reload),
/// so the last few are kept. The image depends on the text alone, so
/// browsers and proxies may keep it too.
struct QRCodeAnswers {
  private var recent: [(text: String, answer: HTTPAnswer)] = []
  static let kept = 32

  mutating func answer(_ text: String?) -> HTTPAnswer {
    guard let text else { return Self.refusal }
    if let hit = recent.firstIndex(where: { $0.text == text }) { return recent[hit].answer }
    guard let svg = QRCode.svg(for: Array(text.utf8)) else { return Self.refusal }
    let answer = HTTPAnswer(
      status: 200, type: "image/svg+xml", body: svg,
      cacheControl: "public, max-age=86400, immutable")
    if recent.count == Self.kept { recent.removeFirst() }
    recent.append((text, answer))
    return answer
  }

  private static let refusal = HTTPAnswer(
    status: 400, type: "text/plain; charset=utf-8",
    body: Array("400 Bad Request: text must be 1 to \(QRCode.maxTextBytes) bytes\n".utf8))
}
