import CountdownClient
import Testing

@testable import CountdownCLI

@Suite struct RenderTests {
  /// The spinner is the braille dots, one frame per 80 ms, chosen by time (also before 1970).
  @Test func spinnerFrames() {
    #expect(Spinner.frames.count == 10)
    #expect(Spinner.frames.allSatisfy { $0.unicodeScalars.first!.value >> 8 == 0x28 })
    #expect(Spinner.frame(atMilliseconds: 0) == "⠋")
    #expect(Spinner.frame(atMilliseconds: 79) == "⠋")
    #expect(Spinner.frame(atMilliseconds: 80) == "⠙")
    #expect(Spinner.frame(atMilliseconds: 800) == "⠋")
    #expect(Spinner.frame(atMilliseconds: -80) == "⠏")
    #expect(Spinner.frame(atMilliseconds: Int64.min) != "")
  }

  /// A state becomes the frame the page would show: the clock while running or paused, the
  /// label and time elapsed while waiting, the outcome once finished, the link's trouble.
  @Test func framesOfStates() {
    let running = frame(
      of: SessionState(phase: .running, spinner: true, enabled: false, label: "90", remaining: 90),
      connected: true)
    #expect(running == Frame(phase: "running", spinning: true, label: "1:30"))
    let waiting = Frame.of(
      phase: "waiting", spinner: true, label: "Deploying", elapsed: "0:12", outcome: nil,
      stale: false, connected: false)
    #expect(
      waiting
        == Frame(
          phase: "waiting", spinning: true, label: "Deploying", elapsed: "0:12",
          note: "reconnecting…"))
    let failed = frame(
      of: SessionState(
        phase: .finished, spinner: false, enabled: true, label: "exit 3", outcome: .failed,
        stale: true),
      connected: true)
    #expect(failed.outcome == "failed" && !failed.succeeded)
    #expect(failed.note == "may be out of date")
    #expect(failed.label == "exit 3")
    for (outcome, ok) in [("elapsed", true), ("done", true), ("failed", false), ("timeout", false)]
    {
      #expect(
        Frame(phase: "finished", spinning: false, label: "", outcome: outcome).succeeded == ok)
    }
  }

  /// On a terminal the line starts over with \r, shows spinner, clock and outcome in colour,
  /// and clears what a longer line left; NO_COLOR leaves no colour sequence at all.
  @Test func terminalLine() {
    let frame = Frame(phase: "waiting", spinning: true, label: "Deploying", elapsed: "0:12")
    let coloured = LineRenderer.terminal(frame, atMilliseconds: 160, color: true, width: nil)
    #expect(coloured.hasPrefix("\r\u{1B}[36m⠹\u{1B}[0m Deploying  0:12"))
    #expect(coloured.hasSuffix("\u{1B}[K"))
    let plain = LineRenderer.terminal(frame, atMilliseconds: 160, color: false, width: nil)
    #expect(plain == "\r⠹ Deploying  0:12\u{1B}[K")
    let failed = Frame(phase: "finished", spinning: false, label: "exit 3", outcome: "failed")
    #expect(
      LineRenderer.terminal(failed, atMilliseconds: 0, color: false, width: nil)
        == "\r✖ exit 3  failed\u{1B}[K")
    #expect(
      LineRenderer.terminal(failed, atMilliseconds: 0, color: true, width: nil)
        .contains("\u{1B}[31m  failed"))
  }

  /// A line wider than the terminal is cut with an ellipsis one column short of the edge,
  /// counting Chinese characters as two columns.
  @Test func terminalLineIsCut() {
    let frame = Frame(phase: "finished", spinning: false, label: "倒計時結束倒計時結束", outcome: "elapsed")
    let line = LineRenderer.terminal(frame, atMilliseconds: 0, color: false, width: 12)
    let body = String(line.dropFirst().dropLast(3))
    #expect(LineRenderer.displayWidth(body) <= 11)
    #expect(body.hasSuffix("…"))
    #expect(body.hasPrefix("✔ 倒計時"))
    #expect(LineRenderer.displayWidth("倒計時") == 6)
    #expect(LineRenderer.displayWidth("e\u{301}") == 1)
  }

  /// Through a pipe a line has no spinner, no colour and no escape: phase, label, outcome.
  @Test func plainLine() {
    #expect(
      LineRenderer.plain(Frame(phase: "running", spinning: true, label: "1:30")) == "running  1:30")
    #expect(
      LineRenderer.plain(Frame(phase: "finished", spinning: false, label: "Done", outcome: "done"))
        == "finished  Done  done")
    #expect(
      LineRenderer.plain(
        Frame(phase: "waiting", spinning: true, label: "W", elapsed: "0:01", note: "reconnecting…"))
        == "waiting  W  (reconnecting…)")
  }

  /// A label with control characters (an escape sequence, a line break, C1's CSI) reaches
  /// neither the terminal nor the pipe as one: each shows as U+FFFD.
  @Test func controlCharactersAreShownNotSent() {
    let hostile = Frame(
      phase: "finished", spinning: false, label: "a\u{1B}[2J\nb\u{9B}c\u{7F}", outcome: "done")
    let tty = LineRenderer.terminal(hostile, atMilliseconds: 0, color: false, width: nil)
    #expect(tty == "\r✔ a\u{FFFD}[2J\u{FFFD}b\u{FFFD}c\u{FFFD}  done\u{1B}[K")
    #expect(LineRenderer.plain(hostile) == "finished  a\u{FFFD}[2J\u{FFFD}b\u{FFFD}c\u{FFFD}  done")
    #expect(LineRenderer.printable("倒計時 ✓") == "倒計時 ✓")
  }

  /// The sanitiser at its edges: every C0 (NUL to US), DEL and every C1 (U+0080 to U+009F),
  /// the line separators and the bidi overrides go; space, `~`, NBSP and the scalars just
  /// past each range stay.
  @Test func printableAtTheEdges() {
    let gone: [UInt32] =
      [0x00, 0x07, 0x09, 0x0A, 0x0D, 0x1B, 0x1F, 0x7F, 0x80, 0x9B, 0x9F]
      + [0x2028, 0x2029, 0x202A, 0x202E, 0x2066, 0x2069]
    for v in gone {
      let s = "a" + String(Character(Unicode.Scalar(v)!)) + "b"
      #expect(LineRenderer.printable(s) == "a\u{FFFD}b", "U+\(String(v, radix: 16))")
    }
    let kept: [UInt32] = [0x20, 0x7E, 0xA0, 0x2027, 0x202F, 0x2065, 0x206A, 0xFFFD, 0x1F600]
    for v in kept {
      let s = "a" + String(Character(Unicode.Scalar(v)!)) + "b"
      #expect(LineRenderer.printable(s) == s, "U+\(String(v, radix: 16))")
    }
    let long = String(repeating: "\u{1B}[2J", count: 1024)
    #expect(LineRenderer.printable(long) == String(repeating: "\u{FFFD}[2J", count: 1024))
  }

  /// Every error and warning goes to stderr through the sanitiser, line by line: a
  /// server's escape sequences in a message show, the lines the CLI itself breaks stay.
  @Test func errorTextIsPrintable() {
    let text = Console.errorText("warning: \u{1B}]0;TITLE\u{07}\u{1B}[2J\u{9B}31m x\nrun it")
    #expect(
      text == "countdown: warning: \u{FFFD}]0;TITLE\u{FFFD}\u{FFFD}[2J\u{FFFD}31m x\nrun it\n")
  }

  /// Colour only on a terminal and only while NO_COLOR is unset or empty.
  @Test func noColor() {
    #expect(usesColor(isTerminal: true, environment: [:]))
    #expect(usesColor(isTerminal: true, environment: ["NO_COLOR": ""]))
    #expect(!usesColor(isTerminal: true, environment: ["NO_COLOR": "1"]))
    #expect(!usesColor(isTerminal: false, environment: [:]))
  }
}
