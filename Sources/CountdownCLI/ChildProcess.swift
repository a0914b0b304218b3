#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// The command `run` wraps, started in `run`'s own process group (so it keeps the terminal
/// and reads from it like any foreground job), with the signals `run` catches back at their
/// default action and none blocked, whatever `run` did with them.
public struct ChildProcess: Sendable {
  public let pid: pid_t

  /// The signals `run` catches while its command runs.
  public static let caughtSignals: [Int32] = [SIGINT, SIGTERM, SIGHUP, SIGQUIT]

  /// Starts `argv` (looked up in PATH as a shell would), with `run`'s environment and
  /// standard streams. Throws the `errno` text when it cannot start (not found, not
  /// executable).
  public static func spawn(_ argv: [String]) throws(UsageError) -> ChildProcess {
    var attributes = posix_spawnattr_t()
    posix_spawnattr_init(&attributes)
    defer { posix_spawnattr_destroy(&attributes) }
    var defaults = sigset_t()
    sigemptyset(&defaults)
    for signo in caughtSignals + [SIGPIPE] { sigaddset(&defaults, signo) }
    posix_spawnattr_setsigdefault(&attributes, &defaults)
    var mask = sigset_t()
    sigemptyset(&mask)
    posix_spawnattr_setsigmask(&attributes, &mask)
    posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK))
    let cArguments: [UnsafeMutablePointer<CChar>?] = argv.map { strdup($0) } + [nil]
    defer { cArguments.forEach { free($0) } }
    var pid: pid_t = 0
    let rc = posix_spawnp(&pid, argv[0], nil, &attributes, cArguments, environ)
    guard rc == 0 else {
      throw UsageError("cannot run \(quoted(argv[0])): \(String(cString: strerror(rc)))")
    }
    return ChildProcess(pid: pid)
  }

  /// Blocks until the command ends (call it off the main thread).
  public func wait() -> ChildExit {
    var status: Int32 = 0
    while waitpid(pid, &status, 0) < 0 {
      if errno != EINTR { return .exited(127) }
    }
    // WIFEXITED / WEXITSTATUS / WTERMSIG are C macros Swift does not import.
    let low = status & 0x7F
    return low == 0 ? .exited((status >> 8) & 0xFF) : .signaled(low)
  }

  public func send(_ signo: Int32) { kill(pid, signo) }
}

/// Whether this process is in its terminal's foreground process group, so that a Ctrl-C
/// typed there reaches every process of the group.
public func isForegroundOnTerminal() -> Bool {
  for fd in [STDIN_FILENO, STDOUT_FILENO, STDERR_FILENO] where isatty(fd) == 1 {
    if tcgetpgrp(fd) == getpgrp() { return true }
  }
  return false
}

/// Dies of `signo`, as the command did: its default action back, then raised.
public func raiseDefault(_ signo: Int32) -> Never {
  signal(signo, SIG_DFL)
  var set = sigset_t()
  sigemptyset(&set)
  sigaddset(&set, signo)
  sigprocmask(SIG_UNBLOCK, &set, nil)
  raise(signo)
  exit(128 + signo)
}

/// The terminal's width in columns, or nil when `fd` is not a terminal.
public func terminalColumns(_ fd: Int32) -> Int? {
  guard isatty(fd) == 1 else { return nil }
  var size = winsize()
  guard ioctl(fd, UInt(TIOCGWINSZ), &size) == 0, size.ws_col > 0 else { return nil }
  return Int(size.ws_col)
}
