/// One option: its flag, variable, help, and how it reads and shows its value.
struct OptionSpec: Sendable {
  enum Section: String, CaseIterable {
    case options = "OPTIONS"
    case limits = "LIMITS"
    case storage = "STORAGE"
    case webhooks = "WEBHOOKS"
    case operating = "OPERATING"
    case testing = "TESTING"
  }

  typealias Apply =
    @Sendable (inout Options, _ value: String, _ name: String) throws(Options.UsageError)
    -> Void

  let flag: String
  /// nil: a switch, on when given (its variable takes on/off).
  let valueName: String?
  let section: Section
  let help: String
  let apply: Apply
  let show: @Sendable (Options) -> String
  var reset: (@Sendable (inout Options) -> Void)?

  var environmentName: String {
    "COUNTDOWN_" + flag.dropFirst(2).uppercased().replacing("-", with: "_")
  }
}

// MARK: Value parsers: each names the flag or variable, the value, and what is allowed.

func parseInteger(_ text: String, _ name: String, in range: ClosedRange<Int>) throws(Options
  .UsageError) -> Int
{
  guard let number = Int(text), range.contains(number) else {
    throw Options.UsageError(
      message:
        "\(name) must be a whole number from \(range.lowerBound) to \(range.upperBound), not '\(text)'"
    )
  }
  return number
}

func parseChoice<T: RawRepresentable & CaseIterable>(_ text: String, _ name: String)
  throws(Options.UsageError) -> T where T.RawValue == String
{
  guard let value = T(rawValue: text) else {
    let allowed = T.allCases.map { "'\($0.rawValue)'" }.joined(separator: ", ")
    throw Options.UsageError(message: "\(name) must be one of \(allowed), not '\(text)'")
  }
  return value
}

func parseNonEmpty(_ text: String, _ name: String) throws(Options.UsageError) -> String {
  guard !text.isEmpty else { throw Options.UsageError(message: "\(name) must not be empty") }
  return text
}

/// A file flag's value: what `load` makes of the file at that path, whose
/// error is worded "FLAG PATH: reason" (never the file's content).
func loadFile<Value, Failure: Error & CustomStringConvertible>(
  _ text: String, _ name: String, _ load: (String) throws(Failure) -> Value
) throws(Options.UsageError) -> Value {
  let path = try parseNonEmpty(text, name)
  do throws(Failure) {
    return try load(path)
  } catch {
    throw Options.UsageError(message: "\(name) \(path): \(error.description)")
  }
}

func parseSwitch(_ text: String, _ name: String) throws(Options.UsageError) -> Bool {
  switch text.lowercased() {
  case "on", "1", "true", "yes": return true
  case "off", "0", "false", "no", "": return false
  default:
    throw Options.UsageError(message: "\(name) must be on or off (1/0, true/false), not '\(text)'")
  }
}

extension OptionSpec {
  /// An option whose value is a whole number in `range`.
  static func integer(
    _ flag: String, _ valueName: String, _ section: Section, _ range: ClosedRange<Int>,
    _ path: any WritableKeyPath<Options, Int> & Sendable, help: String
  ) -> OptionSpec {
    OptionSpec(
      flag: flag, valueName: valueName, section: section, help: help,
      apply: { o, v, n throws(Options.UsageError) in
        o[keyPath: path] = try parseInteger(v, n, in: range)
      },
      show: { String($0[keyPath: path]) })
  }

  /// An option whose value is one of an enumeration's raw values.
  static func choice<T: RawRepresentable & CaseIterable & Sendable>(
    _ flag: String, _ section: Section, _ path: any WritableKeyPath<Options, T> & Sendable,
    help: String
  ) -> OptionSpec where T.RawValue == String {
    OptionSpec(
      flag: flag, valueName: T.allCases.map(\.rawValue).joined(separator: "|"), section: section,
      help: help,
      apply: { o, v, n throws(Options.UsageError) in o[keyPath: path] = try parseChoice(v, n) },
      show: { $0[keyPath: path].rawValue })
  }

  /// An option whose value is any non-empty text.
  static func text(
    _ flag: String, _ valueName: String, _ section: Section,
    _ path: any WritableKeyPath<Options, String> & Sendable, help: String
  ) -> OptionSpec {
    OptionSpec(
      flag: flag, valueName: valueName, section: section, help: help,
      apply: { o, v, n throws(Options.UsageError) in o[keyPath: path] = try parseNonEmpty(v, n) },
      show: { $0[keyPath: path] })
  }
}
