/// The bearer token: the file's text when `--token-file` is given, else `COUNTDOWN_TOKEN`,
/// else none. Never an argument, which `ps` would show to every user of the machine.
///
/// - Parameter fileText: the token file's contents (nil without `--token-file`).
/// - Returns: the token, trimmed of the line end an editor leaves, or nil for none.
public func resolveToken(fileText: String?, fileName: String?, environment: [String: String])
  throws(UsageError) -> String?
{
  let source: String
  let raw: String
  if let fileText {
    source = "the token file \(quoted(fileName ?? ""))"
    raw = fileText
  } else if let env = environment["COUNTDOWN_TOKEN"] {
    source = "COUNTDOWN_TOKEN"
    raw = env
  } else {
    return nil
  }
  var token = Substring(raw)
  while let last = token.last, last.isWhitespace { token.removeLast() }
  while let first = token.first, first.isWhitespace { token.removeFirst() }
  guard !token.isEmpty else { throw UsageError("\(source) is empty") }
  // It goes in an Authorization header: visible ASCII only, so a stray byte can neither
  // split the header nor be sent as something the server never issued.
  guard token.utf8.count <= 4096,
    token.unicodeScalars.allSatisfy({ (0x21...0x7E).contains($0.value) })
  else {
    throw UsageError(
      "\(source) must hold one token of visible ASCII characters (at most 4096)")
  }
  return String(token)
}
