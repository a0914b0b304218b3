import CountdownCore

/// What the server answers to bytes that lws's HTTP parser gave up on: a
/// method lws does not know (TRACE, QUERY, CONNECT, anything else), or a
/// line that is not a request at all. lws would answer those with its own
/// HTML 403 page, whose Content-Length can exceed the bytes it sends
/// (lib/roles/http/header.c:381-470), and keep the connection waiting; the
/// server has lws hand them over raw instead (`lws_http_to_fallback`,
/// lib/roles/http/server/server.c:1910-1960) and answers here, once, closing.
struct UnparsedRequest: Equatable {
  /// A request line with a method token: the method is one the server does
  /// not implement (RFC 9110 15.6.2). Anything else is a bad request.
  var knownShape: Bool
  /// The target is under the API prefix, so the answer is the API's JSON.
  var api: Bool

  init(_ bytes: some Collection<UInt8>) {
    let line = bytes.prefix { $0 != UInt8(ascii: "\r") && $0 != UInt8(ascii: "\n") }
    let parts = line.split(separator: UInt8(ascii: " "), omittingEmptySubsequences: false)
    let method = parts.first.map(Array.init) ?? []
    knownShape =
      parts.count >= 2 && !method.isEmpty && method.count <= Self.maxMethodBytes
      && method.allSatisfy(Self.isTokenByte)
    let target = parts.count >= 2 ? Array(parts[1]) : []
    let prefix = Array(APIRequest.prefix.utf8)
    api =
      knownShape
      && (target == prefix || target.starts(with: prefix + [UInt8(ascii: "/")])
        || target.starts(with: prefix + [UInt8(ascii: "?")]))
  }

  /// Longer than any method anyone registered; past it, not a method.
  static let maxMethodBytes = 32

  var status: UInt32 { knownShape ? 501 : 400 }

  var error: CommandError {
    knownShape
      ? CommandError(
        .badRequest, "the method is not implemented: the API takes GET, HEAD, POST and OPTIONS")
      : CommandError(.badRequest, "the request line is not HTTP/1.1")
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
