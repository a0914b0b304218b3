import Testing

@testable import LWSServer

@Suite struct IPAddressTests {
  /// Addresses parse, and print in one canonical form (dotted IPv4, RFC 5952
  /// IPv6), so one address written two ways is one address.
  @Test func canonicalForms() {
    let cases: [(String, String)] = [
      ("198.51.100.7", "198.51.100.7"), ("0.0.0.0", "0.0.0.0"),
      ("255.255.255.255", "255.255.255.255"),
      ("::1", "::1"), ("::", "::"), ("2001:DB8:0:0:0:0:0:1", "2001:db8::1"),
      ("2001:db8:0:0:1:0:0:1", "2001:db8::1:0:0:1"), ("2001:0db8::0001", "2001:db8::1"),
      ("::ffff:127.0.0.1", "127.0.0.1"), ("::ffff:7f00:1", "127.0.0.1"),
      ("1:2:3:4:5:6:7:8", "1:2:3:4:5:6:7:8"),
      ("1::", "1::"), ("1:0:2:0:0:3:0:0", "1:0:2::3:0:0"),
      ("64:ff9b::192.0.2.33", "64:ff9b::c000:221"),
      ("1:2:3:4:5:6:7::", "1:2:3:4:5:6:7:0"),
    ]
    for (text, shown) in cases {
      #expect(IPAddress(text)?.description == shown, "\(text)")
    }
  }

  /// Anything else is not an address: no octal-looking parts, no zones, no
  /// ports, no names, nothing long.
  @Test func garbage() {
    for text in [
      "", " ", "1.2.3", "1.2.3.4.5", "256.1.1.1", "01.2.3.4", "1.2.3.-1", "1.2.3.4 ", "1..3.4",
      "a.b.c.d", "1.2.3.4:80", "::1%lo", ":::", "1:::2", "1::2::3", ":1:2:3:4:5:6:7",
      "1:2:3:4:5:6:7:8:9",
      "1:2:3:4:5:6:7", "12345::", "g::1", "1.2.3.4::", "::1.2.3", "localhost", "[::1]",
      "1:2:3:4:5:6:7:8::", "\u{0}", String(repeating: "1", count: 4096),
      "99999999999999999999.1.1.1",
    ] {
      #expect(IPAddress(text) == nil, "\(text.prefix(40))")
    }
  }
}

@Suite struct CIDRTests {
  /// /0, /32 and /128 are the edges; an IPv4 range covers mapped IPv4, and
  /// host bits are ignored.
  @Test func edges() throws {
    let all4 = try #require(CIDR("0.0.0.0/0"))
    #expect(all4.contains(IPAddress("203.0.113.9")!) && all4.contains(IPAddress("::ffff:1.2.3.4")!))
    #expect(!all4.contains(IPAddress("2001:db8::1")!))
    let all = try #require(CIDR("::/0"))
    #expect(all.contains(IPAddress("2001:db8::1")!) && all.contains(IPAddress("10.0.0.1")!))
    let one = try #require(CIDR("10.0.0.1/32"))
    #expect(one.contains(IPAddress("10.0.0.1")!) && !one.contains(IPAddress("10.0.0.2")!))
    #expect(CIDR("10.0.0.1") == one)
    let six = try #require(CIDR("2001:db8::1/128"))
    #expect(six.contains(IPAddress("2001:db8::1")!) && !six.contains(IPAddress("2001:db8::2")!))
    let net = try #require(CIDR("10.9.8.7/8"))
    #expect(net.description == "10.0.0.0/8" && net.contains(IPAddress("10.255.0.1")!))
    #expect(!net.contains(IPAddress("11.0.0.0")!))
    let ula = try #require(CIDR("fd00::/8"))
    #expect(ula.contains(IPAddress("fdff:1::1")!) && !ula.contains(IPAddress("fe00::1")!))
    let odd = try #require(CIDR("2001:db8::/33"))
    #expect(
      odd.contains(IPAddress("2001:db8:7fff::1")!) && !odd.contains(IPAddress("2001:db8:8000::")!))
  }

  /// Prefixes past the family's width, signs, leading zeros and names are refused.
  @Test func garbage() {
    for text in [
      "10.0.0.0/33", "::/129", "10.0.0.0/-1", "10.0.0.0/", "10.0.0.0/08", "10.0.0.0/+8", "/8",
      "10.0.0.0/8/8", "example.test/8", "10.0.0.0/ 8", "10.0.0.0/8 ", "",
      "10.0.0.0/99999999999999999999",
    ] {
      #expect(CIDR(text) == nil, "\(text)")
    }
  }
}

