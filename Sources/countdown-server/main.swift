// The composition root is `App`; this thread becomes the service thread.
#if canImport(Glibc)
  import Glibc
#endif

exit(App(options: App.parseOptions(Array(CommandLine.arguments.dropFirst()))).run())
