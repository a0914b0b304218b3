import CountdownCore

/// What the server makes of bytes that lws's HTTP parser gave up on: a
/// method lws does not know (TRACE, QUERY, CONNECT, anything else), or a
/// line that is not a request at all. lws would answer those with its own
/// HTML 403 page, whose Content-Length can exceed the bytes it sends
/// (lib/roles/http/header.c:381-470), and keep the connection waiting; the
/// server has lws hand them over raw instead (`lws_http_to_fallback`,
/// lib/roles/http/server/server.c:1910-1960) and answers once, closing: a
/// method the resource does not take is 405 with its `Allow`, as for the
/// methods lws knows, and anything else 400.
struct UnparsedRequest: Equatable {
  /// The request target's path, percent-decoded and without its query, when
  /// the line starts with a method token and a target; nil for bytes that
  /// are no request.
  var path: String?

  init(_ bytes: some Collection<UInt8>) {
    let line = bytes.prefix { $0 != UInt8(ascii: "\r") && $0 != UInt8(ascii: "\n") }
    let parts = line.split(separator: UInt8(ascii: " "), omittingEmptySubsequences: false)
    let method = parts.first.map(Array.init) ?? []
    guard parts.count >= 2, !method.isEmpty, method.count <= Self.maxMethodBytes,
      method.allSatisfy(Self.isTokenByte)
    else {
      path = nil
      return
    }
    let target = parts[1].prefix { $0 != UInt8(ascii: "?") && $0 != UInt8(ascii: "#") }
    path = String(decoding: Self.percentDecoded(target), as: UTF8.self)
  }

  /// Longer than any method anyone registered; past it, not a method.
  static let maxMethodBytes = 32

  /// `%XX` as its byte; a `%` not followed by two hex digits stays as it is.
  private static func percentDecoded(_ bytes: some Collection<UInt8>) -> [UInt8] {
    let bytes = Array(bytes)
    var out: [UInt8] = []
    var index = 0
    while index < bytes.count {
      if bytes[index] == UInt8(ascii: "%"), index + 2 < bytes.count,
        let high = hexValue(bytes[index + 1]), let low = hexValue(bytes[index + 2])
      {
        out.append(high << 4 | low)
        index += 3
      } else {
        out.append(bytes[index])
        index += 1
      }
    }
    return out
  }

  private static func hexValue(_ byte: UInt8) -> UInt8? {
    switch byte {
    case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
    case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
    case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
    default: nil
    }
  }

  /// RFC 9110 5.6.2's tchar.
  private static func isTokenByte(_ byte: UInt8) -> Bool {
    switch byte {
    case UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
      UInt8(ascii: "a")...UInt8(ascii: "z"):
      true
    default: Array("!#$%&'*+-.^_`|~".utf8).contains(byte)
    }
  }
}
