import Dispatch
import Synchronization

#if canImport(Glibc)
  import Glibc
#endif

/// The `process_*` families every Prometheus client exposes.
///
/// Memory and CPU are read at each render (one small /proc read and one
/// getrusage). Counting open descriptors means listing /proc/self/fd, which is
/// O(connections), so a background queue does it every few seconds and the
/// render reads the last count.
public final class ProcessMetrics {
  public let startTimeSeconds: Double
  private let openDescriptors = SampledCount()
  private let sampler: DispatchSourceTimer

  public init(samplingEverySeconds interval: Int = 5) {
    var now = timespec()
    clock_gettime(CLOCK_REALTIME, &now)
    startTimeSeconds = Double(now.tv_sec) + Double(now.tv_nsec) / 1e9
    let queue = DispatchQueue(label: "countdown.process-metrics", qos: .utility)
    sampler = DispatchSource.makeTimerSource(queue: queue)
    sampler.schedule(deadline: .now(), repeating: .seconds(interval))
    sampler.setEventHandler { [openDescriptors] in
      openDescriptors.value.store(Self.countOpenDescriptors(), ordering: .relaxed)
    }
    sampler.resume()
  }

  deinit {
    sampler.cancel()
  }

  public func collect(into writer: inout MetricsWriter) {
    writer.single(
      "process_start_time_seconds", .gauge,
      help: "Start time of the process since the Unix epoch, in seconds.", startTimeSeconds)
    var usage = rusage()
    if getrusage(RUSAGE_SELF.rawValue, &usage) == 0 {
      let seconds =
        Double(usage.ru_utime.tv_sec) + Double(usage.ru_utime.tv_usec) / 1e6
        + Double(usage.ru_stime.tv_sec) + Double(usage.ru_stime.tv_usec) / 1e6
      writer.single(
        "process_cpu_seconds_total", .counter, help: "User and system CPU time spent, in seconds.",
        seconds)
    }
    if let resident = Self.residentBytes() {
      writer.single(
        "process_resident_memory_bytes", .gauge, help: "Resident memory size in bytes.",
        Double(resident))
    }
    let open = openDescriptors.value.load(ordering: .relaxed)
    if open >= 0 {
      writer.single(
        "process_open_fds", .gauge,
        help: "Open file descriptors (sampled every few seconds off the service thread).",
        Double(open))
    }
    var limit = rlimit()
    if getrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limit) == 0 {
      writer.single(
        "process_max_fds", .gauge, help: "The soft limit on open file descriptors.",
        Double(limit.rlim_cur))
    }
  }

  /// The second field of /proc/self/statm, in pages.
  static func residentBytes() -> Int? {
    let fd = open("/proc/self/statm", O_RDONLY | O_CLOEXEC)
    guard fd >= 0 else { return nil }
    defer { close(fd) }
    var buffer = [UInt8](repeating: 0, count: 128)
    let count = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
    guard count > 0 else { return nil }
    let fields = buffer[0..<count].split(separator: UInt8(ascii: " "))
    guard fields.count > 1, let pages = Int(String(decoding: fields[1], as: UTF8.self)) else {
      return nil
    }
    return pages * sysconf(Int32(_SC_PAGESIZE))
  }

  static func countOpenDescriptors() -> Int {
    guard let directory = opendir("/proc/self/fd") else { return -1 }
    defer { closedir(directory) }
    var count = 0
    while let entry = readdir(directory) {
      if entry.pointee.d_name.0 != UInt8(ascii: ".") { count += 1 }
    }
    // The directory listing itself holds one descriptor.
    return count - 1
  }
}

/// A count written by the sampler's queue and read by the service thread.
private final class SampledCount: Sendable {
  let value = Atomic<Int>(-1)
}
