import CountdownCore

/// A `--webhook` URL: http or https, with a host, and nothing a request line
/// could not carry. libcurl parses it fully when it sends; this refuses at
/// start-up what could never be sent.
public struct WebhookEndpoint: Sendable, Equatable, CustomStringConvertible {
  public let url: String

  /// Longer than any URL a receiver needs, short enough to log.
  public static let maxLength = 2048

  public init(parsing text: String) throws(WebhookConfigError) {
    let bytes = Array(text.utf8)
    guard bytes.count <= Self.maxLength else {
      throw WebhookConfigError("a webhook URL is at most \(Self.maxLength) bytes")
    }
    // Spaces, control characters and NUL would end or split the request line.
    guard bytes.allSatisfy({ $0 > 0x20 && $0 != 0x7f }) else {
      throw WebhookConfigError("a webhook URL must not contain spaces or control characters")
    }
    let lowered = text.lowercased()
    let rest: Substring
    if lowered.hasPrefix("http://") {
      rest = text.dropFirst("http://".count)
    } else if lowered.hasPrefix("https://") {
      rest = text.dropFirst("https://".count)
    } else {
      throw WebhookConfigError("a webhook URL must start with http:// or https://")
    }
    let authority = rest.prefix { $0 != "/" && $0 != "?" && $0 != "#" }
    let host = authority.split(separator: "@", omittingEmptySubsequences: false).last ?? ""
    guard !host.isEmpty, !host.hasPrefix(":") else {
      throw WebhookConfigError("a webhook URL must name a host")
    }
    try Self.checkPort(of: host)
    url = text
  }

  /// A port, when the URL names one, is 1 to 65535: curl would refuse any
  /// other at every try, for the whole retry window.
  private static func checkPort(of hostAndPort: Substring) throws(WebhookConfigError) {
    var rest = hostAndPort
    if rest.hasPrefix("[") {
      guard let close = rest.firstIndex(of: "]") else {
        throw WebhookConfigError("a webhook URL's IPv6 address must end with ']'")
      }
      rest = rest[rest.index(after: close)...]
      guard rest.isEmpty || rest.hasPrefix(":") else {
        throw WebhookConfigError("a webhook URL's IPv6 address must be followed by :PORT or /")
      }
    }
    guard let colon = rest.lastIndex(of: ":") else { return }
    let digits = rest[rest.index(after: colon)...]
    guard !digits.isEmpty, digits.count <= 5, digits.allSatisfy({ ("0"..."9").contains($0) }),
      let port = Int(digits), (1...65_535).contains(port)
    else {
      throw WebhookConfigError("a webhook URL's port must be 1 to 65535")
    }
  }

  /// The URL as logs and `--print-config` show it: see `redacted(_:)`.
  public var description: String { Self.redacted(url) }

  /// Any text as a URL, shown without what may be a secret: receivers often
  /// take one as userinfo, in the path (`/hooks/T0KEN`) or in the query
  /// (`?token=…`). Only `scheme://host[:port]` is kept; when anything else
  /// was there, a marker with the first 8 hex digits of the whole text's
  /// SHA-256 stands for it, so that an operator can tell endpoints on one
  /// host apart (`printf %s URL | sha256sum`) without the log holding the
  /// secret. A text that did not parse is shown the same way.
  public static func redacted(_ text: String) -> String {
    let scheme = text.firstRange(of: "://").map { text[..<$0.upperBound] } ?? ""
    let rest = text.dropFirst(scheme.count)
    let authority = rest.prefix { $0 != "/" && $0 != "?" && $0 != "#" }
    let host = authority.lastIndex(of: "@").map { authority[authority.index(after: $0)...] }
    let kept = String(scheme) + String(host ?? authority)
    guard text != kept, text != kept + "/" else { return text }
    let digest = SHA256.digest(Array(text.utf8))
    let digits = String((0..<4).reduce(UInt32(0)) { $0 << 8 | UInt32(digest[$1]) }, radix: 16)
    return kept + "/[redacted:" + String(repeating: "0", count: 8 - digits.count) + digits + "]"
  }
}

/// Which event types are sent (`--webhook-events`): all by default.
public struct WebhookEventFilter: Sendable, Equatable {
  public let types: Set<WebhookEventType>

  public static let all = WebhookEventFilter(types: Set(WebhookEventType.allCases))

  public init(types: Set<WebhookEventType>) { self.types = types }

  /// A comma-separated list of types such as `session.finished,session.started`.
  public init(parsing text: String) throws(WebhookConfigError) {
    var types: Set<WebhookEventType> = []
    for part in text.split(separator: ",", omittingEmptySubsequences: false) {
      let name = part.trimmingPrefix(" ")
      guard let type = WebhookEventType(rawValue: String(name)) else {
        let allowed = WebhookEventType.allCases.map(\.rawValue).joined(separator: ", ")
        throw WebhookConfigError(
          "webhook event types are \(allowed), not '\(String(name.prefix(64)))'")
      }
      types.insert(type)
    }
    self.types = types
  }

  public func allows(_ type: WebhookEventType) -> Bool { types.contains(type) }

  /// The list as `--webhook-events` takes it, in the types' own order.
  public var description: String {
    WebhookEventType.allCases.filter(types.contains).map(\.rawValue).joined(separator: ",")
  }
}

public struct WebhookConfigError: Error, Equatable, CustomStringConvertible {
  public let description: String
  public init(_ description: String) { self.description = description }
}
