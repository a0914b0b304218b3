import Testing

@testable import CountdownCLI

@Suite struct ArgumentTests {
  private func parse(_ args: String...) throws(UsageError) -> Invocation {
    try Invocation.parse(args)
  }

  private func refusal(_ args: [String]) -> String? {
    do {
      _ = try Invocation.parse(args)
      return nil
    } catch {
      return error.message
    }
  }

  /// The issue's own examples parse into the commands they name.
  @Test func issueExamples() throws {
    #expect(
      try parse("start", "http://h:8080/?session=a", "--seconds", "90")
        == Invocation(
          action: .start(seconds: 90, until: nil, finishLabel: nil),
          url: "http://h:8080/?session=a"))
    #expect(
      try parse("start", "U", "--until", "18:30", "--finish-label", "Go")
        == Invocation(action: .start(seconds: nil, until: "18:30", finishLabel: "Go"), url: "U"))
    #expect(try parse("adjust", "U", "--seconds", "-60").action == .adjust(seconds: -60))
    #expect(try parse("adjust", "U", "--seconds=-60").action == .adjust(seconds: -60))
    #expect(try parse("watch", "U", "--exit-on-finish").action == .watch(exitOnFinish: true))
    #expect(try parse("watch", "U").action == .watch(exitOnFinish: false))
    #expect(
      try parse("run", "U", "--label", "Deploy", "--timeout", "900", "--", "sh", "-c", "exit 3")
        .action == .run(label: "Deploy", timeoutSeconds: 900, command: ["sh", "-c", "exit 3"]))
  }

  /// Options may come before the URL, --session and --token-file work on every command, and
  /// what follows `--` is the command's even when it looks like countdown's own option.
  @Test func placementAndCommonOptions() throws {
    let inv = try parse("pause", "--session", "team-a", "--token-file", "/t", "http://h/")
    #expect(inv == Invocation(action: .pause, url: "http://h/", session: "team-a", tokenFile: "/t"))
    #expect(
      try parse("run", "U", "--", "ls", "--label", "--help").action
        == .run(label: nil, timeoutSeconds: nil, command: ["ls", "--label", "--help"]))
    #expect(try parse("done", "U", "--label", "Deployed").action == .done(label: "Deployed"))
    #expect(try parse("fail", "U").action == .fail(label: nil))
    #expect(try parse("help").action == .help)
    #expect(try parse("start", "U", "--help").action == .help)
  }

  /// Seconds are whole numbers that fit in 64 bits: the edges the server also refuses are
  /// refused here, never rounded, and -0 is the integer 0 (which the server refuses).
  @Test func integerEdges() throws {
    #expect(
      try parse("adjust", "U", "--seconds", "9223372036854775807").action
        == .adjust(seconds: Int.max))
    #expect(
      try parse("adjust", "U", "--seconds", "-9223372036854775808").action
        == .adjust(seconds: Int.min))
    #expect(try parse("adjust", "U", "--seconds", "-0").action == .adjust(seconds: 0))
    for bad in [
      "9223372036854775808", "-9223372036854775809", "18446744073709551616", "1e308", "1e400",
      "5.0", "", " 5", "5 ", "0x10", "--", "-", "+", "٣", String(repeating: "9", count: 4096),
    ] {
      let message = refusal(["start", "U", "--seconds", bad])
      #expect(message?.contains("whole number") == true, "\(bad.prefix(40))")
    }
    #expect(refusal(["wait", "U", "--timeout", "1e400"])?.contains("--timeout") == true)
  }

  /// Text is passed on as typed, however long or odd: the server's checks decide, so a 4 KB
  /// label reaches it and is refused there in the server's words.
  @Test func labelsPassThrough() throws {
    let long = String(repeating: "x", count: 4096)
    #expect(try parse("done", "U", "--label", long).action == .done(label: long))
    #expect(
      try parse("wait", "U", "--label", "倒計時 ✓").action
        == .wait(label: "倒計時 ✓", timeoutSeconds: nil, timeoutLabel: nil))
  }

  /// A bare token argument is refused with where to put it instead, before anything is sent.
  @Test func tokenArgumentRefused() {
    for args in [["start", "U", "--token", "s3cret"], ["start", "U", "--token=s3cret"]] {
      let message = refusal(args)
      #expect(message?.contains("COUNTDOWN_TOKEN") == true)
      #expect(message?.contains("s3cret") == false)
    }
  }

  /// Every malformed command line is a usage error with a reason.
  @Test func usageErrors() {
    let cases: [([String], String)] = [
      ([], "no command"),
      (["frobnicate", "U"], "unknown command"),
      (["start"], "needs the session's URL"),
      (["start", "U", "V"], "one URL"),
      (["start", "U", "--seconds"], "needs a value"),
      (["start", "U", "--seconds", "5", "--seconds", "6"], "twice"),
      (["start", "U", "--seconds", "5", "--until", "18:30"], "not both"),
      (["pause", "U", "--seconds", "5"], "takes no option"),
      (["adjust", "U"], "adjust needs --seconds"),
      (["watch", "U", "--exit-on-finish=yes"], "takes no value"),
      (["run", "U"], "needs a command"),
      (["run", "U", "--"], "needs a command"),
      (["start", "U", "--", "x"], "only run"),
    ]
    for (args, expected) in cases {
      let message = refusal(args)
      #expect(message?.contains(expected) == true, "\(args) → \(message ?? "accepted")")
    }
  }
}
