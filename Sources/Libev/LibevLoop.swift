import CLibev

// The one module that imports CLibev: libev's raw pointers, Unmanaged and
// @convention(c) callbacks end in this module. Everything above sees a
// `LibevLoop` and its `LoopTimer`s.

/// One libev loop, owned: created here and destroyed when the last holder
/// (the server, a timer, a test) lets it go. Everything on it runs on the
/// one thread that runs it; nothing here may be called from another.
///
/// C libraries with a libev adapter attach to it through `unsafeRawLoop`:
/// lws as its foreign loop, hiredis through `redisLibevAttach`.
public final class LibevLoop {
  /// The `struct ev_loop *`, only to hand to a C library's libev adapter.
  public let unsafeRawLoop: OpaquePointer
  private var iteration: UnsafeMutablePointer<cev_iteration_t>?
  private var woke: () -> Void = {}
  private var sleeping: () -> Void = {}

  /// A new loop on the best backend libev has (epoll on Linux); traps when
  /// libev cannot make one. For tests and tools; the server uses `make`.
  public convenience init() {
    guard let loop = cev_loop_new() else { fatalError("libev cannot create a loop") }
    self.init(raw: loop)
  }

  /// A new loop, or nil when libev cannot make one.
  public static func make() -> LibevLoop? {
    cev_loop_new().map(LibevLoop.init(raw:))
  }

  private init(raw: OpaquePointer) {
    unsafeRawLoop = raw
  }

  deinit {
    stopWatchingIterations()
    cev_loop_destroy(unsafeRawLoop)
  }

  /// The backend libev chose: "epoll", "poll", "select" or "other".
  public var backendName: String { String(cString: cev_backend_name(unsafeRawLoop)) }

  /// Makes the `ev_run` running this loop (inside `lws_service`, say) return
  /// once the current callback ends.
  public func breakRun() { cev_break(unsafeRawLoop) }

  /// Handles events until `done()` holds or `timeoutMs` passed; true when done.
  public func run(timeoutMs: Int64, until done: () -> Bool) -> Bool {
    var expired = false
    let guardTimer = LoopTimer(loop: self) { expired = true }
    guardTimer.schedule(afterMs: timeoutMs)
    while !done() && !expired { cev_run_once(unsafeRawLoop) }
    return done()
  }

  /// Calls `woke` right after each wait for events returns and `sleeping`
  /// right before the next, so what runs between them is one iteration's
  /// work. The watchers never keep the loop alive on their own.
  public func watchIterations(woke: @escaping () -> Void, sleeping: @escaping () -> Void) {
    stopWatchingIterations()
    self.woke = woke
    self.sleeping = sleeping
    let watchers = UnsafeMutablePointer<cev_iteration_t>.allocate(capacity: 1)
    watchers.initialize(to: cev_iteration_t())
    iteration = watchers
    cev_iteration_start(
      unsafeRawLoop, watchers, loopWoke, loopSleeping,
      Unmanaged.passUnretained(self).toOpaque())
  }

  public func stopWatchingIterations() {
    guard let watchers = iteration else { return }
    cev_iteration_stop(unsafeRawLoop, watchers)
    watchers.deallocate()
    iteration = nil
    woke = {}
    sleeping = {}
  }

  fileprivate func iterationWoke() { woke() }
  fileprivate func iterationSleeping() { sleeping() }
}

private func loopWoke(_ user: UnsafeMutableRawPointer?) {
  guard let user else { return }
  Unmanaged<LibevLoop>.fromOpaque(user).takeUnretainedValue().iterationWoke()
}

private func loopSleeping(_ user: UnsafeMutableRawPointer?) {
  guard let user else { return }
  Unmanaged<LibevLoop>.fromOpaque(user).takeUnretainedValue().iterationSleeping()
}
