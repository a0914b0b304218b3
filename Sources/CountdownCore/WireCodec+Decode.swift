/// Client text in: every frame is checked field by field against the
/// command schema (`SessionCommand.Op`, `ClientRequest.MessageOp`) before
/// any of it is used.
extension WireCodec {
  /// `text` in quotes for an error message: at most `maxEchoLength` Unicode
  /// scalars (not characters, since one character may join any number of
  /// scalars), with an ellipsis when cut.
  public static func echo(_ text: String) -> String {
    let scalars = text.unicodeScalars
    guard scalars.count > maxEchoLength else { return "\"\(text)\"" }
    var cut = String.UnicodeScalarView()
    cut.append(contentsOf: scalars.prefix(maxEchoLength))
    return "\"\(String(cut))…\""
  }

  /// Decodes one text frame. Every failure names the error code the client
  /// gets. A start that names no length runs `defaultSeconds`.
  public static func decode(
    _ text: [UInt8], defaultSeconds: Int
  ) -> Result<ClientMessage, CommandError> {
    let value: JSONValue
    do throws(JSONParseError) {
      value = try JSONParser.parse(text)
    } catch {
      switch error {
      case .syntax:
        return .failure(CommandError(.badJSON, "the message is not valid JSON"))
      case .tooDeep:
        return .failure(
          CommandError(.badRequest, "JSON nested deeper than \(JSONParser.defaultMaxDepth) levels"))
      case .duplicateKey(let key):
        return .failure(CommandError(.badRequest, "duplicate key \(echo(key))"))
      }
    }
    guard case .object(let fields) = value else {
      return .failure(CommandError(.badRequest, "a command must be a JSON object"))
    }
    var id: CommandID?
    if let raw = fields["id"], raw != .null {
      guard let parsed = CommandID(raw) else {
        return .failure(
          CommandError(
            .badRequest,
            "id must be null, an integer from -2^63 to 2^63-1 or a string of at most \(CommandID.maxStringLength) characters"
          ))
      }
      id = parsed
    }
    func fail(_ message: String) -> Result<ClientMessage, CommandError> {
      .failure(CommandError(.badRequest, message, id: id))
    }
    guard case .string(let name)? = fields["op"] else { return fail("op must be a string") }
    let request: ClientRequest
    if let op = SessionCommand.Op(rawValue: name) {
      switch decodeCommand(op, fields, defaultSeconds: defaultSeconds) {
      case .success(let decoded): request = decoded
      case .failure(let failure): return fail(failure.message)
      }
    } else if let op = ClientRequest.MessageOp(rawValue: name) {
      switch op {
      case .ping:
        // Echoed verbatim, so only a short literal the page can read back as a finite number.
        guard case .number(let t)? = fields["t"], t.utf8.count <= maxPingTLength,
          Double(t)?.isFinite == true
        else {
          return fail("t must be a finite number of at most \(maxPingTLength) characters")
        }
        request = .ping(t: t)
      case .auth:
        guard case .string(let key)? = fields["key"], key.unicodeScalars.count <= Self.maxKeyLength
        else { return fail("key must be a string of at most \(Self.maxKeyLength) characters") }
        request = .auth(key: key)
      }
    } else {
      return fail("unknown op \(echo(name))")
    }
    return .success(ClientMessage(request: request, id: id))
  }

