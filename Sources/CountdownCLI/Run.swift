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
  private var sources: [any DispatchSourceSignal] = []
  private let queue = DispatchQueue(label: "countdown.signals")

  init(_ signals: [Int32], deliver: @escaping @Sendable (Int32) -> Void) {
    for signo in signals {
      signal(signo, SIG_IGN)
      let source = DispatchSource.makeSignalSource(signal: signo, queue: queue)
      source.setEventHandler { [weak self] in
        self?.lock.withLock { if self?.first == nil { self?.first = signo } }
        deliver(signo)
      }
      source.resume()
      sources.append(source)
    }
  }

  var firstSignal: Int32? { lock.withLock { first } }
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
  let early: ((any Error)?)? = await firstAnswer(waitTask, within: runWaitBudget)
  var waitMayApply = true
  switch early {
  case .some(nil): break
  case .some(let error?):
    waitMayApply = false
    if case CountdownError.refused(let r) = error {
      console.err(
        LineRenderer.printable("warning: wait was refused (\(r.code): \(r.message))")
          + "; running the command anyway")
    } else {
      console.err("warning: \(error); running the command anyway")
    }
  case nil:
    console.err(
      "warning: the server has not answered the wait within \(Int(runWaitBudget)) s; "
        + "running the command anyway")
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
        for task in reports { await task.value }
        return termination
      }
    }
    return nil
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
    for task in reports { await task.value }
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

/// The task's result if it comes within `seconds`, else nil (the task goes on). Not a task
/// group: a group would wait for its child awaiting the task before returning.
func firstAnswer(_ task: Task<(any Error)?, Never>, within seconds: Double) async
  -> ((any Error)?)?
{
  let once = ResumeOnce()
  return await withCheckedContinuation {
    (continuation: CheckedContinuation<((any Error)?)?, Never>) in
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
