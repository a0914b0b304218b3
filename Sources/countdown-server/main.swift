import CountdownCore
import LWSServer

#if canImport(Glibc)
  import Glibc
#endif

// Wires the pure hub to the libwebsockets server; this thread becomes the service thread.

/// Writes to standard error without touching C's global `stderr` (not Sendable).
func report(_ message: String) {
  let line = Array("countdown-server: \(message)\n".utf8)
  _ = line.withUnsafeBytes { write(STDERR_FILENO, $0.baseAddress, $0.count) }
}

func fail(_ message: String) -> Never {
  report(message)
  exit(2)
}

let options: Options
do {
  switch try Options.parse(Array(CommandLine.arguments.dropFirst())) {
  case .help:
    print(Options.usage)
    exit(0)
  case .run(let parsed):
    options = parsed
  }
} catch {
  fail("\(error.message)\nTry 'countdown-server --help'.")
}

var isDirectory = stat()
guard stat(options.server.publicDirectory + "/index.html", &isDirectory) == 0 else {
  fail("--public \(options.server.publicDirectory): no index.html there")
}

/// Every allowed connection needs a descriptor, plus a few for files and the listener.
func raiseOpenFileLimit(toServe connections: Int) {
  let needed = rlim_t(connections + 64)
  var limit = rlimit()
  guard getrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limit) == 0, limit.rlim_cur < needed
  else { return }
  let target = min(needed, limit.rlim_max)
  limit.rlim_cur = target
  if setrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limit) != 0 || target < needed {
    report(
      "warning: the open-file limit is \(getrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limit) == 0 ? limit.rlim_cur : 0), "
        + "but --max-connections \(connections) needs \(needed); connections past it will fail")
  }
}

signal(SIGPIPE, SIG_IGN)
for stopSignal in [SIGINT, SIGTERM] {
  signal(stopSignal) { _ in CountdownServer.requestStop() }
}

raiseOpenFileLimit(toServe: options.server.maxConnections)

let hub = Hub(config: options.hub)
let server = CountdownServer(config: options.server, hub: hub)
do {
  try server.run { port in
    let host = options.server.host.contains(":") ? "[\(options.server.host)]" : options.server.host
    print("countdown-server listening on http://\(host):\(port)/")
    fflush(nil)  // tests and supervisors read this line through a pipe
  }
} catch {
  report("\(error)")
  exit(1)
}
exit(0)
