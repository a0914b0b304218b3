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