/// The name a client's per-address budgets count under.
@Suite struct AddressBudgetTests {
  /// IPv4 and IPv4-mapped IPv6 count per address; IPv6 by its prefix, at
  /// every edge of the range; what is not an address counts as itself.
  @Test func keysAtTheEdges() {
    let byDefault = AddressBudget()
    let cases: [(String, String)] = [
      ("198.51.100.7", "198.51.100.7"), ("::ffff:198.51.100.7", "198.51.100.7"),
      ("::ffff:c633:6407", "198.51.100.7"), ("0.0.0.0", "0.0.0.0"),
      ("255.255.255.255", "255.255.255.255"),
      ("::1", "::/64"), ("::", "::/64"),
      ("2001:db8:1:2:3:4:5:6", "2001:db8:1:2::/64"), ("2001:db8:1:2::", "2001:db8:1:2::/64"),
      ("2001:db8:1:2:ffff:ffff:ffff:ffff", "2001:db8:1:2::/64"),
      ("ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", "ffff:ffff:ffff:ffff::/64"),
      // Not an address: its own budget, never merged with another's.
      ("?", "?"), ("", ""), ("1.2.3", "1.2.3"),
    ]
    for (peer, key) in cases {
      #expect(byDefault.key(peer) == key, "\(peer)")
    }
    let v6 = "2001:db8:aaaa:bbbb:cccc:dddd:eeee:ffff"
    #expect(AddressBudget(ipv6Prefix: 32).key(v6) == "2001:db8::/32")
    #expect(AddressBudget(ipv6Prefix: 48).key(v6) == "2001:db8:aaaa::/48")
    #expect(AddressBudget(ipv6Prefix: 56).key(v6) == "2001:db8:aaaa:bb00::/56")
    #expect(AddressBudget(ipv6Prefix: 127).key(v6) == "2001:db8:aaaa:bbbb:cccc:dddd:eeee:fffe/127")
    #expect(AddressBudget(ipv6Prefix: 128).key(v6) == "2001:db8:aaaa:bbbb:cccc:dddd:eeee:ffff/128")
    #expect(AddressBudget(ipv6Prefix: 128).key("::ffff:10.1.2.3") == "10.1.2.3")
    // Out of range, a prefix is held to the range rather than trusted.
    #expect(AddressBudget(ipv6Prefix: 0).ipv6Prefix == 32)
    #expect(AddressBudget(ipv6Prefix: .max).ipv6Prefix == 128)
    #expect(AddressBudget(ipv6Prefix: .min).ipv6Prefix == 32)
  }
}

@Suite struct ForwardedForTests {
  let proxies = TrustedProxies([CIDR("127.0.0.0/8")!, CIDR("10.0.0.0/8")!, CIDR("::1")!])

