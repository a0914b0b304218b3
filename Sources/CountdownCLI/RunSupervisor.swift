/// How the wrapped command ended.
public enum ChildExit: Equatable, Sendable {
  case exited(Int32)
  case signaled(Int32)
}

/// What `run` tells the session when its command has ended.
public enum Report: Equatable, Sendable {
  case done
  case fail(label: String)
}

/// How `countdown run` itself ends.
public enum Termination: Equatable, Sendable {
  /// Exit with this status: the command's own, or 128 + the signal that killed it.
  case exit(Int32)
  /// Die of this signal (default action restored), as the command did, so the shell that
  /// started `run` sees an interrupt and stops its script too.
  case raise(Int32)
}

/// One step `run` takes in answer to an event.
public enum RunAction: Equatable, Sendable {
  /// Send the signal on to the command.
  case forward(Int32)
  /// Send `done` or `fail` for the wait `run` started.
  case report(Report)
  case finish(Termination)
}

/// `run`'s life once its command is started, as a value: a signal or the command's exit in,
/// the steps to take out. The caller sends the reports, forwards the signals and exits.
public struct RunSupervisor: Equatable, Sendable {
  private let waitApplied: Bool
  private let foregroundOnTerminal: Bool
  private var interruptedBy: Int32? = nil
  private var finished = false

  /// - Parameters:
  ///   - waitApplied: whether the server took `run`'s `wait`. Without it `done` or `fail`
  ///     would end a wait someone else started, so nothing is reported.
  ///   - foregroundOnTerminal: whether `run` is in its terminal's foreground process group.
  ///     The command shares the group, so a Ctrl-C from that terminal reaches it directly.
  public init(waitApplied: Bool, foregroundOnTerminal: Bool) {
    self.waitApplied = waitApplied
    self.foregroundOnTerminal = foregroundOnTerminal
  }

  /// A signal `run` caught (SIGINT, SIGTERM, SIGHUP or SIGQUIT).
  public mutating func signal(_ signo: Int32, interrupt: Int32, quit: Int32) -> [RunAction] {
    guard !finished else { return [] }
    var actions: [RunAction] = []
    // A terminal sends Ctrl-C and Ctrl-\ to its whole foreground group, the command
    // included: passing it on again would make it twice. Anything else (kill, a CI
    // runner's TERM) reached `run` alone.
    let fromTerminal = foregroundOnTerminal && (signo == interrupt || signo == quit)
    if !fromTerminal { actions.append(.forward(signo)) }
    if interruptedBy == nil {
      interruptedBy = signo
      if waitApplied { actions.append(.report(.fail(label: "interrupted"))) }
    }
    return actions
  }

  /// The command ended.
  public mutating func exited(_ exit: ChildExit, interrupt: Int32, quit: Int32) -> [RunAction] {
    guard !finished else { return [] }
    finished = true
    if let signo = interruptedBy { return [.finish(.raise(signo))] }
    var actions: [RunAction] = []
    // A command killed by an interrupt was interrupted, even when its exit is seen before
    // the Ctrl-C that reached `run` too (a shell reasons the same way about its jobs).
    if case .signaled(let signo) = exit, signo == interrupt || signo == quit {
      if waitApplied { actions.append(.report(.fail(label: "interrupted"))) }
      return actions + [.finish(.raise(signo))]
    }
    if waitApplied {
      switch exit {
      case .exited(0): actions.append(.report(.done))
      case .exited(let code): actions.append(.report(.fail(label: "exit \(code)")))
      case .signaled(let signo): actions.append(.report(.fail(label: "signal \(signo)")))
      }
    }
    switch exit {
    case .exited(let code): actions.append(.finish(.exit(code)))
    case .signaled(let signo): actions.append(.finish(.exit(128 + signo)))
    }
    return actions
  }
}
