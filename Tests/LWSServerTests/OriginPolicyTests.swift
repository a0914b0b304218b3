import Testing

@testable import LWSServer

@Suite struct OriginPolicyTests {
  let anywhere = OriginPolicy(allowed: [], listenHost: "0.0.0.0")
  let loopback = OriginPolicy(allowed: [], listenHost: "127.0.0.1")

  /// On a non-loopback --host, a page served under a domain name is the
  /// server's own when its host and port are the request's Host.
  @Test func sameHostAndPortIsOwnOffLoopback() {
    #expect(
      anywhere.allows(
        origin: "http://countdown.example.test:8080", host: "countdown.example.test:8080"))
    #expect(
      anywhere.allows(origin: "HTTPS://Countdown.Example.Test", host: "countdown.example.test"))
    #expect(anywhere.allows(origin: "http://a.test:80", host: "a.test"))
    #expect(anywhere.allows(origin: "https://a.test", host: "a.test:443"))
    #expect(anywhere.allows(origin: "http://[2001:db8::1]:8080", host: "[2001:db8::1]:8080"))
  }

  /// Another port, another host, or a default port that differs is foreign.
  @Test func otherPortOrHostIsForeign() {
    #expect(!anywhere.allows(origin: "http://a.test:8081", host: "a.test:8080"))
    #expect(!anywhere.allows(origin: "http://b.test:8080", host: "a.test:8080"))
    #expect(!anywhere.allows(origin: "https://a.test", host: "a.test:80"))
    #expect(!anywhere.allows(origin: "http://a.test", host: "a.test:8080"))
    #expect(!anywhere.allows(origin: "http://a.test.evil:8080", host: "a.test:8080"))
    #expect(!anywhere.allows(origin: "http://a.test:8080", host: nil))
  }

  /// Whatever is not an http(s) origin of one authority matches nothing,
  /// not even a Host spelt the same way.
  @Test func malformedOriginsAreForeign() {
    for origin in [
      "null", "", "a.test:8080", "ws://a.test:8080", "http://a.test:8080/", "http://u@a.test:8080",
      "http://a.test:8080?x", "http://a.test:08080x", "http://a.test:99999", "http://a.test:",
      "http://", "http://a.test:8080\u{0}", "http://[::1", "http://[zz::1]:8080",
      "http://a.test:8080 ", "http://a%2etest:8080",
      "http://" + String(repeating: "a", count: 4096) + ":8080",
    ] {
      #expect(!anywhere.allows(origin: origin, host: "a.test:8080"), "\(origin.prefix(40))")
    }
    #expect(!anywhere.allows(origin: "http://a.test:8080", host: "a.test:8080/"))
    #expect(!anywhere.allows(origin: "http://a.test:8080", host: ""))
  }

  /// On loopback a domain name is never its own origin (DNS rebinding), but
  /// an IP address, localhost and the --host name are.
  @Test func loopbackKeepsTheRebindingRule() {
    #expect(!loopback.allows(origin: "http://rebind.test:8080", host: "rebind.test:8080"))
    #expect(loopback.allows(origin: "http://127.0.0.1:8080", host: "127.0.0.1:8080"))
    #expect(loopback.allows(origin: "http://localhost:8080", host: "localhost:8080"))
    #expect(loopback.allows(origin: "http://[::1]:8080", host: "[::1]:8080"))
    #expect(!loopback.allows(origin: "http://127.0.0.1:8081", host: "127.0.0.1:8080"))
    let named = OriginPolicy(allowed: [], listenHost: "localhost")
    #expect(!named.allows(origin: "http://rebind.test", host: "rebind.test"))
  }

  /// Listed origins pass in any case, on any Host; '*' passes everything.
  @Test func listedOriginsAndStar() {
    let listed = OriginPolicy(allowed: ["https://Good.Example"], listenHost: "127.0.0.1")
    #expect(listed.allows(origin: "https://good.example", host: "other:1"))
    #expect(listed.allows(origin: "HTTPS://GOOD.EXAMPLE", host: nil))
    #expect(!listed.allows(origin: "https://good.example:444", host: nil))
    let star = OriginPolicy(allowed: ["*"], listenHost: "127.0.0.1")
    #expect(star.allows(origin: "null", host: nil))
  }
}

@Suite struct HeaderTextTests {
  /// Printable ASCII is text; a NUL, a control byte, DEL or UTF-8 is not.
  @Test func onlyPrintableASCII() throws {
    #expect(
      try HeaderError.text(Array("http://a.test:1".utf8), header: "origin") == "http://a.test:1")
    #expect(try HeaderError.text([], header: "origin") == "")
    for bad: [UInt8] in [
      [0], [0x61, 0, 0x62], [0x09], [0x0d, 0x0a], [0x7f], [0xc3, 0xa9], [0xff],
    ] {
      #expect(throws: HeaderError(header: "origin", problem: .notText)) {
        try HeaderError.text(bad, header: "origin")
      }
    }
  }

  /// An unreadable Origin is refused as a foreign one (403), any other
  /// header as a bad request (400).
  @Test func causes() {
    #expect(HeaderError(header: "origin", problem: .tooLong(3000)).cause.status == 403)
    #expect(HeaderError(header: "host", problem: .notText).cause.status == 400)
    #expect(HeaderError(header: "key", problem: .repeated).cause == .badHeader)
  }
}

@Suite struct LogThrottleTests {
  /// One line per interval; the lines held back are counted and reported
  /// with the next line, then the count starts again.
  @Test func oneLinePerInterval() {
    var throttle = LogThrottle(intervalMs: 1000)
    #expect(throttle.admit(now: 5000) == 0)
    #expect(throttle.admit(now: 5001) == nil)
    #expect(throttle.admit(now: 5999) == nil)
    #expect(throttle.admit(now: 6000) == 2)
    #expect(throttle.admit(now: 6500) == nil)
    #expect(throttle.admit(now: 9000) == 1)
    #expect(throttle.admit(now: 9000) == nil)
  }

  /// A clock that steps back does not silence the log.
  @Test func clockStepBack() {
    var throttle = LogThrottle(intervalMs: 1000)
    #expect(throttle.admit(now: 10_000) == 0)
    #expect(throttle.admit(now: 2000) == 0)
  }
}
