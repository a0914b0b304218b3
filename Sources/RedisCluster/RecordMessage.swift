import CountdownCore

/// One session's record as the function library writes it on one line: the
/// reply of `countdown_v3_command` and `countdown_v3_open`, and every message on
/// the changes channel. Fields are separated by single spaces, the labels
/// last since they may hold spaces: the wait label (its length in bytes
/// before it says where it ends), then the finished label; `-` stands for
/// an absent time or outcome.
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
    let parts = line.split(separator: " ", maxSplits: 14, omittingEmptySubsequences: false)
    guard parts.count >= 14, let position = position(parts[1]), let revision = UInt64(parts[3]),
      let seq = UInt64(parts[4]), let phase = Phase(rawValue: String(parts[5])),
      let duration = Int(parts[6]), let updatedAt = Int64(parts[9])
    else { return nil }
    func optional(_ text: Substring) -> Int64?? {
      text == "-" ? .some(nil) : Int64(text).map { .some($0) }
    }
    guard let endsAt = optional(parts[7]), let remainingMs = optional(parts[8]),
      let startedAt = optional(parts[10]), let timeoutAt = optional(parts[11])
    else { return nil }
    let outcome: Outcome?
    if parts[12] == "-" {
      outcome = nil
    } else {
      guard let named = Outcome(rawValue: String(parts[12])) else { return nil }
      outcome = named
    }
    // Within the line's own length, so no count can reach past it.
    guard let waitBytes = Int(parts[13]), (0...line.utf8.count).contains(waitBytes) else {
      return nil
    }
    var waitLabel: String?
    var label: String?
    if parts.count == 15 {
      let tail = parts[14].utf8
      guard waitBytes <= tail.count else { return nil }
      let cut = tail.index(tail.startIndex, offsetBy: waitBytes)
      if waitBytes > 0 {
        guard let text = String(tail[..<cut]) else { return nil }
        waitLabel = text
      }
      let rest = tail[cut...]
      if waitBytes == 0 {
        label = rest.isEmpty ? nil : String(Substring(rest))
      } else if !rest.isEmpty {
        // One space between the two labels.
        guard rest.first == UInt8(ascii: " "), let text = String(rest.dropFirst()) else {
          return nil
        }
        label = text
      }
    } else if waitBytes != 0 {
      return nil
    }
    return RecordMessage(
      epoch: String(parts[0]), position: position, session: String(parts[2]),
      fields: SessionRecord.Fields(
        phase: phase, duration: duration, endsAt: endsAt, remainingMs: remainingMs,
        finishedLabel: label, seq: seq, revision: revision, updatedAt: updatedAt,
        startedAt: startedAt, timeoutAt: timeoutAt, waitLabel: waitLabel, outcome: outcome))
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
