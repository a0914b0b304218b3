/// `--frame-ancestors`: the sites whose pages may embed this server's page in
/// an iframe. Without it the server keeps lws's best-practice headers, which
/// forbid any framing (`frame-ancestors 'none'` and `x-frame-options: deny`).
///
/// With it, the main listener's lws-written answers (the files, the
/// endpoints, the event stream) carry `headers` instead: lws's own set, with
/// `frame-ancestors` naming these sources and no `x-frame-options`, whose
/// `deny` would still refuse every frame (and which has no way to name a
/// list). The server's own hand-written answers (refusals, the API) keep
/// `deny`: they are never a page to embed.
public struct FrameAncestors: Sendable, Equatable {
  /// `'self'` or lowercased http(s) origins, in the order given.
  public let sources: [String]

  /// At most this many sources, and this many bytes in all: the headers go
  /// into lws's fixed header buffers with the rest of the answer's.
  public static let maxSources = 16
  public static let maxBytes = 512

  public enum ParseError: Error, Equatable, CustomStringConvertible {
    case empty
    case tooLong
    case tooMany
    case badSource(String)

    public var description: String {
      switch self {
      case .empty: "needs at least one source"
      case .tooLong: "is longer than \(FrameAncestors.maxBytes) bytes"
      case .tooMany: "names more than \(FrameAncestors.maxSources) sources"
      case .badSource(let text):
        "'\(Origin.shown(text))' is not 'self' or an origin such as https://obs.example.com"
          + " (scheme and host, an optional port; no path, space or semicolon)"
      }
    }
  }

  /// Parses a comma-separated list. Each source is `'self'` or an http(s)
  /// origin; anything else (a space, a semicolon, a control character, a
  /// path, `*`) is refused, since it would change the policy's meaning.
  public init(parsing text: String) throws(ParseError) {
    guard text.utf8.count <= Self.maxBytes else { throw .tooLong }
    let parts = text.split(separator: ",", omittingEmptySubsequences: false).map(String.init)
    guard !text.isEmpty else { throw .empty }
    guard parts.count <= Self.maxSources else { throw .tooMany }
    var sources: [String] = []
    for part in parts {
      let source = part.lowercased()
      guard source == "'self'" || Origin.isSerialised(source) else { throw .badSource(part) }
      if !sources.contains(source) { sources.append(source) }
    }
    self.sources = sources
  }

  /// lws 4.1.6's best-practice headers (lib/roles/http/header.c), in its
  /// order, with the frame-ancestors directive naming `sources` and without
  /// `x-frame-options`. Names end in ':', as lws writes them.
  public var headers: [(name: String, value: String)] {
    [
      (
        "content-security-policy:",
        "default-src 'none'; img-src 'self' data: ; script-src 'self'; font-src 'self'; "
          + "style-src 'self'; connect-src 'self' ws: wss:; frame-ancestors "
          + sources.joined(separator: " ") + "; base-uri 'none';form-action 'self';"
      ),
      ("x-content-type-options:", "nosniff"),
      ("x-xss-protection:", "1; mode=block"),
      ("referrer-policy:", "no-referrer"),
    ]
  }
}
