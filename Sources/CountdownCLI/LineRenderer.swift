/// The seed's spinner ("菊花") as most command-line tools draw it: braille dots, one frame
/// every 80 ms, picked by time so a redraw at any moment shows the right one.
public enum Spinner {
  public static let frames: [String] = ["⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"]
  public static let frameMilliseconds: Int64 = 80

  public static func frame(atMilliseconds ms: Int64) -> String {
    let n = Int64(frames.count)
    let i = (ms / frameMilliseconds % n + n) % n
    return frames[Int(i)]
  }
}

/// Draws a frame as one line: redrawn in place on a terminal, or one line per change when
/// output goes to a pipe or a file.
public enum LineRenderer {
  static let escape = "\u{1B}["
  /// Back to the start of the line, and clear what a longer line left after it.
  static let clearToEnd = "\u{1B}[K"

  private enum Tone: String {
    case spinner = "36"
    case good = "32"
    case bad = "31"
    case paused = "33"
    case faint = "2"
    case warning = "1;33"
    case danger = "1;31"
    case over = "1;35"
  }

  private static func tone(ofLevel level: String?) -> Tone? {
    switch level {
    case "warning": .warning
    case "danger": .danger
    case "over": .over
    default: nil
    }
  }

  /// `text` with every control character shown as U+FFFD: C0 (ESC, BEL, CR, LF, TAB…),
  /// DEL, C1 (CSI, OSC…), the line and paragraph separators and the bidirectional
  /// overrides and isolates. The one sanitiser of everything `countdown` prints that a
  /// server sent: an escape sequence in a label or an error must not reach the terminal as
  /// one (a title, a cleared screen, a rewritten line), and what is left of it shows.
  public static func printable(_ text: String) -> String {
    let isControl = { (v: UInt32) in
      v < 0x20 || (0x7F...0x9F).contains(v) || v == 0x2028 || v == 0x2029
        || (0x202A...0x202E).contains(v) || (0x2066...0x2069).contains(v)
    }
    guard text.unicodeScalars.contains(where: { isControl($0.value) }) else { return text }
    var out = String.UnicodeScalarView()
    for scalar in text.unicodeScalars {
      out.append(isControl(scalar.value) ? "\u{FFFD}" : scalar)
    }
    return String(out)
  }

  /// The line for a terminal: `\r`, the spinner (or a mark for how it ended), the label (in
  /// the level's colour), the time elapsed while waiting, the level in words, the outcome,
  /// the message and the blackout, then a clear to the end of the line. Cut to
  /// `width` columns (less one, so it never wraps). `color` false (NO_COLOR) drops every
  /// colour sequence.
  public static func terminal(_ frame: Frame, atMilliseconds ms: Int64, color: Bool, width: Int?)
    -> String
  {
    var parts: [(String, Tone?)] = []
    if frame.spinning {
      parts.append((Spinner.frame(atMilliseconds: ms), .spinner))
    } else if frame.phase == "finished" {
      parts.append((frame.succeeded ? "✔" : "✖", frame.succeeded ? .good : .bad))
    } else if frame.phase == "paused" {
      parts.append(("‖", .paused))
    } else {
      parts.append(("·", .faint))
    }
    let levelTone = tone(ofLevel: frame.level)
    parts.append((" " + printable(frame.label), levelTone))
    if let elapsed = frame.elapsed { parts.append(("  " + printable(elapsed), nil)) }
    if frame.phase == "paused" { parts.append(("  paused", .paused)) }
    if let level = frame.level { parts.append(("  " + printable(level), levelTone)) }
    if let outcome = frame.outcome {
      parts.append(("  " + printable(outcome), frame.succeeded ? .good : .bad))
    }
    if let message = frame.message { parts.append(("  “" + printable(message) + "”", nil)) }
    if frame.blackout { parts.append(("  blackout", .faint)) }
    if let note = frame.note { parts.append(("  (" + note + ")", .faint)) }
    if let width { parts = cut(parts, to: max(1, width - 1)) }
    var line = "\r"
    for (text, tone) in parts {
      if color, let tone {
        line += escape + tone.rawValue + "m" + text + escape + "0m"
      } else {
        line += text
      }
    }
    return line + clearToEnd
  }

  /// The line for a pipe: the phase, the label, the level, the outcome, the message, the
  /// blackout and the note, with no spinner, no colour and no time that changes between the
  /// server's changes.
  public static func plain(_ frame: Frame) -> String {
    var line = printable(frame.phase) + "  " + printable(frame.label)
    if let level = frame.level { line += "  " + printable(level) }
    if let outcome = frame.outcome { line += "  " + printable(outcome) }
    if let message = frame.message { line += "  “" + printable(message) + "”" }
    if frame.blackout { line += "  blackout" }
    if let note = frame.note { line += "  (" + note + ")" }
    return line
  }

  private static func cut(_ parts: [(String, Tone?)], to columns: Int) -> [(String, Tone?)] {
    var left = columns
    var out: [(String, Tone?)] = []
    for (text, tone) in parts {
      let w = displayWidth(text)
      if w <= left {
        out.append((text, tone))
        left -= w
        continue
      }
      var kept = ""
      var used = 0
      for ch in text {
        let cw = displayWidth(String(ch))
        if used + cw > left - 1 { break }
        kept.append(ch)
        used += cw
      }
      if left >= 1 { out.append((kept + "…", tone)) }
      break
    }
    return out
  }

  /// Terminal columns of `text`: two for East Asian wide characters (the seed's labels are
  /// Chinese), none for combining marks, one otherwise.
  public static func displayWidth(_ text: String) -> Int {
    var width = 0
    for scalar in text.unicodeScalars {
      let v = scalar.value
      if scalar.properties.generalCategory == .nonspacingMark || v == 0x200D
        || (0xFE00...0xFE0F).contains(v)
      {
        continue
      }
      let wide =
        (0x1100...0x115F).contains(v) || (0x2E80...0x303E).contains(v)
        || (0x3041...0x33FF).contains(v) || (0x3400...0x4DBF).contains(v)
        || (0x4E00...0x9FFF).contains(v) || (0xA000...0xA4CF).contains(v)
        || (0xAC00...0xD7A3).contains(v) || (0xF900...0xFAFF).contains(v)
        || (0xFE30...0xFE4F).contains(v) || (0xFF00...0xFF60).contains(v)
        || (0xFFE0...0xFFE6).contains(v) || (0x1F300...0x1F64F).contains(v)
        || (0x1F900...0x1F9FF).contains(v) || (0x20000...0x3FFFD).contains(v)
      width += wide ? 2 : 1
    }
    return width
  }
}

/// Whether to colour: only on a terminal, and never when NO_COLOR is set to anything but the
/// empty string (no-color.org).
public func usesColor(isTerminal: Bool, environment: [String: String]) -> Bool {
  guard isTerminal else { return false }
  if let v = environment["NO_COLOR"], !v.isEmpty { return false }
  return true
}
