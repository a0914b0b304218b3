import CountdownCore
import Testing

@testable import RedisCluster

/// countdown.lua and the Swift schema name the same command layout: the
/// ARGV slots CommandCall fills, and the ops SessionCommand has. Read from
/// the library's text, so a slot renumbered or an op added on one side only
/// fails here rather than as a wrong command in a cluster.
@Suite struct FunctionLayoutTests {
  /// What is wrong with `source`'s command layout against the Swift schema;
  /// empty when they agree.
  static func problems(in source: String) -> [String] {
    var problems: [String] = []
    guard let table = argTable(in: source) else { return ["no `local ARG = {...}` table"] }
    let swift = Dictionary(
      uniqueKeysWithValues: CommandCall.Slot.allCases.map { ("\($0)", $0.rawValue) })
    for (name, slot) in table.sorted(by: { $0.value < $1.value }) where swift[name] != slot {
      problems.append("ARG.\(name) = \(slot), Swift has \(swift[name].map(String.init) ?? "none")")
    }
    for (name, slot) in swift.sorted(by: { $0.value < $1.value }) where table[name] == nil {
      problems.append("Swift slot \(name) = \(slot) is not in ARG")
    }
    guard let body = commandBody(in: source) else {
      return problems + ["no `local function command(keys, args)`"]
    }
    for read in matches(of: /args\[([^\]]*)\]/, in: body) {
      if let name = read.wholeMatch(of: /ARG\.(\w+)/)?.1 {
        if table[String(name)] == nil { problems.append("command reads args[\(read)], not in ARG") }
      } else {
        problems.append("command reads args[\(read)] by number, not by ARG name")
      }
    }
    let rules = Set(source.matches(of: /\nfunction RULES\.(\w+)\(/).map { String($0.1) })
    let ops = Set(SessionCommand.Op.allCases.map(\.rawValue))
    for op in ops.subtracting(rules).sorted() { problems.append("no RULES.\(op) for Swift's op") }
    for op in rules.subtracting(ops).sorted() { problems.append("RULES.\(op) is no Swift op") }
    return problems
  }

