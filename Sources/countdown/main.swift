import CountdownCLI
import Foundation

exit(
  await countdownMain(
    arguments: Array(CommandLine.arguments.dropFirst()),
    environment: ProcessInfo.processInfo.environment))
