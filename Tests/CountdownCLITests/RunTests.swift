import Foundation
import Testing

@testable import CountdownCLI

#if canImport(Glibc)
  import Glibc
#endif

@Suite struct RunSupervisorTests {
  private func signal(_ s: inout RunSupervisor, _ signo: Int32) -> [RunAction] {
    s.signal(signo, interrupt: SIGINT, quit: SIGQUIT)
  }

  private func exited(_ s: inout RunSupervisor, _ exit: ChildExit) -> [RunAction] {
    s.exited(exit, interrupt: SIGINT, quit: SIGQUIT)
  }

  /// The command's status decides: 0 sends done, anything else fail with the status, and
  /// run exits with that status (128 + N for a signal N).
  @Test func exitStatusDecides() {
    var ok = RunSupervisor(waitApplied: true, foregroundOnTerminal: false)
    #expect(exited(&ok, .exited(0)) == [.report(.done), .finish(.exit(0))])
    var three = RunSupervisor(waitApplied: true, foregroundOnTerminal: false)
    #expect(exited(&three, .exited(3)) == [.report(.fail(label: "exit 3")), .finish(.exit(3))])
    var killed = RunSupervisor(waitApplied: true, foregroundOnTerminal: false)
    #expect(
      exited(&killed, .signaled(SIGKILL)) == [
        .report(.fail(label: "signal 9")), .finish(.exit(137)),
      ])
    #expect(exited(&killed, .exited(0)) == [])
  }

  /// A command killed by SIGINT or SIGQUIT was interrupted even when its exit is seen before
  /// run's own copy of the Ctrl-C: the wait fails as "interrupted" and run dies of it too.
  @Test func childKilledByAnInterrupt() {
    var s = RunSupervisor(waitApplied: true, foregroundOnTerminal: true)
    #expect(
      exited(&s, .signaled(SIGINT)) == [
        .report(.fail(label: "interrupted")), .finish(.raise(SIGINT)),
      ])
    #expect(signal(&s, SIGINT) == [])
    var q = RunSupervisor(waitApplied: false, foregroundOnTerminal: false)
    #expect(exited(&q, .signaled(SIGQUIT)) == [.finish(.raise(SIGQUIT))])
  }

  /// Ctrl-C typed at the terminal already reached the command, so it is not sent again; run
  /// fails the wait as "interrupted" at once, and dies of the same signal once the command ends.
  @Test func ctrlCOnTerminal() {
    var s = RunSupervisor(waitApplied: true, foregroundOnTerminal: true)
    #expect(signal(&s, SIGINT) == [.report(.fail(label: "interrupted"))])
    #expect(signal(&s, SIGINT) == [])
    #expect(exited(&s, .signaled(SIGINT)) == [.finish(.raise(SIGINT))])
  }

  /// A signal sent to run alone (kill, a CI runner's TERM, no terminal) is passed on to the
  /// command, every time, with one "interrupted" report.
  @Test func otherSignalsAreForwarded() {
    var s = RunSupervisor(waitApplied: true, foregroundOnTerminal: true)
    #expect(signal(&s, SIGTERM) == [.forward(SIGTERM), .report(.fail(label: "interrupted"))])
    #expect(signal(&s, SIGHUP) == [.forward(SIGHUP)])
    #expect(exited(&s, .exited(0)) == [.finish(.raise(SIGTERM))])
    var piped = RunSupervisor(waitApplied: true, foregroundOnTerminal: false)
    #expect(signal(&piped, SIGINT) == [.forward(SIGINT), .report(.fail(label: "interrupted"))])
  }

  /// Without an applied wait (the server was unreachable or refused it), nothing is reported:
  /// a done or fail then would end a wait that someone else started.
  @Test func noWaitNoReport() {
    var s = RunSupervisor(waitApplied: false, foregroundOnTerminal: false)
    #expect(exited(&s, .exited(3)) == [.finish(.exit(3))])
    var i = RunSupervisor(waitApplied: false, foregroundOnTerminal: false)
    #expect(signal(&i, SIGINT) == [.forward(SIGINT)])
    #expect(exited(&i, .signaled(SIGINT)) == [.finish(.raise(SIGINT))])
  }
}

@Suite struct ChildProcessTests {
  /// A real child's exit status and killing signal come back as they were.
  @Test func statusOfARealChild() throws {
    #expect(try ChildProcess.spawn(["sh", "-c", "exit 3"]).wait() == .exited(3))
    #expect(try ChildProcess.spawn(["true"]).wait() == .exited(0))
    #expect(try ChildProcess.spawn(["sh", "-c", "kill -TERM $$"]).wait() == .signaled(SIGTERM))
    let sleeper = try ChildProcess.spawn(["sleep", "30"])
    sleeper.send(SIGINT)
    #expect(sleeper.wait() == .signaled(SIGINT))
  }

  /// A command that cannot start is an error in words, not a crash or a hang.
  @Test func missingCommand() {
    #expect(throws: UsageError.self) {
      try ChildProcess.spawn(["/nonexistent/countdown-test-\(getpid())"])
    }
  }

  /// The child gets SIGINT at its default action and unblocked even while this process
  /// ignores and blocks it, so Ctrl-C still stops the wrapped command.
  @Test func childSignalsAreReset() throws {
    let previous = Glibc.signal(SIGINT, SIG_IGN)
    var set = sigset_t()
    sigemptyset(&set)
    sigaddset(&set, SIGINT)
    var old = sigset_t()
    pthread_sigmask(SIG_BLOCK, &set, &old)
    defer {
      pthread_sigmask(SIG_SETMASK, &old, nil)
      Glibc.signal(SIGINT, previous)
    }
    let out = FileManager.default.temporaryDirectory
      .appendingPathComponent("cli-sig-\(getpid())").path
    defer { try? FileManager.default.removeItem(atPath: out) }
    let child = try ChildProcess.spawn([
      "sh", "-c", "exec grep -E '^Sig(Ign|Blk)' /proc/self/status > \(out)",
    ])
    #expect(child.wait() == .exited(0))
    let text = try String(contentsOfFile: out, encoding: .utf8)
    for line in text.split(separator: "\n") {
      let mask = UInt64(line.split(separator: "\t").last ?? "", radix: 16) ?? 0
      #expect(mask & (1 << (UInt64(SIGINT) - 1)) == 0, "\(line)")
    }
    #expect(text.contains("SigIgn") && text.contains("SigBlk"))
  }
}

@Suite struct WaitBudgetTests {
  /// A wait answered in time is its answer; one that is not gives up at the budget and
  /// returns then, not when the wait finally ends.
  @Test func firstAnswerWithinABudget() async {
    let quick = Task { () -> (any Error)? in nil }
    let answer = await firstAnswer(quick, within: 5)
    #expect(answer != nil && answer! == nil)
    let slow = Task { () -> (any Error)? in
      // Far longer than any loaded machine delays the budget's own timer.
      try? await Task.sleep(nanoseconds: 60_000_000_000)
      return nil
    }
    let began = Date()
    let none = await firstAnswer(slow, within: 0.1)
    #expect(none == nil)
    #expect(Date().timeIntervalSince(began) < 30)
    slow.cancel()
  }
}