  /// A session command's fields, or the message of the `bad_request` they get.
  private static func decodeCommand(
    _ op: SessionCommand.Op, _ fields: [String: JSONValue], defaultSeconds: Int
  ) -> Result<ClientRequest, DecodeFailure> {
    switch op {
    case .start:
      var length: StartLength?
      if let raw = fields["seconds"] {
        guard let value = raw.integer, SessionRecord.secondsRange.contains(value) else {
          return .failure(
            "seconds must be an integer from \(SessionRecord.secondsRange.lowerBound) to \(SessionRecord.secondsRange.upperBound)"
          )
        }
        length = .seconds(value)
      }
      if let raw = fields["until"] {
        guard length == nil else { return .failure("give seconds or until, not both") }
        let range = SessionRecord.epochMsRange
        guard let value = raw.integer, range.contains(Int64(value)) else {
          return .failure(
            "until must be an integer from \(range.lowerBound) to \(range.upperBound): a deadline in epoch milliseconds"
          )
        }
        length = .until(Int64(value))
      }
      let finishedLabel: String?
      switch label("finishedLabel", in: fields) {
      case .success(let label): finishedLabel = label
      case .failure(let failure): return .failure(failure)
      }
      var overtime = false
      if let raw = fields["overtime"] {
        guard case .bool(let value) = raw else { return .failure("overtime must be true or false") }
        overtime = value
      }
      let range = RunOptions.levelSecondsRange
      var levels: [Int?] = []
      for name in ["warnAtSeconds", "dangerAtSeconds"] {
        guard let raw = fields[name] else {
          levels.append(nil)
          continue
        }
        guard let value = raw.integer, range.contains(value) else {
          return .failure(
            "\(name) must be an integer from \(range.lowerBound) to \(range.upperBound)")
        }
        levels.append(value)
      }
      let options = RunOptions(
        overtime: overtime, warnAtSeconds: levels[0], dangerAtSeconds: levels[1])
      if let problem = options.problem { return .failure(DecodeFailure(stringLiteral: problem)) }
      return .success(
        .command(
          .start(
            length ?? .seconds(defaultSeconds), finishedLabel: finishedLabel, options: options)))
    case .cancel:
      return .success(.command(.cancel))
    case .stop:
      return .success(.command(.stop))
    case .message:
      switch fields["text"] {
      case .null?:
        return .success(.command(.message(nil)))
      case .string(let text)? where SessionRecord.isValidMessage(text):
        return .success(.command(.message(text)))
      default:
        return .failure(
          "text must be null or a string of 1 to \(SessionRecord.maxMessageLength) characters, none of them a control character"
        )
      }
    case .blackout:
      guard case .bool(let on)? = fields["on"] else { return .failure("on must be true or false") }
      return .success(.command(.blackout(on)))
    case .pause:
      return .success(.command(.pause))
    case .resume:
      return .success(.command(.resume))
    case .adjust:
      let range = SessionRecord.adjustRange
      guard let value = fields["seconds"]?.integer, value != 0, range.contains(value) else {
        return .failure(
          "seconds must be a non-zero integer from \(range.lowerBound) to \(range.upperBound)")
      }
      return .success(.command(.adjust(seconds: value)))
    case .rotateKey:
      return .success(.rotateKey)
    case .wait:
      var timeoutSeconds: Int?
      if let raw = fields["timeoutSeconds"] {
        let range = SessionRecord.timeoutSecondsRange
        guard let value = raw.integer, range.contains(value) else {
          return .failure(
            "timeoutSeconds must be an integer from \(range.lowerBound) to \(range.upperBound)")
        }
        timeoutSeconds = value
      }
      let waitLabel: String?
      let timeoutLabel: String?
      switch (label("label", in: fields), label("timeoutLabel", in: fields)) {
      case (.failure(let failure), _), (_, .failure(let failure)): return .failure(failure)
      case (.success(let first), .success(let second)): (waitLabel, timeoutLabel) = (first, second)
      }
      return .success(
        .command(
          .wait(label: waitLabel, timeoutSeconds: timeoutSeconds, timeoutLabel: timeoutLabel)))
    case .done, .fail:
      switch label("label", in: fields) {
      case .success(let label):
        return .success(.command(op == .done ? .done(label: label) : .fail(label: label)))
      case .failure(let failure): return .failure(failure)
      }
    }
  }

  /// An optional label field, checked as a start's `finishedLabel` is.
  private static func label(
    _ name: String, in fields: [String: JSONValue]
  ) -> Result<String?, DecodeFailure> {
    guard let raw = fields[name] else { return .success(nil) }
    guard case .string(let label) = raw, SessionRecord.isValidFinishedLabel(label) else {
      return .failure(
        "\(name) must be a string of 1 to \(SessionConfig.maxFinishedLabelLength) characters, none of them a control character"
      )
    }
    return .success(label)
  }

  /// The message of a field's `bad_request`.
  private struct DecodeFailure: Error, ExpressibleByStringInterpolation {
    let message: String
    init(stringLiteral value: String) { message = value }
    init(stringInterpolation: DefaultStringInterpolation) {
      message = String(stringInterpolation: stringInterpolation)
    }
  }
}
