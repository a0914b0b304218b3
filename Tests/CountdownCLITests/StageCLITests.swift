import Foundation
import Testing

@testable import CountdownCLI
@testable import CountdownClient

@Suite struct StageCLITests {
  private func parse(_ args: String...) throws(UsageError) -> Invocation {
    try Invocation.parse(args)
  }

  private func refusal(_ args: String...) -> String? {
    do {
      _ = try Invocation.parse(args)
      return nil
    } catch {
      return error.message
    }
  }

  /// The operator's commands parse into the actions they name, and those into the commands.
  @Test func operatorCommands() throws {
    let start = try parse(
      "start", "U", "--seconds", "1200", "--overtime", "--warn", "120", "--danger", "30")
    let options = StartOptions(overtime: true, warnAtSeconds: 120, dangerAtSeconds: 30)
    #expect(
      start.action == .start(seconds: 1200, until: nil, finishLabel: nil, options: options))
    let now = Date(timeIntervalSince1970: 1_796_024_361)
    #expect(
      try oneShot(start.action, now: now)
        == .start(seconds: 1200, finishLabel: nil, options: options))
    #expect(try parse("stop", "U").action == .stop)
    #expect(try oneShot(.stop, now: now) == .stop)
    #expect(try parse("message", "U", "Wrap up").action == .message(text: "Wrap up"))
    #expect(try parse("message", "U", "--", "-5 min").action == .message(text: "-5 min"))
    #expect(try parse("message", "--clear", "U").action == .message(text: nil))
    #expect(try oneShot(.message(text: nil), now: now) == .message(nil))
    #expect(try parse("blackout", "U", "on").action == .blackout(on: true))
    #expect(try parse("blackout", "U", "off").action == .blackout(on: false))
    #expect(try oneShot(.blackout(on: true), now: now) == .blackout(true))
    // --until keeps the options.
    var calendar = Calendar(identifier: .gregorian)
    calendar.timeZone = TimeZone(identifier: "UTC")!
    let until = try parse("start", "U", "--until", "18:30", "--warn", "60")
    #expect(
      try oneShot(until.action, now: now, calendar: calendar)
        == .startUntil(
          epochMs: 1_796_063_400_000, finishLabel: nil, options: StartOptions(warnAtSeconds: 60)))
  }

  /// Wrong operands are usage errors that say what the command takes; level seconds are
  /// whole numbers like every other, the server checking their range.
  @Test func refusals() throws {
    #expect(refusal("message", "U")?.contains("the text (or --clear)") == true)
    #expect(refusal("message", "U", "a", "b")?.contains("not 3 arguments") == true)
    #expect(refusal("message", "U", "--clear", "a")?.contains("the text (or --clear)") == true)
    #expect(refusal("blackout", "U")?.contains("on or off") == true)
    #expect(refusal("blackout", "U", "yes")?.contains("on or off, not \"yes\"") == true)
    #expect(refusal("stop", "U", "now")?.contains("takes one URL") == true)
    #expect(refusal("start", "U", "--warn", "1e308")?.contains("whole number") == true)
    #expect(refusal("start", "U", "--danger", "9223372036854775808")?.contains("whole") == true)
    #expect(refusal("start", "U", "--overtime=yes")?.contains("takes no value") == true)
    #expect(refusal("stop", "U", "--", "x")?.contains("after --") == true)
    #expect(
      try parse("start", "U", "--warn", "-0").action
        == .start(
          seconds: nil, until: nil, finishLabel: nil, options: StartOptions(warnAtSeconds: 0)))
  }

  /// The watch line says the level in words and in its colour, the message quoted and the
  /// blackout; through a pipe the same words without colour, and the message's control
  /// characters are shown, not sent.
  @Test func levelMessageAndBlackoutAreShown() {
    let warning = frame(
      of: SessionState(
        phase: .running, spinner: true, enabled: false, label: "120", remaining: 120,
        level: .warning, message: "Wrap up"),
      connected: true)
    #expect(warning.level == "warning" && warning.message == "Wrap up")
    #expect(LineRenderer.plain(warning) == "running  2:00  warning  “Wrap up”")
    let coloured = LineRenderer.terminal(warning, atMilliseconds: 0, color: true, width: nil)
    #expect(coloured.contains("\u{1B}[1;33m 2:00\u{1B}[0m"))
    #expect(coloured.contains("\u{1B}[1;33m  warning\u{1B}[0m"))
    let over = frame(
      of: SessionState(
        phase: .overtime, spinner: true, enabled: false, label: "+1:05", level: .over,
        message: "a\u{1B}[2J", blackout: true),
      connected: true)
    #expect(LineRenderer.plain(over) == "overtime  +1:05  over  “a\u{FFFD}[2J”  blackout")
    let normal = frame(
      of: SessionState(phase: .idle, spinner: false, enabled: true, label: "Ready"),
      connected: true)
    #expect(normal.level == nil && LineRenderer.plain(normal) == "idle  Ready")
    let stopped = frame(
      of: SessionState(
        phase: .finished, spinner: false, enabled: true, label: "Time!", outcome: .stopped),
      connected: true)
    #expect(stopped.succeeded)
    #expect(
      finishStatus(
        SessionState(
          phase: .finished, spinner: false, enabled: true, label: "", outcome: .stopped)) == 0)
  }

  /// A watched overtime counts up from overSince by the server's clock, not from the label.
  @Test func watchedOvertimeCountsUp() {
    var update = SessionUpdate(session: "s")
    update.state = SessionState(
      phase: .overtime, spinner: true, enabled: false, label: "+0", level: .over,
      overSince: 1_000_000)
    update.connection = .connected
    let now = Date(timeIntervalSince1970: 1_065.4)
    #expect(frame(of: update, now: now)?.label == "+1:05")
  }
}
