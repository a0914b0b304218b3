#if canImport(Glibc)
  import Glibc
#endif

/// A configuration file read whole at start-up (a secret, a password, the
/// API tokens, a CA bundle), refusing one over `limit` bytes: what is read is
/// input, and a far larger file is not the one meant. Each caller words its
/// own error and names the path; none shows the content.
public enum SmallFile {
  public enum Failure: Error, Equatable, CustomStringConvertible {
    /// `open` or `read` failed: strerror's words.
    case unreadable(String)
    /// Longer than this limit, in bytes.
    case overLimit(Int)

    /// Worded to follow the flag and the path.
    public var description: String {
      switch self {
      case .unreadable(let reason): "cannot be read: \(reason)"
      case .overLimit(let limit): "it is over \(limit) bytes"
      }
    }
  }

  public static func read(_ path: String, limit: Int) throws(Failure) -> [UInt8] {
    let fd = open(path, O_RDONLY | O_CLOEXEC)
    guard fd >= 0 else { throw .unreadable(String(cString: strerror(errno))) }
    defer { close(fd) }
    var bytes: [UInt8] = []
    var buffer = [UInt8](repeating: 0, count: 4096)
    while true {
      let count = Glibc.read(fd, &buffer, buffer.count)
      if count < 0 && errno == EINTR { continue }
      guard count >= 0 else { throw .unreadable(String(cString: strerror(errno))) }
      if count == 0 { return bytes }
      bytes += buffer[0..<count]
      guard bytes.count <= limit else { throw .overLimit(limit) }
    }
  }
}
