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

signal(SIGPIPE, SIG_IGN)
for stopSignal in [SIGINT, SIGTERM] {
  signal(stopSignal) { _ in CountdownServer.requestStop() }
}

let hub = Hub(config: SessionConfig(defaultSeconds: options.defaultSeconds))
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
