import Dispatch
import Synchronization

#if canImport(Glibc)
  import Glibc
#endif

/// How much to log; each level includes the ones above it.
public enum LogLevel: String, CaseIterable, Comparable, Sendable {
  case debug, info, warn, error

  public static func < (lhs: LogLevel, rhs: LogLevel) -> Bool {
    allCases.firstIndex(of: lhs)! < allCases.firstIndex(of: rhs)!
  }
}

public enum LogFormat: String, CaseIterable, Sendable {
  /// One JSON object per line, for journald, Loki and the like.
  case json
  /// `TIMESTAMP LEVEL event key=value ...`, for a person at a terminal.
  case text
}

/// One field value of a log line.
public enum LogValue: Sendable, ExpressibleByStringLiteral, ExpressibleByIntegerLiteral,
  ExpressibleByBooleanLiteral
{
  case string(String)
  case int(Int64)
  case double(Double)
  case bool(Bool)

  public init(stringLiteral value: String) { self = .string(value) }
  public init(integerLiteral value: Int64) { self = .int(value) }
  public init(booleanLiteral value: Bool) { self = .bool(value) }
  public init(_ value: some BinaryInteger) { self = .int(Int64(value)) }
  public init(_ value: String) { self = .string(value) }
}

/// The process's one logger: a line per event, with a timestamp and fields.
///
/// Lines are formatted on the caller's thread and written to stderr by one
/// background queue, so a slow reader of stderr (a full pipe, a stalled
/// journald) never blocks the service thread. Past `capacity` unwritten lines,
/// new ones are dropped and counted instead.
///
/// Every string is scrubbed of `key=` values (controller keys travel in URLs),
/// so no caller, lws included, can leak one by logging a path.
public final class Logger: Sendable {
  public let level: LogLevel
  public let format: LogFormat
  private let output: Int32
  private let queue = DispatchQueue(label: "countdown.log")
  private let unwritten = Atomic<Int>(0)
  private let capacity: Int
  private let counts = LineCounts()

  /// The process's logger: replaced once at start-up, with the configured one.
  public static var shared: Logger {
    get { installed.withLock { $0 } }
    set { installed.withLock { $0 = newValue } }
  }
  private static let installed = Mutex(Logger(level: .info, format: defaultFormat()))

  public init(level: LogLevel, format: LogFormat, output: Int32 = 2, capacity: Int = 10_000) {
    self.level = level
    self.format = format
    self.output = output
    self.capacity = capacity
  }

  /// The format when none is asked for: text for a person at a terminal, JSON otherwise.
  public static func defaultFormat(for fd: Int32 = 2) -> LogFormat {
    isatty(fd) == 1 ? .text : .json
  }

  public func enabled(_ level: LogLevel) -> Bool { level >= self.level }

  public func debug(_ event: String, _ fields: KeyValuePairs<String, LogValue> = [:]) {
    log(.debug, event, fields)
  }
  public func info(_ event: String, _ fields: KeyValuePairs<String, LogValue> = [:]) {
    log(.info, event, fields)
  }
  public func info(_ event: String, fields: [(String, LogValue)]) {
    log(.info, event, fields: fields)
  }
  public func warn(_ event: String, _ fields: KeyValuePairs<String, LogValue> = [:]) {
    log(.warn, event, fields)
  }
  public func error(_ event: String, _ fields: KeyValuePairs<String, LogValue> = [:]) {
    log(.error, event, fields)
  }

  public func log(_ level: LogLevel, _ event: String, _ fields: KeyValuePairs<String, LogValue>) {
    log(level, event, fields: Array(fields))
  }

  public func log(_ level: LogLevel, _ event: String, fields: [(String, LogValue)]) {
    guard enabled(level) else { return }
    counts.add(level)
    guard unwritten.add(1, ordering: .relaxed).newValue <= capacity else {
      unwritten.subtract(1, ordering: .relaxed)
      counts.dropped.add(1, ordering: .relaxed)
      return
    }
    let line =
      format == .json
      ? Self.json(level, event, fields) : Self.text(level, event, fields)
    let output = output
    queue.async { [self] in
      line.withUnsafeBytes { bytes in
        var offset = 0
        while offset < bytes.count {
          let written = write(output, bytes.baseAddress! + offset, bytes.count - offset)
          if written < 0 && errno == EINTR { continue }
          if written <= 0 { break }
          offset += written
        }
      }
      unwritten.subtract(1, ordering: .relaxed)
    }
  }

  /// Waits until every line logged so far is written: call before exiting.
  public func flush() {
    queue.sync {}
  }

  /// Lines logged at each level (those past `level` are not counted), and dropped.
  public func lineCounts() -> (byLevel: [(LogLevel, UInt64)], dropped: UInt64) {
    counts.snapshot()
  }

  /// `countdown_log_lines_total{level}` and the lines dropped on a stalled stderr.
  public func collect(into writer: inout MetricsWriter) {
    let (byLevel, dropped) = counts.snapshot()
    writer.family(
      "countdown_log_lines_total", .counter, help: "Log lines emitted, by level (dropped included)."
    )
    for (level, count) in byLevel {
      writer.sample("countdown_log_lines_total", ["level": level.rawValue], Double(count))
    }
    writer.single(
      "countdown_log_lines_dropped_total", .counter,
      help: "Log lines dropped because stderr was not taking them.", Double(dropped))
  }

