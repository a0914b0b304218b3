import Observability

/// The password for Redis's AUTH, read from a file (`--redis-password-file`)
/// so that it is never on a command line, where `ps` shows it to every user.
public enum RedisPassword {
  /// Longer than any password a person or a secret store writes.
  static let maxBytes = 4096

  /// The file's text, without one trailing newline (or CR LF). Errors name
  /// the path, never the content.
  public static func read(file path: String) throws(RedisError) -> String {
    var bytes: [UInt8]
    do throws(SmallFile.Failure) {
      bytes = try SmallFile.read(path, limit: maxBytes)
    } catch {
      switch error {
      case .unreadable(let reason):
        throw RedisError(.authentication, "cannot read the password file \(path): \(reason)")
      case .overLimit:
        throw RedisError(.authentication, "the password file \(path) is over \(maxBytes) bytes")
      }
    }
    if bytes.last == UInt8(ascii: "\n") { bytes.removeLast() }
    if bytes.last == UInt8(ascii: "\r") { bytes.removeLast() }
    guard !bytes.isEmpty else {
      throw RedisError(.authentication, "the password file \(path) is empty")
    }
    return String(decoding: bytes, as: UTF8.self)
  }
}
