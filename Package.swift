// swift-tools-version:6.0
import PackageDescription

let package = Package(
  name: "countdown-server",
  products: [
    .executable(name: "countdown-server", targets: ["countdown-server"])
  ],
  targets: [
    // Pure core: state machine, codec, registry, scheduler. Knows nothing of C or sockets.
    .target(name: "CountdownCore"),
    // Debian's libwebsockets-dev, seen through a modulemap and a small shim for macros.
    .systemLibrary(
      name: "CLibWebSockets",
      pkgConfig: "libwebsockets",
      providers: [.apt(["libwebsockets-dev", "libev-dev"])]
    ),
    // The only module that imports the C library.
    .target(name: "LWSServer", dependencies: ["CountdownCore", "CLibWebSockets"]),
    .executableTarget(name: "countdown-server", dependencies: ["CountdownCore", "LWSServer"]),
    .testTarget(name: "CountdownCoreTests", dependencies: ["CountdownCore"]),
    // A real server on a real loop, driven from other threads.
    .testTarget(name: "LWSServerTests", dependencies: ["LWSServer", "CountdownCore"]),
    // bench/run's in-process scheduler benchmark (no sockets).
    .executableTarget(
      name: "scheduler-bench", dependencies: ["CountdownCore"], path: "bench/SchedulerBench"),
  ],
  swiftLanguageModes: [.v6]
)
