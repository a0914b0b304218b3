/// Why a client message was refused, with the `id` to echo (nil when it had none).
public struct CommandError: Error, Equatable, Sendable {
  public var code: ErrorCode
  public var message: String
  public var id: CommandID?

  public init(_ code: ErrorCode, _ message: String, id: CommandID? = nil) {
    self.code = code
    self.message = message
    self.id = id
  }
}
