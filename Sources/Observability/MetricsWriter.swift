/// Writes the Prometheus text exposition format, version 0.0.4.
///
/// A collector writes each family once: `family` for its HELP and TYPE lines,
/// then its samples. Label values are escaped here, so a collector never
/// builds exposition syntax by hand.
public struct MetricsWriter {
  public enum Kind: String, Sendable {
    case counter, gauge, histogram
  }

  /// Bytes, not a String: the renderer runs on the service thread, and
  /// appending UTF-8 and integer digits directly keeps it to a few microseconds.
  public private(set) var bytes: [UInt8] = []

  public init() {
    bytes.reserveCapacity(16 * 1024)
  }

  public var text: String { String(decoding: bytes, as: UTF8.self) }

  public mutating func family(_ name: String, _ kind: Kind, help: String) {
    append("# HELP ")
    append(name)
    append(" ")
    append(Self.escapeHelp(help))
    append("\n# TYPE ")
    append(name)
    append(" ")
    append(kind.rawValue)
    bytes.append(0x0A)
  }

  public mutating func sample(
    _ name: String, _ labels: KeyValuePairs<String, String>, _ value: Double
  ) {
    append(name)
    bytes.append(UInt8(ascii: "{"))
    for (index, (key, labelValue)) in labels.enumerated() {
      label(index, key, labelValue)
    }
    bytes.append(UInt8(ascii: "}"))
    finish(value)
  }

  public mutating func sample(_ name: String, _ value: Double) {
    append(name)
    finish(value)
  }

  public mutating func sample(_ name: String, labels: [(String, String)], _ value: Double) {
    append(name)
    if !labels.isEmpty {
      bytes.append(UInt8(ascii: "{"))
      for (index, (key, labelValue)) in labels.enumerated() { label(index, key, labelValue) }
      bytes.append(UInt8(ascii: "}"))
    }
    finish(value)
  }

  /// Unlabelled counters and gauges: (name, kind, help, value) each.
  public mutating func singles(_ metrics: [(String, Kind, String, Double)]) {
    for (name, kind, help, value) in metrics { single(name, kind, help: help, value) }
  }

  /// One unlabelled counter or gauge, with its HELP and TYPE.
  public mutating func single(_ name: String, _ kind: Kind, help: String, _ value: Double) {
    family(name, kind, help: help)
    sample(name, value)
  }

  /// A histogram from per-bucket (not cumulative) counts; `counts` has one
  /// more entry than `bounds`, for +Inf. `scale` converts the recorded unit to
  /// the exposed one (milliseconds to seconds: 0.001).
  public mutating func histogram(
    _ name: String, help: String, bounds: [Double], counts: [UInt64], sum: Double, count: UInt64,
    scale: Double = 1
  ) {
    histogram(
      name, help: help, boundLabels: Self.boundLabels(bounds, scale: scale), counts: counts,
      sum: sum, count: count, scale: scale)
  }

  /// The `le` label of each bound, for a caller to keep: formatting a Double
  /// is most of a histogram's render time.
  public static func boundLabels(_ bounds: [Double], scale: Double = 1) -> [String] {
    bounds.map { format($0 * scale) }
  }

  public mutating func histogram(
    _ name: String, help: String, boundLabels: [String], counts: [UInt64], sum: Double,
    count: UInt64, scale: Double = 1
  ) {
    family(name, .histogram, help: help)
    var cumulative: UInt64 = 0
    for (index, bound) in boundLabels.enumerated() {
      cumulative += counts[index]
      append(name)
      append("_bucket{le=\"")
      append(bound)
      append("\"}")
      finish(Double(cumulative))
    }
    append(name)
    append("_bucket{le=\"+Inf\"}")
    finish(Double(count))
    append(name)
    append("_sum")
    finish(sum * scale)
    append(name)
    append("_count")
    finish(Double(count))
  }

  private mutating func label(_ index: Int, _ key: String, _ value: String) {
    if index > 0 { bytes.append(UInt8(ascii: ",")) }
    append(key)
    append("=\"")
    append(Self.escapeLabel(value))
    bytes.append(UInt8(ascii: "\""))
  }

  private mutating func finish(_ value: Double) {
    bytes.append(UInt8(ascii: " "))
    appendNumber(value)
    bytes.append(0x0A)
  }

  private mutating func append(_ text: String) {
    bytes.append(contentsOf: text.utf8)
  }

  private mutating func appendNumber(_ value: Double) {
    if value == value.rounded(), abs(value) < 1e15 {
      var number = Int64(value)
      if number < 0 {
        bytes.append(UInt8(ascii: "-"))
        number = -number
      }
      var reversed: [UInt8] = []
      repeat {
        reversed.append(UInt8(ascii: "0") + UInt8(number % 10))
        number /= 10
      } while number > 0
      bytes.append(contentsOf: reversed.reversed())
    } else {
      append(Self.format(value))
    }
  }

  static func format(_ value: Double) -> String {
    if value.isNaN { return "NaN" }
    if value.isInfinite { return value > 0 ? "+Inf" : "-Inf" }
    if value == value.rounded(), abs(value) < 1e15 { return String(Int64(value)) }
    return "\(value)"
  }

  static func escapeLabel(_ value: String) -> String {
    guard value.utf8.contains(where: { $0 == 0x5C || $0 == 0x22 || $0 == 0x0A }) else {
      return value
    }
    var out = ""
    for character in value {
      switch character {
      case "\\": out += "\\\\"
      case "\"": out += "\\\""
      case "\n": out += "\\n"
      default: out.append(character)
      }
    }
    return out
  }

  static func escapeHelp(_ value: String) -> String {
    guard value.utf8.contains(where: { $0 == 0x5C || $0 == 0x0A }) else { return value }
    return value.replacing("\\", with: "\\\\").replacing("\n", with: "\\n")
  }
}