  /// Without trusted ranges, or from a peer outside them, the header changes nothing.
  @Test func ignoredUnlessThePeerIsTrusted() {
    #expect(
      TrustedProxies().resolve(peer: "127.0.0.1", forwardedFor: "198.51.100.7").address
        == "127.0.0.1")
    #expect(proxies.resolve(peer: "192.0.2.1", forwardedFor: "198.51.100.7").address == "192.0.2.1")
    #expect(proxies.resolve(peer: "?", forwardedFor: "198.51.100.7").address == "?")
    #expect(proxies.resolve(peer: "127.0.0.1", forwardedFor: nil).address == "127.0.0.1")
  }

  /// Walked from the right past trusted hops, the first untrusted address is
  /// the client; what it wrote itself, to its left, is not believed.
  @Test func rightToLeft() {
    #expect(
      proxies.resolve(peer: "127.0.0.1", forwardedFor: "198.51.100.7").address == "198.51.100.7")
    #expect(
      proxies.resolve(peer: "::ffff:127.0.0.1", forwardedFor: "6.6.6.6, 198.51.100.7, 10.1.1.1")
        .address
        == "198.51.100.7")
    #expect(
      proxies.resolve(peer: "::1", forwardedFor: "[2001:DB8::7]:443").address == "2001:db8::7")
    #expect(
      proxies.resolve(peer: "127.0.0.1", forwardedFor: "198.51.100.7:5000").address
        == "198.51.100.7")
    // Every hop trusted: the leftmost is the client.
    #expect(
      proxies.resolve(peer: "127.0.0.1", forwardedFor: "10.0.0.5,10.0.0.6").address == "10.0.0.5")
  }

  /// A malformed entry the walk reaches gives the peer and says so; one left
  /// of the client is never read.
  @Test func malformed() {
    for header in [
      "", " ", "garbage", "198.51.100.7,", ",198.51.100.7, 10.0.0.1, x", "1.2.3.4:99999", "[::1",
      "unknown", "198.51.100.7\u{0}", String(repeating: "1.2.3.4 ", count: 512),
    ] {
      #expect(
        proxies.resolve(peer: "127.0.0.1", forwardedFor: header)
          == ClientAddress(address: "127.0.0.1", malformed: true), "\(header.prefix(40))")
    }
    #expect(
      proxies.resolve(peer: "127.0.0.1", forwardedFor: "garbage, 198.51.100.7")
        == ClientAddress(address: "198.51.100.7"))
  }

  /// Many hops (a 4 KB header) are walked whole, without a cap.
  @Test func manyHops() {
    let trusted = Array(repeating: "10.0.0.1", count: 400).joined(separator: ",")
    #expect(trusted.utf8.count > 3500)
    #expect(
      proxies.resolve(peer: "127.0.0.1", forwardedFor: "203.0.113.1," + trusted).address
        == "203.0.113.1")
    #expect(proxies.resolve(peer: "127.0.0.1", forwardedFor: trusted).address == "10.0.0.1")
  }

  /// A hop's port and a Host's port follow one rule, 1 to 5 ASCII digits up
  /// to 65535: the edges, and digits that are not ASCII, decide alike in both.
  @Test func portsAsInAHost() {
    for port in ["0", "65535", "00080", "1"] {
      #expect(
        proxies.resolve(peer: "127.0.0.1", forwardedFor: "198.51.100.7:\(port)")
          == ClientAddress(address: "198.51.100.7"), "\(port)")
      #expect(
        proxies.resolve(peer: "127.0.0.1", forwardedFor: "[2001:db8::7]:\(port)")
          == ClientAddress(address: "2001:db8::7"), "\(port)")
      #expect(Authority("a.test:\(port)")?.port == Int(port), "\(port)")
    }
    for port in [
      "65536", "000080", "", "+80", "-1", "\u{0668}\u{0660}", "\u{FF18}\u{FF10}", "1e3", "8 0",
      "9223372036854775808", "18446744073709551616", "8\u{0}", String(repeating: "9", count: 4096),
    ] {
      #expect(
        proxies.resolve(peer: "127.0.0.1", forwardedFor: "198.51.100.7:\(port)")
          == ClientAddress(address: "127.0.0.1", malformed: true), "\(port.prefix(40))")
      #expect(
        proxies.resolve(peer: "127.0.0.1", forwardedFor: "[2001:db8::7]:\(port)")
          == ClientAddress(address: "127.0.0.1", malformed: true), "\(port.prefix(40))")
      #expect(Authority("a.test:\(port)") == nil, "\(port.prefix(40))")
    }
  }
}
