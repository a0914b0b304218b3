/// Whether the main port answers `/metrics`. The default never exposes it
/// beyond this machine: with `auto`, only a main port bound to loopback
/// answers it, and only when no `--metrics-port` was given.
public enum MetricsExposure: String, Sendable, CaseIterable {
  case auto, main, off
}
