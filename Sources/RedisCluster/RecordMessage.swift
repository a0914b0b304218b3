import CountdownCore

/// One session's record as the function library writes it on one line: the
/// reply of `countdown_v3_command` and `countdown_v3_open`, and every message on
/// the changes channel. Fields are separated by single spaces, the texts
/// last since they may hold spaces: the wait label and the message (each
/// one's length in bytes, among the fields, says where it ends), then the
/// finished label, each text present after one space; `-` stands for an
/// absent time, outcome or level, `0` and `1` for a flag.
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

  /// The fields before the texts.
  private static let fixed = 20

  static func parse(_ line: String) -> RecordMessage? {
    let parts = line.split(separator: " ", maxSplits: fixed, omittingEmptySubsequences: false)
    guard parts.count >= fixed, let position = position(parts[1]), let revision = UInt64(parts[3]),
      let seq = UInt64(parts[4]), let phase = Phase(rawValue: String(parts[5])),
      let duration = Int(parts[6]), let updatedAt = Int64(parts[9])
    else { return nil }
    func optional<Number: FixedWidthInteger>(_ text: Substring) -> Number?? {
      text == "-" ? .some(nil) : Number(text).map { .some($0) }
    }
    func flag(_ text: Substring) -> Bool? {
      switch text {
      case "0": false
      case "1": true
      default: nil
      }
    }
    guard let endsAt: Int64? = optional(parts[7]), let remainingMs: Int64? = optional(parts[8]),
      let startedAt: Int64? = optional(parts[10]), let timeoutAt: Int64? = optional(parts[11]),
      let overtime = flag(parts[14]), let warnAtSeconds: Int? = optional(parts[15]),
      let dangerAtSeconds: Int? = optional(parts[16]), let overMs: Int64? = optional(parts[17]),
      let blackout = flag(parts[18])
    else { return nil }
    let outcome: Outcome?
    if parts[12] == "-" {
      outcome = nil
    } else {
      guard let named = Outcome(rawValue: String(parts[12])) else { return nil }
      outcome = named
    }
    // Within the line's own length, so no count can reach past it.
    let lengths = [parts[13], parts[19]].map { Int($0) }
    guard let waitBytes = lengths[0], let messageBytes = lengths[1],
      (0...line.utf8.count).contains(waitBytes), (0...line.utf8.count).contains(messageBytes)
    else { return nil }
    guard let texts = texts(parts.count > fixed ? parts[fixed] : nil, [waitBytes, messageBytes])
    else { return nil }
    return RecordMessage(
      epoch: String(parts[0]), position: position, session: String(parts[2]),
      fields: SessionRecord.Fields(
        phase: phase, duration: duration, endsAt: endsAt, remainingMs: remainingMs,
        finishedLabel: texts.rest, seq: seq, revision: revision, updatedAt: updatedAt,
        startedAt: startedAt, timeoutAt: timeoutAt, waitLabel: texts.sized[0], outcome: outcome,
        overtime: overtime, warnAtSeconds: warnAtSeconds, dangerAtSeconds: dangerAtSeconds,
        overMs: overMs, message: texts.sized[1], blackout: blackout))
  }

  /// The line's texts: one of each length in bytes (0: none), then the
  /// rest, each present one after a space (the first one's space is
  /// before `tail`); nil when they do not fit the tail or split a character.
  private static func texts(_ tail: Substring?, _ lengths: [Int]) -> (
    sized: [String?], rest: String?
  )? {
    guard let tail else {
      return lengths.allSatisfy { $0 == 0 } ? (lengths.map { _ in nil }, nil) : nil
    }
    var rest = tail.utf8[...]
    var sized: [String?] = []
    var first = true
    func separated() -> Bool {
      if first { return true }
      guard rest.first == UInt8(ascii: " ") else { return false }
      rest = rest.dropFirst()
      return true
    }
    for length in lengths {
      guard length > 0 else {
        sized.append(nil)
        continue
      }
      guard separated(), length <= rest.count else { return nil }
      let cut = rest.index(rest.startIndex, offsetBy: length)
      guard let text = String(rest[..<cut]) else { return nil }
      sized.append(text)
      rest = rest[cut...]
      first = false
    }
    guard !rest.isEmpty else { return (sized, nil) }
    guard separated(), let text = String(rest) else { return nil }
    return (sized, text)
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
