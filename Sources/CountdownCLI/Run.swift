import CountdownClient
import Dispatch
import Foundation

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// What happens to `run` while its command runs.
enum RunEvent: Sendable {
  case signal(Int32)
  case exited(ChildExit)
}

/// Catches `run`'s signals (their default action would kill `run` before it could report)
/// and hands each to `deliver`; remembers the first.
final class SignalRelay: @unchecked Sendable {
  private let lock = NSLock()
  private var first: Int32? = nil
  private var listeners: [@Sendable (Int32) -> Void] = []
  private var sources: [any DispatchSourceSignal] = []
  private let queue = DispatchQueue(label: "countdown.signals")

  init(_ signals: [Int32], deliver: @escaping @Sendable (Int32) -> Void) {
    for signo in signals {
      signal(signo, SIG_IGN)
      let source = DispatchSource.makeSignalSource(signal: signo, queue: queue)
      source.setEventHandler { [weak self] in
        var listeners: [@Sendable (Int32) -> Void] = []
        if let self {
          listeners = self.lock.withLock {
            if self.first == nil { self.first = signo }
            return self.listeners
          }
        }
        deliver(signo)
        for listener in listeners { listener(signo) }
      }
      source.resume()
      sources.append(source)
    }
  }

  var firstSignal: Int32? { lock.withLock { first } }

  /// Calls `listener` with each signal caught from now on, as well as `deliver`.
  func listen(_ listener: @escaping @Sendable (Int32) -> Void) {
    lock.withLock { listeners.append(listener) }
  }
}

/// `countdown run`: wait, the command, then done or fail; the command's status out.
func run(
  _ client: CountdownClient, label: String?, timeout: Int?, command: [String], console: Console
) async -> Int32 {
  let (events, sink) = AsyncStream.makeStream(of: RunEvent.self)
  let relay = SignalRelay(ChildProcess.caughtSignals) { sink.yield(.signal($0)) }
  // The command waits for the wait's answer at most `runWaitBudget`: a server that takes no
  // connection fails at once, but one that takes it and never answers must not hold the job
  // up. A late answer still counts: the end is reported if the wait turns out applied.
  let waitTask = Task { () -> (any Error)? in
    do {
      _ = try await client.send(.wait(label: label, timeoutSeconds: timeout))
      return nil
    } catch {
      return error
    }
  }
  let early: ((any Error)?)? = await firstAnswer(waitTask, within: runWaitBudget, relay: relay)
  var waitMayApply = true
  switch early {
  case .some(nil): break
  case .some(let error?):
    waitMayApply = false
    if case CountdownError.refused(let r) = error {
      console.err("warning: wait was refused (\(r.code): \(r.message)); running the command anyway")
    } else {
      console.err("warning: \(error); running the command anyway")
    }
  case nil where relay.firstSignal == nil:
    console.err(
      "warning: the server has not answered the wait within \(Int(runWaitBudget)) s; "
        + "running the command anyway")
  case nil:
    break  // interrupted: handled below, the command never starts
  }
  var supervisor = RunSupervisor(
    waitApplied: waitMayApply, foregroundOnTerminal: isForegroundOnTerminal())
  var reports: [Task<Void, Never>] = []
  func perform(_ actions: [RunAction], child: ChildProcess?) async -> Termination? {
    for action in actions {
      switch action {
      case .forward(let signo): child?.send(signo)
      case .report(let r):
        reports.append(
          Task {
            let command: Command =
              switch r {
              case .done: .done()
              case .fail(let label): .fail(label: label)
              }
            // A wait still unanswered is awaited first: done or fail only ends our own wait.
            if let error = await waitTask.value {
              if early == nil { console.err("warning: the wait was not applied: \(error)") }
              return
            }
            do {
              _ = try await client.send(command)
            } catch {
              console.err("warning: could not tell the session \(command.op): \(error)")
            }
          })
      case .finish(let termination):
        return await settle(termination)
      }
    }
    return nil
  }
  // The command has ended: its report gets `runReportBudget` at most (`runInterruptBudget`
  // when a signal ends `run`), and another signal ends the wait for it at once: a server
  // that answers 503 with a long Retry-After, or not at all, must not keep a finished or
  // interrupted job's `run` alive.
  func settle(_ termination: Termination) async -> Termination {
    let budget: Double
    if case .raise = termination { budget = runInterruptBudget } else { budget = runReportBudget }
    switch await firstOf(reports, within: budget, relay: relay) {
    case .reported:
      return termination
    case .timedOut:
      console.err("warning: the session was not told the command's end within \(Int(budget)) s")
      return termination
    case .signal(let signo):
      return .raise(signo)
    }
  }
  func end(_ termination: Termination) -> Int32 {
    switch termination {
    case .exit(let code): return code
    case .raise(let signo): raiseDefault(signo)
    }
  }
  // Interrupted while the wait was being sent: the command never starts.
  if let signo = relay.firstSignal {
    let actions = supervisor.signal(signo, interrupt: SIGINT, quit: SIGQUIT)
    _ = await perform(actions.filter { if case .forward = $0 { false } else { true } }, child: nil)
    _ = await settle(.raise(signo))
    raiseDefault(signo)
  }
  let child: ChildProcess
  do {
    child = try ChildProcess.spawn(command)
  } catch {
    console.err("\(error)")
    let actions = supervisor.exited(.exited(127), interrupt: SIGINT, quit: SIGQUIT)
    return end(await perform(actions, child: nil) ?? .exit(127))
  }
  DispatchQueue.global().async { sink.yield(.exited(child.wait())) }
  for await event in events {
    let actions: [RunAction]
    switch event {
    case .signal(let signo): actions = supervisor.signal(signo, interrupt: SIGINT, quit: SIGQUIT)
    case .exited(let exit): actions = supervisor.exited(exit, interrupt: SIGINT, quit: SIGQUIT)
    }
    if let termination = await perform(actions, child: child) {
      withExtendedLifetime(relay) {}
      return end(termination)
    }
  }
  return ExitCode.failed.rawValue
}

