#if canImport(Glibc)
  import Glibc
#endif

/// The password for Redis's AUTH, read from a file (`--redis-password-file`)
/// so that it is never on a command line, where `ps` shows it to every user.
public enum RedisPassword {
  /// Longer than any password a person or a secret store writes.
  static let maxBytes = 4096

  /// The file's text, without one trailing newline (or CR LF). Errors name
  /// the path, never the content.
  public static func read(file path: String) throws(RedisError) -> String {
    let fd = open(path, O_RDONLY | O_CLOEXEC)
    guard fd >= 0 else {
      throw RedisError(
        .authentication,
        "cannot read the password file \(path): \(String(cString: strerror(errno)))")
    }
    defer { close(fd) }
    var bytes: [UInt8] = []
    var buffer = [UInt8](repeating: 0, count: 1024)
    while true {
      let count = Glibc.read(fd, &buffer, buffer.count)
      if count < 0 && errno == EINTR { continue }
      guard count >= 0 else {
        throw RedisError(.authentication, "cannot read the password file \(path)")
      }
      if count == 0 { break }
      bytes += buffer[0..<count]
      guard bytes.count <= maxBytes else {
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
