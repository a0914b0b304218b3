import CountdownCore
import QRCode

/// The Share panel's QR codes. A code takes up to a few milliseconds of the
/// service thread to draw, so drawing is rate-limited per client address
/// (the HTTP API's bounded table of token buckets); what is refused gets
/// 429 with Retry-After. A page asks for the same one or two links again and
/// again (each viewer's Share panel, each reload), so the last few drawn by
/// GET are kept, and answered free of the limit.
///
/// `GET /qr.svg?text=…` is for links that may be shared: the image depends
/// on the text alone, so browsers and proxies may keep it too. A link that
/// holds a controller key is `POST /qr.svg` with the text as the body: the
/// key stays out of URLs (and so out of proxy logs and shared caches), and
/// its code is neither kept here nor by anyone else (`no-store`).
struct QRCodeAnswers {
  static let path = "/qr.svg"
  /// Fresh codes one address may have drawn a second (and at once, after a
  /// quiet second): a page needs two, and a room of pages behind one address
  /// shares its viewer link's code, which is kept.
  static let drawsPerSecond = 8.0
  static let kept = 32

  private var recent: [(text: [UInt8], answer: HTTPAnswer)] = []
  private var limits = RequestLimits()

  /// The answer for `text` asked by `peer`: `shared` for a GET, whose code
  /// may be kept, and a POST's not.
  mutating func answer(_ text: [UInt8]?, shared: Bool, peer: String, now: Int64) -> HTTPAnswer {
    guard let text, !text.isEmpty, text.count <= QRCode.maxTextBytes else { return Self.refusal }
    if shared, let hit = recent.firstIndex(where: { $0.text == text }) { return recent[hit].answer }
    guard limits.take([peer], rate: Self.drawsPerSecond, now: now) else { return Self.tooMany }
    guard let svg = QRCode.svg(for: text) else { return Self.refusal }
    guard shared else {
      return HTTPAnswer(status: 200, type: "image/svg+xml", body: svg, cacheControl: "no-store")
    }
    let answer = HTTPAnswer(
      status: 200, type: "image/svg+xml", body: svg,
      cacheControl: "public, max-age=86400, immutable")
    if recent.count == Self.kept { recent.removeFirst() }
    recent.append((text, answer))
    return answer
  }

  static let refusal = HTTPAnswer(
    status: 400, type: "text/plain; charset=utf-8",
    body: Array("400 Bad Request: text must be 1 to \(QRCode.maxTextBytes) bytes\n".utf8))

  private static let tooMany = HTTPAnswer(
    status: 429, type: "text/plain; charset=utf-8",
    body: Array(
      "429 Too Many Requests: at most \(Int(drawsPerSecond)) new QR codes a second\n".utf8),
    cacheControl: "no-store", retryAfter: APIResponse.retryAfterSeconds)
}
