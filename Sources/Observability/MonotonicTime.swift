#if canImport(Glibc)
  import Glibc
#endif

func monotonicSeconds() -> Double {
  Double(monotonicNanoseconds()) / 1e9
}

/// Nanoseconds on a clock that never steps, for timing and deadlines.
public func monotonicNanoseconds() -> Int64 {
  var spec = timespec()
  clock_gettime(CLOCK_MONOTONIC, &spec)
  return Int64(spec.tv_sec) * 1_000_000_000 + Int64(spec.tv_nsec)
}
