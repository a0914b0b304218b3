/// A serialised origin (RFC 6454 6.1): `http` or `https`, `://`, an authority.
struct Origin: Equatable {
  var secure: Bool
  var authority: Authority

  init?(_ text: String) {
    let secure: Bool
    let rest: Substring
    if text.hasPrefix("http://") {
      (secure, rest) = (false, text.dropFirst(7))
    } else if text.hasPrefix("https://") {
      (secure, rest) = (true, text.dropFirst(8))
    } else {
      return nil
    }
    guard let authority = Authority(rest) else { return nil }
    self.secure = secure
    self.authority = authority
  }

  var defaultPort: Int { secure ? 443 : 80 }
}

extension Origin {
  /// Whether `text` is an origin as a browser serialises it, lowercase:
  /// `Origin` takes only a scheme and an authority, and printable ASCII keeps
  /// anything lws would write verbatim into a header out of it.
  static func isSerialised(_ text: String) -> Bool {
    text.utf8.allSatisfy({ (0x21...0x7e).contains($0) }) && Origin(text) != nil
  }

  /// Text from the command line as printable ASCII (escapes for the rest),
  /// cut at 64 characters, for a message that names what was refused.
  static func shown(_ text: String) -> String {
    let escaped = text.unicodeScalars.map {
      (0x20...0x7e).contains($0.value) ? String($0) : $0.escaped(asASCII: true)
    }
    return escaped.count > 64 ? escaped.prefix(64).joined() + "…" : escaped.joined()
  }
}
