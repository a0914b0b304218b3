import CountdownCore

/// One session's record as the function library writes it on one line: the
/// reply of `countdown_v2_command` and `countdown_v2_open`, and every message on
/// the changes channel. Fields are separated by single spaces, the finished
/// label last since it may hold spaces; `-` stands for an absent deadline or
/// time left.
struct RecordMessage: Equatable {
  /// The cluster epoch of the instance that sent the command.
  var epoch: String
  /// The changes channel's position: every publish adds one, so a jump
  /// shows a message this instance never got.
  var position: Int64
  var session: String
  /// The record as the line gives it, not yet checked.
  var fields: SessionRecord.Fields

  /// The record, or why it cannot be taken: Redis's hashes and messages are
  /// input, checked like a database row before any arithmetic on them.
  var record: Result<SessionRecord, SessionRecord.Damage> {
    Result { () throws(SessionRecord.Damage) in try SessionRecord(validating: fields) }
  }

  /// A publish position as Redis's counter gives it (a message's, or `GET
  /// countdown:pos`), or nil out of range: positions are compared and
  /// stepped, so one near `Int64.max` would overflow.
  static func position<Text: StringProtocol>(_ text: Text) -> Int64? {
    guard let value = Int64(text), (0...Int64(SessionRecord.maxCounter)).contains(value) else {
      return nil
    }
    return value
  }

  static func parse(_ line: String) -> RecordMessage? {
    let parts = line.split(separator: " ", maxSplits: 10, omittingEmptySubsequences: false)
    guard parts.count >= 10, let position = position(parts[1]), let revision = UInt64(parts[3]),
      let seq = UInt64(parts[4]), let phase = Phase(rawValue: String(parts[5])),
      let duration = Int(parts[6]), let updatedAt = Int64(parts[9])
    else { return nil }
    func optional(_ text: Substring) -> Int64?? {
      text == "-" ? .some(nil) : Int64(text).map { .some($0) }
    }
    guard let endsAt = optional(parts[7]), let remainingMs = optional(parts[8]) else { return nil }
    let label = parts.count == 11 ? String(parts[10]) : nil
    return RecordMessage(
      epoch: String(parts[0]), position: position, session: String(parts[2]),
      fields: SessionRecord.Fields(
        phase: phase, duration: duration, endsAt: endsAt, remainingMs: remainingMs,
        finishedLabel: label, seq: seq, revision: revision, updatedAt: updatedAt))
  }
}

extension KeyHash {
  /// Lower-case hex, as the session hash stores it.
  var hex: String {
    let digits = Array("0123456789abcdef")
    var text = ""
    for byte in array {
      text.append(digits[Int(byte >> 4)])
      text.append(digits[Int(byte & 0xf)])
    }
    return text
  }

  init?(hex: String) {
    let characters = Array(hex.utf8)
    guard characters.count == 64 else { return nil }
    var bytes: [UInt8] = []
    for index in stride(from: 0, to: 64, by: 2) {
      guard let high = Self.nibble(characters[index]), let low = Self.nibble(characters[index + 1])
      else { return nil }
      bytes.append(high << 4 | low)
    }
    self.init(bytes)
  }

  private static func nibble(_ character: UInt8) -> UInt8? {
    switch character {
    case UInt8(ascii: "0")...UInt8(ascii: "9"): character - UInt8(ascii: "0")
    case UInt8(ascii: "a")...UInt8(ascii: "f"): character - UInt8(ascii: "a") + 10
    default: nil
    }
  }
}