/// How long `run` holds its command back for the wait's answer, in seconds.
let runWaitBudget: Double = 3

/// How long `run`, its command ended, waits for the session to take `done` or `fail`, in
/// seconds, retries and `Retry-After` included.
let runReportBudget: Double = 10

/// The same once a signal interrupted `run`: whoever sent it expects `run` gone soon.
let runInterruptBudget: Double = 2

/// How waiting for `run`'s reports ended.
enum Settled: Equatable, Sendable {
  case reported
  case timedOut
  case signal(Int32)
}

/// Waits for every one of `tasks`, `seconds` at most, and no longer than the next signal
/// `relay` catches.
func firstOf(_ tasks: [Task<Void, Never>], within seconds: Double, relay: SignalRelay) async
  -> Settled
{
  let once = ResumeOnce()
  return await withCheckedContinuation { (continuation: CheckedContinuation<Settled, Never>) in
    relay.listen { signo in
      if once.claim() { continuation.resume(returning: .signal(signo)) }
    }
    Task {
      for task in tasks { await task.value }
      if once.claim() { continuation.resume(returning: .reported) }
    }
    Task {
      try? await Task.sleep(nanoseconds: UInt64(seconds * 1_000_000_000))
      if once.claim() { continuation.resume(returning: .timedOut) }
    }
  }
}

/// The task's result if it comes within `seconds`, else nil (the task goes on); nil at once
/// when `relay` catches a signal first. Not a task group: a group would wait for its child
/// awaiting the task before returning.
func firstAnswer(
  _ task: Task<(any Error)?, Never>, within seconds: Double, relay: SignalRelay? = nil
) async -> ((any Error)?)? {
  let once = ResumeOnce()
  return await withCheckedContinuation {
    (continuation: CheckedContinuation<((any Error)?)?, Never>) in
    relay?.listen { _ in
      if once.claim() { continuation.resume(returning: nil) }
    }
    // A signal caught before the listener was in place.
    if relay?.firstSignal != nil, once.claim() { continuation.resume(returning: nil) }
    Task {
      let answer = await task.value
      if once.claim() { continuation.resume(returning: .some(answer)) }
    }
    Task {
      try? await Task.sleep(nanoseconds: UInt64(seconds * 1_000_000_000))
      if once.claim() { continuation.resume(returning: nil) }
    }
  }
}

/// Lets the first of two racers resume a continuation.
final class ResumeOnce: @unchecked Sendable {
  private let lock = NSLock()
  private var claimed = false

  func claim() -> Bool {
    lock.withLock {
      defer { claimed = true }
      return !claimed
    }
  }
}
