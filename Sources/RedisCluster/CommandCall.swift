import CountdownCore

/// How a command becomes the argv of one `countdown_v2_command` call: the
/// one place that knows the function's argument layout (countdown.lua reads
/// the same slots by number).
enum CommandCall {
  /// The whole FCALL, keys then arguments.
  static func argv(
    _ request: SequenceRequest, epoch: String, channel: String, deadline: Int64, nonce: String
  ) -> [String] {
    let (op, first, second, label) = arguments(of: request.command)
    return [
      "FCALL", RedisSequencer.function("command"), "3", RedisSequencer.sessionKey(request.session),
      RedisSequencer.epochKey, RedisSequencer.positionKey, epoch, channel, request.session, op,
      first, second, label,
    ] + RecordMessage.arguments(of: request.current.fields) + [
      // Then the presented key's hash, which the function checks again.
      String(deadline), nonce, request.presentedKeyHash?.hex ?? "",
    ]
  }

  /// A command's op and arguments as `countdown_v2_command` takes them.
  static func arguments(of command: SessionCommand) -> (String, String, String, String) {
    switch command {
    case .start(.seconds(let seconds), let label):
      ("start", "seconds", String(seconds), label ?? "")
    case .start(.until(let deadline), let label):
      ("start", "until", String(deadline), label ?? "")
    case .cancel: ("cancel", "", "", "")
    case .pause: ("pause", "", "", "")
    case .resume: ("resume", "", "", "")
    case .adjust(let seconds): ("adjust", String(seconds), "", "")
    case .rotateKey(let hash): ("rotate_key", hash.hex, "", "")
    }
  }
}
