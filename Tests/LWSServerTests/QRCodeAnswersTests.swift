import Testing

@testable import LWSServer

/// `/qr.svg`'s answers as a value: the budget of fresh codes per address, the kept codes, POST's.
@Suite struct QRCodeAnswersTests {
  let t0: Int64 = 1_700_000_000_000

  func text(_ value: String) -> [UInt8] { Array(value.utf8) }

  /// Past its budget an address gets 429 with Retry-After, while another address and a kept code do not.
  @Test func freshCodesAreLimitedPerAddress() {
    var answers = QRCodeAnswers()
    let budget = Int(QRCodeAnswers.drawsPerSecond)
    #expect(answers.answer(text("kept"), shared: true, peer: "10.0.0.1", now: t0).status == 200)
    for index in 1..<budget {
      let answer = answers.answer(text("fresh \(index)"), shared: true, peer: "10.0.0.1", now: t0)
      #expect(answer.status == 200, "draw \(index)")
    }
    let refused = answers.answer(text("one more"), shared: true, peer: "10.0.0.1", now: t0)
    #expect(refused.status == 429)
    #expect(refused.retryAfter == 1 && refused.cacheControl == "no-store")
    #expect(answers.answer(text("posted"), shared: false, peer: "10.0.0.1", now: t0).status == 429)
    #expect(answers.answer(text("kept"), shared: true, peer: "10.0.0.1", now: t0).status == 200)
    #expect(answers.answer(text("other"), shared: true, peer: "10.0.0.2", now: t0).status == 200)
    // A token comes back in 1/rate of a second.
    let later = t0 + Int64(1000 / QRCodeAnswers.drawsPerSecond)
    #expect(
      answers.answer(text("one more"), shared: true, peer: "10.0.0.1", now: later).status == 200)
  }

  /// A POST's code is marked no-store and never kept: asking again draws again.
  @Test func postedCodesAreNeitherKeptNorCacheable() {
    var answers = QRCodeAnswers()
    let link = text("http://x.example/?session=a#key=" + String(repeating: "a", count: 32))
    let posted = answers.answer(link, shared: false, peer: "p", now: t0)
    #expect(posted.status == 200 && posted.cacheControl == "no-store")
    #expect(posted.body.starts(with: Array("<svg ".utf8)))
    let got = answers.answer(link, shared: true, peer: "p", now: t0)
    #expect(got.cacheControl == "public, max-age=86400, immutable")
    // Each of those drew: the budget is spent by the rest.
    for index in 2..<Int(QRCodeAnswers.drawsPerSecond) {
      _ = answers.answer(link + [UInt8(index)], shared: false, peer: "p", now: t0)
    }
    #expect(answers.answer(link, shared: false, peer: "p", now: t0).status == 429)
    #expect(answers.answer(link, shared: true, peer: "p", now: t0).status == 200)
  }

  /// No text, an empty one, or more than 512 bytes (4 KB too) is a 400 that spends nothing.
  @Test func badTextsAreRefusedFree() {
    var answers = QRCodeAnswers()
    for _ in 0..<100 {
      for bad in [
        nil, [], [UInt8](repeating: 0x61, count: 513), [UInt8](repeating: 0, count: 4096),
      ] {
        for shared in [true, false] {
          #expect(answers.answer(bad, shared: shared, peer: "p", now: t0).status == 400)
        }
      }
    }
    #expect(answers.answer(text("\u{0}"), shared: false, peer: "p", now: t0).status == 200)
  }
}