  /// `name = number` pairs of the `local ARG = { ... }` table, or nil without one.
  static func argTable(in source: String) -> [String: Int]? {
    guard let table = source.firstMatch(of: /\nlocal ARG = \{([^}]*)\}/)?.1 else { return nil }
    var slots: [String: Int] = [:]
    for pair in table.matches(of: /(\w+)\s*=\s*(\d+)/) {
      guard let slot = Int(pair.2), slots.updateValue(slot, forKey: String(pair.1)) == nil else {
        return nil
      }
    }
    return slots
  }

  /// The text of countdown_v3_command's Lua function, up to its closing `end`.
  static func commandBody(in source: String) -> Substring? {
    guard let start = source.range(of: "\nlocal function command(keys, args)\n"),
      let end = source[start.upperBound...].range(of: "\nend\n")
    else { return nil }
    return source[start.upperBound..<end.lowerBound]
  }

  static func matches(of regex: Regex<(Substring, Substring)>, in text: Substring) -> [Substring] {
    text.matches(of: regex).map(\.1)
  }

  /// The library as shipped reads every slot by the number CommandCall puts
  /// it at, and has rules for exactly the ops of SessionCommand.
  @Test func luaLayoutMatchesSwift() throws {
    #expect(Self.problems(in: FunctionLibrary.source) == [])
    let table = try #require(Self.argTable(in: FunctionLibrary.source))
    #expect(table.count == CommandCall.Slot.allCases.count)
    // Slots are 1...n in declaration order, as `arguments` lays them out.
    #expect(CommandCall.Slot.allCases.map(\.rawValue) == Array(1...CommandCall.Slot.allCases.count))
  }

  /// Each kind of drift is caught: a slot renumbered, a slot missing, a read
  /// by number, an op with no rules, a rule with no op.
  @Test func driftIsCaught() {
    let source = FunctionLibrary.source
    let mutations: [(String, String, String)] = [
      ("renumbered", "nonce = 15", "nonce = 14"),
      ("missing", "presented = 16,", ""),
      ("extra", "presented = 16,", "presented = 16, spare = 17,"),
      ("by number", "args[ARG.presented]", "args[16]"),
      ("events renumbered", "events = 23", "events = 24"),
      ("events read by number", "args[ARG.events]", "args[23]"),
      ("an option renumbered", "dangerOption = 32", "dangerOption = 31"),
      ("a record slot missing", "baseMessage = 28,", ""),
      ("a rule of a new op missing", "function RULES.blackout(", "function RULES.blank("),
      ("unknown name", "args[ARG.nonce]", "args[ARG.nonse]"),
      ("rule missing", "function RULES.pause(", "function RULES.hold("),
      ("table gone", "local ARG = {", "local SLOTS = {"),
    ]
    for (name, from, to) in mutations {
      #expect(source.contains(from), "\(name): the library no longer holds \(from)")
      let mutated = source.replacingOccurrences(of: from, with: to)
      #expect(!Self.problems(in: mutated).isEmpty, "\(name) went unnoticed")
    }
  }

  /// The argv CommandCall builds puts each value at its slot: a record's
  /// fields, a command's operands and the optional tail.
  @Test func argumentsFillTheirSlots() {
    let hash = KeyHash(of: "k")
    let arguments = CommandCall.arguments(
      .start(
        .until(1_700_000_060_000), finishedLabel: "fin",
        options: RunOptions(overtime: true, warnAtSeconds: 120, dangerAtSeconds: 30)),
      base: SessionRecord.Fields(
        phase: .paused, duration: 9, remainingMs: 4000, revision: 3, overtime: true,
        warnAtSeconds: 60, dangerAtSeconds: 10, message: "Wrap up", blackout: true),
      session: "s", epoch: "E", channel: "c", deadline: 77, nonce: "n", presented: hash,
      byToken: true, fingerprint: "start until 1700000060000 fin", events: true,
      limits: IdempotencyLimits(perSession: 7, perAddress: 8, total: 9))
    #expect(arguments.count == CommandCall.Slot.allCases.count)
    let expected: [CommandCall.Slot: String] = [
      .epoch: "E", .channel: "c", .session: "s", .op: "start", .first: "until",
      .second: "1700000060000", .label: "fin", .phase: "paused", .duration: "9", .endsAt: "-",
      .remainingMs: "4000", .revision: "3", .baseLabel: "", .deadline: "77", .nonce: "n",
      .presented: hash.hex, .startedAt: "-", .timeoutAt: "-", .outcome: "", .baseWaitLabel: "",
      .byToken: "1", .fingerprint: "start until 1700000060000 fin", .events: "1",
      .overtime: "1", .warnAtSeconds: "60", .dangerAtSeconds: "10", .overMs: "-",
      .baseMessage: "Wrap up", .blackout: "1", .overtimeOption: "1", .warnOption: "120",
      .dangerOption: "30", .idemPerSession: "7", .idemPerAddress: "8", .idemTotal: "9",
    ]
    for slot in CommandCall.Slot.allCases {
      #expect(arguments[slot.index] == expected[slot], "\(slot)")
    }
  }

  /// A wait's operands and a waiting base fill their slots too, and so do a
  /// finished base's outcome and done's label.
  @Test func waitArgumentsFillTheirSlots() {
    let wait = CommandCall.arguments(
      .wait(label: "Deploying", timeoutSeconds: 900, timeoutLabel: "Late"),
      base: SessionRecord.Fields(
        phase: .waiting, finishedLabel: "t", updatedAt: 5, startedAt: 4, timeoutAt: 9000,
        waitLabel: "w"),
      session: "s", epoch: "E", channel: "c")
    let expected: [CommandCall.Slot: String] = [
      .op: "wait", .first: "900", .second: "Late", .label: "Deploying", .phase: "waiting",
      .baseLabel: "t", .startedAt: "4", .timeoutAt: "9000", .outcome: "", .baseWaitLabel: "w",
    ]
    for (slot, value) in expected { #expect(wait[slot.index] == value, "\(slot)") }
    let done = CommandCall.arguments(
      .done(label: "Deployed"), base: SessionRecord.Fields(phase: .finished, outcome: .timeout),
      session: "s", epoch: "E", channel: "c")
    #expect(done[CommandCall.Slot.label.index] == "Deployed")
    #expect(done[CommandCall.Slot.first.index] == "")
    #expect(done[CommandCall.Slot.outcome.index] == "timeout")
    #expect(done[CommandCall.Slot.startedAt.index] == "-")
  }

  /// The new ops' operands and a stopped base: a message's text goes where
  /// labels go, marked set ('1') so an empty one is not taken for a clear;
  /// a start without options still says so; other ops leave the options empty.
  @Test func stageArgumentsFillTheirSlots() {
    func call(_ command: SessionCommand, _ base: SessionRecord.Fields = .init()) -> [String] {
      CommandCall.arguments(command, base: base, session: "s", epoch: "E", channel: "c")
    }
    func slots(_ arguments: [String], _ slots: [CommandCall.Slot]) -> [String] {
      slots.map { arguments[$0.index] }
    }
    let operands: [CommandCall.Slot] = [.op, .first, .second, .label]
    #expect(slots(call(.message("Wrap up")), operands) == ["message", "1", "", "Wrap up"])
    #expect(slots(call(.message("")), operands) == ["message", "1", "", ""])
    #expect(slots(call(.message(nil)), operands) == ["message", "", "", ""])
    #expect(slots(call(.blackout(true)), operands) == ["blackout", "1", "", ""])
    #expect(slots(call(.blackout(false)), operands) == ["blackout", "0", "", ""])
    #expect(slots(call(.stop), operands) == ["stop", "", "", ""])
    let options: [CommandCall.Slot] = [.overtimeOption, .warnOption, .dangerOption]
    #expect(slots(call(.start(.seconds(5), finishedLabel: nil)), options) == ["0", "", ""])
    #expect(
      slots(
        call(.start(.seconds(5), finishedLabel: nil, options: RunOptions(warnAtSeconds: 9))),
        options) == ["0", "9", ""])
    #expect(slots(call(.stop), options) == ["", "", ""])
    let stopped = call(
      .cancel, SessionRecord.Fields(phase: .finished, outcome: .stopped, overMs: 12_345))
    #expect(
      slots(stopped, [.outcome, .overMs, .overtime, .warnAtSeconds, .baseMessage, .blackout]) == [
        "stopped", "12345", "0", "-", "", "0",
      ])
  }
}
