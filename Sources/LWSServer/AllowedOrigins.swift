/// `--allow-origin`: the pages, besides the server's own, that may open a
/// WebSocket or an event stream and read API answers. Each entry is checked
/// as `--frame-ancestors`' are, since a loose one would let in pages nobody
/// meant to list: `null` above all, which is what a sandboxed iframe on any
/// site, or a page opened from a file, sends as its Origin.
public enum AllowedOrigins {
  /// The longest origin there is: a scheme, a DNS name of at most 253
  /// characters, a port.
  public static let maxOriginBytes = "https://".utf8.count + 253 + ":65535".utf8.count

  public enum ParseError: Error, Equatable, CustomStringConvertible {
    case empty
    case badOrigin(String)

    public var description: String {
      switch self {
      case .empty: "needs origins (an empty entry is none)"
      case .badOrigin(let text):
        "'\(Origin.shown(text))' is not '*' or an origin such as https://a.example"
          + " (scheme and host, an optional port up to 65535, at most"
          + " \(AllowedOrigins.maxOriginBytes) bytes; no path, trailing slash, space or 'null')"
      }
    }
  }

  /// A comma-separated list (a space after a comma is allowed), lowercased.
  public static func parse(_ text: String) throws(ParseError) -> [String] {
    var origins: [String] = []
    for part in text.split(separator: ",", omittingEmptySubsequences: false) {
      let origin = String(part.trimmingPrefix(" ")).lowercased()
      guard !origin.isEmpty else { throw .empty }
      guard origin == "*" || (origin.utf8.count <= maxOriginBytes && Origin.isSerialised(origin))
      else { throw .badOrigin(String(part)) }
      origins.append(origin)
    }
    return origins
  }
}
