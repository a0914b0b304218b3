import CountdownCLI
import Foundation

do {
  let invocation = try Invocation.parse(Array(CommandLine.arguments.dropFirst()))
  if invocation.action == .help {
    print(usageText)
    exit(ExitCode.ok.rawValue)
  }
} catch {
  FileHandle.standardError.write(Data("countdown: \(error)\n\(usageText)\n".utf8))
  exit(ExitCode.usage.rawValue)
}