  // MARK: Formatting

  static func json(_ level: LogLevel, _ event: String, _ fields: [(String, LogValue)]) -> [UInt8] {
    var out = "{\"ts\":\"\(timestamp())\",\"level\":\"\(level.rawValue)\",\"event\":"
    appendJSONString(event, to: &out)
    for (key, value) in fields {
      out += ","
      appendJSONString(key, to: &out)
      out += ":"
      switch value {
      case .string(let text): appendJSONString(redact(text), to: &out)
      case .int(let number): out += String(number)
      case .double(let number): out += number.isFinite ? "\(number)" : "null"
      case .bool(let flag): out += flag ? "true" : "false"
      }
    }
    out += "}\n"
    return Array(out.utf8)
  }

  static func text(_ level: LogLevel, _ event: String, _ fields: [(String, LogValue)]) -> [UInt8] {
    var out = "\(timestamp()) \(level.rawValue.uppercased()) \(event)"
    for (key, value) in fields {
      out += " \(key)="
      switch value {
      case .string(let text):
        let clean = redact(text)
        if clean.isEmpty || clean.contains(where: { $0 == " " || $0 == "\"" || $0 == "=" }) {
          appendJSONString(clean, to: &out)
        } else {
          out += escapingControls(clean)
        }
      case .int(let number): out += String(number)
      case .double(let number): out += "\(number)"
      case .bool(let flag): out += flag ? "true" : "false"
      }
    }
    out += "\n"
    return Array(out.utf8)
  }

  /// RFC 3339 UTC with milliseconds.
  static func timestamp() -> String {
    var spec = timespec()
    clock_gettime(CLOCK_REALTIME, &spec)
    var seconds = spec.tv_sec
    var parts = tm()
    gmtime_r(&seconds, &parts)
    func pad(_ value: Int32, _ width: Int) -> String {
      let digits = String(value)
      return String(repeating: "0", count: max(0, width - digits.count)) + digits
    }
    return "\(pad(parts.tm_year + 1900, 4))-\(pad(parts.tm_mon + 1, 2))-\(pad(parts.tm_mday, 2))"
      + "T\(pad(parts.tm_hour, 2)):\(pad(parts.tm_min, 2)):\(pad(parts.tm_sec, 2))"
      + ".\(pad(Int32(spec.tv_nsec / 1_000_000), 3))Z"
  }

  /// Replaces the value of every `key=` (a query argument, or a header-ish
  /// `key=...` in a library line) with `REDACTED`.
  public static func redact(_ text: String) -> String {
    guard text.contains("key=") else { return text }
    let marker = Array("key=".utf8)
    let bytes = Array(text.utf8)
    var out: [UInt8] = []
    var index = 0
    while index < bytes.count {
      if bytes[index...].starts(with: marker) {
        out += marker + Array("REDACTED".utf8)
        index += marker.count
        while index < bytes.count, !valueEnds.contains(bytes[index]) { index += 1 }
      } else {
        out.append(bytes[index])
        index += 1
      }
    }
    return String(decoding: out, as: UTF8.self)
  }

  private static let valueEnds: Set<UInt8> = Set("& \"\n\r\t;,".utf8)

  static func appendJSONString(_ text: String, to out: inout String) {
    out += "\""
    for scalar in text.unicodeScalars {
      switch scalar {
      case "\"": out += "\\\""
      case "\\": out += "\\\\"
      case "\n": out += "\\n"
      case "\r": out += "\\r"
      case "\t": out += "\\t"
      case _ where scalar.value < 0x20:
        let hex = String(scalar.value, radix: 16)
        out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
      default: out.unicodeScalars.append(scalar)
      }
    }
    out += "\""
  }

  private static func escapingControls(_ text: String) -> String {
    guard text.unicodeScalars.contains(where: { $0.value < 0x20 }) else { return text }
    var out = ""
    appendJSONString(text, to: &out)
    return out
  }
}

/// Counters of log lines, readable from the metrics renderer on another thread.
private final class LineCounts: Sendable {
  let debug = Atomic<UInt64>(0)
  let info = Atomic<UInt64>(0)
  let warn = Atomic<UInt64>(0)
  let error = Atomic<UInt64>(0)
  let dropped = Atomic<UInt64>(0)

  func add(_ level: LogLevel) {
    switch level {
    case .debug: debug.add(1, ordering: .relaxed)
    case .info: info.add(1, ordering: .relaxed)
    case .warn: warn.add(1, ordering: .relaxed)
    case .error: error.add(1, ordering: .relaxed)
    }
  }

  func snapshot() -> (byLevel: [(LogLevel, UInt64)], dropped: UInt64) {
    (
      [
        (.debug, debug.load(ordering: .relaxed)), (.info, info.load(ordering: .relaxed)),
        (.warn, warn.load(ordering: .relaxed)), (.error, error.load(ordering: .relaxed)),
      ], dropped.load(ordering: .relaxed)
    )
  }
}
