// swift-tools-version:6.0
import PackageDescription

let package = Package(
  name: "countdown-server",
  // For CountdownClient, the one product that builds beyond Linux: async URLSession.
  platforms: [.macOS(.v12), .iOS(.v15), .tvOS(.v15), .watchOS(.v8)],
  products: [
    .executable(name: "countdown-server", targets: ["countdown-server"]),
    .executable(name: "countdown", targets: ["countdown"]),
    // The Swift client (HTTP commands and SSE) for apps and the `countdown` CLI.
    .library(name: "CountdownClient", targets: ["CountdownClient"]),
  ],
  targets: [
    // Pure core: state machine, codec, registry, scheduler. Knows nothing of C or sockets.
    .target(name: "CountdownCore"),
    // Logging, the Prometheus registry and process metrics: pure Swift, no lws,
    // so storage and Redis modules can log and add metric families too.
    .target(name: "Observability"),
    // Debian's libev-dev, seen through a modulemap and a shim for its macros.
    .systemLibrary(
      name: "CLibev",
      providers: [.apt(["libev-dev"])]
    ),
    // The service loop and its one timer type: the only module that imports
    // CLibev. lws and hiredis both attach to its loop.
    .target(name: "Libev", dependencies: ["CLibev"]),
    // Debian's libwebsockets-dev, seen through a modulemap and a small shim for macros.
    .systemLibrary(
      name: "CLibWebSockets",
      pkgConfig: "libwebsockets",
      providers: [.apt(["libwebsockets-dev"])]
    ),
    // The only module that imports the C library.
    .target(
      name: "LWSServer",
      dependencies: ["CountdownCore", "CLibWebSockets", "Libev", "Observability", "QRCode"]),
    // Debian's libqrencode-dev, for the Share panel's QR codes (GET /qr.svg).
    .systemLibrary(
      name: "CQREncode",
      pkgConfig: "libqrencode",
      providers: [.apt(["libqrencode-dev"])]
    ),
    // QR codes as SVG: the only module that imports CQREncode.
    .target(name: "QRCode", dependencies: ["CQREncode"]),
    // Debian's libsqlite3-dev, seen through a modulemap and a shim for its casting macros.
    .systemLibrary(
      name: "CSQLite",
      pkgConfig: "sqlite3",
      providers: [.apt(["libsqlite3-dev"])]
    ),
    // Sessions' durable facts in SQLite: the only module that imports CSQLite.
    .target(name: "SQLiteStore", dependencies: ["CountdownCore", "CSQLite", "Observability"]),
    // Debian's libhiredis-dev (async API, libev adapter), seen through a
    // modulemap and a shim for the adapter's static functions. No pkgConfig: the shim includes <hiredis/...> from the
    // default path, and hiredis.pc's only other flag, -D_FILE_OFFSET_BITS=64
    // (a no-op on 64-bit Linux), is one SwiftPM refuses with a warning on
    // every build.
    .systemLibrary(
      name: "CHiredis",
      providers: [.apt(["libhiredis-dev", "libev-dev"])]
    ),
    // Cluster mode: sessions shared through Redis. The only importer of CHiredis.
    .target(
      name: "RedisCluster",
      dependencies: ["CountdownCore", "CHiredis", "Libev", "Observability"],
      exclude: ["countdown.lua"]),
    // URLSession on Apple platforms; on Linux, whose URLSession spins while a stream idles,
    // its own HTTP over connections that libcurl opens (`Curl`), so that it builds for iOS
    // and macOS with no C library.
    .target(
      name: "CountdownClient",
      dependencies: [.target(name: "Curl", condition: .when(platforms: [.linux]))]),
    // Debian's libcurl4-openssl-dev (so https works), seen through a modulemap
    // and a shim for its variadic setopt/getinfo calls.
    .systemLibrary(
      name: "CCurl",
      pkgConfig: "libcurl",
      providers: [.apt(["libcurl4-openssl-dev"])]
    ),
    // libcurl, fenced: the only module that imports CCurl. The multi interface for
    // webhooks, and connect-only connections for the Linux client.
    .target(name: "Curl", dependencies: ["CCurl"]),
    // Standard Webhooks out of the outbox, on a thread of its own through libcurl's multi
    // interface.
    .target(
      name: "WebhookDelivery", dependencies: ["CountdownCore", "Curl", "Observability"]),
    .executableTarget(
      name: "countdown-server",
      dependencies: [
        "CountdownCore", "LWSServer", "Observability", "SQLiteStore", "RedisCluster",
        "WebhookDelivery",
      ]),
    // The `countdown` command line: arguments, the one-line renderer, `run`'s child and
    // signals. A library so its tests can reach it; the executable only calls it.
    .target(name: "CountdownCLI", dependencies: ["CountdownClient"]),
    .executableTarget(name: "countdown", dependencies: ["CountdownCLI"]),
    .testTarget(name: "CountdownCLITests", dependencies: ["CountdownCLI", "CountdownClient"]),
    // What more than one test target needs (a seeded generator), kept once.
    .target(name: "TestSupport", path: "Tests/TestSupport"),
    .testTarget(name: "CountdownCoreTests", dependencies: ["CountdownCore", "TestSupport"]),
    .testTarget(name: "LibevTests", dependencies: ["Libev"]),
    .testTarget(name: "SQLiteStoreTests", dependencies: ["SQLiteStore", "CountdownCore"]),
    .testTarget(name: "ObservabilityTests", dependencies: ["Observability"]),
    .testTarget(name: "QRCodeTests", dependencies: ["QRCode"]),
    .testTarget(name: "WebhookDeliveryTests", dependencies: ["WebhookDelivery", "CountdownCore"]),
    .testTarget(
      name: "RedisClusterTests",
      dependencies: ["RedisCluster", "CountdownCore", "Libev", "TestSupport"]),
    // A real server on a real loop, driven from other threads.
    .testTarget(name: "LWSServerTests", dependencies: ["LWSServer", "CountdownCore", "Libev"]),
    // Against the built server binary, started by the tests on a free port.
    .testTarget(name: "CountdownClientTests", dependencies: ["CountdownClient"]),
    // bench/run's in-process scheduler benchmark (no sockets).
    .executableTarget(
      name: "scheduler-bench", dependencies: ["CountdownCore"], path: "bench/SchedulerBench"),
    // SQLiteStore alone: group-commit throughput and latency per sync mode.
    .executableTarget(
      name: "store-bench", dependencies: ["CountdownCore", "SQLiteStore"], path: "bench/StoreBench"),
  ],
  swiftLanguageModes: [.v6]
)
