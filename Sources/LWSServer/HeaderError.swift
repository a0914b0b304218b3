/// A header that is there but cannot be read whole: the upgrade is refused,
/// so that an unreadable header is never taken for an absent one.
struct HeaderError: Error, Equatable {
  enum Problem: Equatable {
    case tooLong(Int)
    /// An lws call failed with this code.
    case library(code: Int32)
    /// Bytes outside printable ASCII: a NUL, a control character, or UTF-8
    /// where RFC 6454 and RFC 9110 call for ASCII.
    case notText
    case repeated
    case notANumber
  }

  var header: String
  var problem: Problem

  /// An origin the server cannot read is not one it allows (403); anything
  /// else is a malformed request (400).
  var cause: RefusalCause { header == "origin" ? .origin : .badHeader }

  /// `bytes` as text, when every byte is printable ASCII.
  static func text(_ bytes: [UInt8], header: String) throws(HeaderError) -> String {
    guard bytes.allSatisfy({ (0x20...0x7e).contains($0) }) else {
      throw HeaderError(header: header, problem: .notText)
    }
    return String(decoding: bytes, as: UTF8.self)
  }

  /// `bytes` as text, when they are UTF-8 with no control character: what an
  /// endpoint's argument (a QR code's text) may hold, once lws decoded it.
  static func utf8Text(_ bytes: [UInt8], header: String) throws(HeaderError) -> String {
    guard !bytes.contains(where: { $0 < 0x20 || $0 == 0x7f }),
      let text = String(validating: bytes, as: UTF8.self)
    else { throw HeaderError(header: header, problem: .notText) }
    return text
  }
}
