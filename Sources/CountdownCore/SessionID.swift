/// Session ids are `[A-Za-z0-9_-]{1,64}`: safe in a URL path, a log line and a key.
public enum SessionID {
  public static let maxLength = 64

  public static func isValid<S: Collection<UInt8>>(_ utf8: S) -> Bool {
    guard !utf8.isEmpty, utf8.count <= maxLength else { return false }
    return utf8.allSatisfy { byte in
      switch byte {
      case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
        UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "_"), UInt8(ascii: "-"):
        return true
      default:
        return false
      }
    }
  }

  public static func isValid(_ id: String) -> Bool { isValid(id.utf8) }
}
