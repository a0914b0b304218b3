/// The sessions open here, each with the revision this instance last took
/// from Redis: the adapter's one record of revisions, and the one place they
/// are compared. The hub owns loading and key hashes; a session here whose
/// revision is nil has not been read yet, which is all the adapter knows of
/// loading. Shared by the change feed (which opens and reads sessions), the
/// ordering (whose replies carry revisions) and presence (which counts only
/// sessions read).
final class OpenSessions {
  private var revisions: [String: UInt64?] = [:]

  var count: Int { revisions.count }
  /// Every session open here, read or not.
  var all: Dictionary<String, UInt64?>.Keys { revisions.keys }
  /// The sessions open here whose first read has answered.
  var read: [String] { revisions.compactMap { $0.value == nil ? nil : $0.key } }

  func open(_ session: String) { revisions[session] = .some(nil) }
  func close(_ session: String) { revisions[session] = nil }
  func isOpen(_ session: String) -> Bool { revisions[session] != nil }
  /// Open here and read at least once.
  func isRead(_ session: String) -> Bool { revisions[session].map { $0 != nil } ?? false }

  /// What a record's revision means for a session here.
  enum Verdict: Equatable {
    /// Not open here: nothing to do.
    case notOpen
    /// Not read yet, or past the next revision: read the session again.
    case reread
    /// Not newer than what this instance has.
    case old
    /// The next revision: adopted.
    case next
  }

  /// A change message's revision: the next one is taken.
  func change(_ session: String, revision: UInt64) -> Verdict {
    guard let known = revisions[session] else { return .notOpen }
    // Loading: the read in flight may predate this change, so read again after it.
    guard let known, revision <= known + 1 else { return .reread }
    guard revision > known else { return .old }
    revisions[session] = revision
    return .next
  }

  /// A revision this instance learned from a reply or a read. Returns whether
  /// it was newer than the one it had (for a session read before).
  @discardableResult
  func took(_ session: String, revision: UInt64) -> Bool {
    guard let known = revisions[session], let known else { return false }
    guard revision > known else { return false }
    revisions[session] = revision
    return true
  }

  /// A read answered: the session is read from now on. Returns whether this
  /// was its first read (it was loading), and if not, whether `revision` is newer.
  func readAnswered(_ session: String, revision: UInt64?) -> (first: Bool, newer: Bool) {
    guard let known = revisions[session] else { return (false, false) }
    guard let known else {
      revisions[session] = revision ?? 0
      return (true, false)
    }
    guard let revision, revision > known else { return (false, false) }
    revisions[session] = revision
    return (false, true)
  }
}
