import Foundation
import Testing

@testable import CountdownCore

/// The page and the server share one contract, `Public/constants.js`; these
/// tests read it and fail when the Swift side says anything else.
@Suite struct ContractTests {
  static func contract() throws -> [String: Any] {
    let url = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
      .appendingPathComponent("../../Public/constants.js").standardized
    let text = try String(contentsOf: url, encoding: .utf8)
    let declaration = try #require(text.range(of: "CONTRACT = Object.freeze("))
    let open = try #require(text[declaration.upperBound...].firstIndex(of: "{"))
    let close = try #require(text.lastIndex(of: "}"))
    let json = Data(text[open...close].utf8)
    return try #require(try JSONSerialization.jsonObject(with: json) as? [String: Any])
  }

  func range(_ value: Any?) -> ClosedRange<Int>? {
    guard let object = value as? [String: Any], let min = object["min"] as? Int,
      let max = object["max"] as? Int
    else { return nil }
    return min...max
  }

  /// Every error code, and only those, is in the page's list.
  @Test func errorCodes() throws {
    let page = try #require(try Self.contract()["errorCodes"] as? [String])
    #expect(Set(page) == Set(ErrorCode.allCases.map(\.rawValue)))
    #expect(page.count == ErrorCode.allCases.count)
  }

  /// Close codes match by value.
  @Test func closeCodes() throws {
    let page = try #require(try Self.contract()["closeCodes"] as? [String: Int])
    #expect(Set(page.values) == Set(CloseCode.allCases.map { Int($0.rawValue) }))
    #expect(page["policyViolation"] == Int(CloseCode.policyViolation.rawValue))
    #expect(page["tryAgainLater"] == Int(CloseCode.tryAgainLater.rawValue))
    #expect(page["goingAway"] == Int(CloseCode.goingAway.rawValue))
  }

  /// Command limits: seconds, adjust, until, the finished label and the message size.
  @Test func limits() throws {
    let contract = try Self.contract()
    #expect(range(contract["seconds"]) == SessionRecord.secondsRange)
    #expect(range(contract["adjustSeconds"]) == SessionRecord.adjustRange)
    #expect(
      range(contract["untilAheadMs"]).map { Int64($0.lowerBound)...Int64($0.upperBound) }
        == SessionRecord.aheadMsRange)
    #expect(contract["finishedLabelMaxLength"] as? Int == SessionConfig.maxFinishedLabelLength)
    #expect(range(contract["timeoutSeconds"]) == SessionRecord.timeoutSecondsRange)
    #expect(contract["waitLabelMaxLength"] as? Int == SessionConfig.maxFinishedLabelLength)
    #expect(contract["maxMessageBytes"] as? Int == WireCodec.maxMessageBytes)
    #expect(range(contract["levelSeconds"]) == RunOptions.levelSecondsRange)
    #expect(contract["messageMaxLength"] as? Int == SessionRecord.maxMessageLength)
    #expect(
      (contract["maxOvertimeSeconds"] as? Int).map { Int64($0) * 1000 }
        == SessionRecord.maxOvertimeMs)
  }

  /// The ranges every number is checked against before arithmetic: moments,
  /// durations, ids, a ping's t and the input an error may quote.
  @Test func valueRanges() throws {
    let contract = try Self.contract()
    #expect(
      range(contract["epochMs"]).map { Int64($0.lowerBound)...Int64($0.upperBound) }
        == SessionRecord.epochMsRange)
    #expect(range(contract["durationSeconds"]) == SessionRecord.durationRange)
    let id = try #require(contract["idMaxLength"] as? [String: Int])
    #expect(id["string"] == CommandID.maxStringLength)
    #expect(contract["pingTMaxLength"] as? Int == WireCodec.maxPingTLength)
    #expect(contract["errorEchoMaxLength"] as? Int == WireCodec.maxEchoLength)
  }

  /// The ops the page knows that Swift does not, and those Swift has that the page lacks.
  static func opDifferences(_ page: [String]) -> Set<String> {
    let swift =
      SessionCommand.Op.allCases.map(\.rawValue) + ClientRequest.MessageOp.allCases.map(\.rawValue)
    return Set(page).symmetricDifference(swift)
  }

  /// The page's ops are exactly the session commands' and the other messages'.
  @Test func opsAreTheSchemas() throws {
    let page = try #require(try Self.contract()["ops"] as? [String])
    #expect(Self.opDifferences(page) == [])
    #expect(page.count == Set(page).count, "an op listed twice")
    // It notices either side drifting: an op the page lacks, one Swift lacks.
    #expect(Self.opDifferences(page.filter { $0 != "pause" }) == ["pause"])
    #expect(Self.opDifferences(page + ["reset"]) == ["reset"])
  }

  /// Phases, default labels, ops, the subprotocol and the session id rule.
  @Test func vocabulary() throws {
    let contract = try Self.contract()
    #expect(contract["phases"] as? [String] == Phase.allCases.map(\.rawValue))
    let labels = try #require(contract["labels"] as? [String: String])
    #expect(labels["idle"] == SessionConfig().idleLabel)
    #expect(labels["finished"] == SessionConfig().finishedLabel)
    #expect(labels["waiting"] == SessionConfig().waitingLabel)
    #expect(labels["done"] == SessionConfig().finishedLabel(for: .done))
    #expect(labels["failed"] == SessionConfig().finishedLabel(for: .failed))
    #expect(labels["timeout"] == SessionConfig().finishedLabel(for: .timeout))
    #expect(labels["stopped"] == SessionConfig().finishedLabel(for: .stopped))
    #expect(contract["outcomes"] as? [String] == Outcome.allCases.map(\.rawValue))
    #expect(contract["levels"] as? [String] == Level.allCases.map(\.rawValue))
    #expect(contract["subprotocol"] as? String == "countdown.v1")
    #expect(contract["sessionIdMaxLength"] as? Int == SessionID.maxLength)
    let ops = try #require(contract["ops"] as? [String])
    for op in ops {
      let text =
        switch op {
        case "adjust": #"{"op":"adjust","seconds":1}"#
        case "ping": #"{"op":"ping","t":1}"#
        case "auth": #"{"op":"auth","key":"k"}"#
        case "message": #"{"op":"message","text":"Wrap up"}"#
        case "blackout": #"{"op":"blackout","on":true}"#
        default: #"{"op":"\#(op)"}"#
        }
      #expect((try? WireCodec.decode(Array(text.utf8), defaultSeconds: 5).get()) != nil, "op \(op)")
    }
    let pattern = try #require(contract["sessionIdPattern"] as? String)
    let regex = try Regex(pattern)
    for id in [
      "a", "A-b_9", String(repeating: "x", count: 64), "", "a b", "é",
      String(repeating: "x", count: 65),
    ] {
      let pageAccepts = (try? regex.wholeMatch(in: id)) != nil
      #expect(pageAccepts == SessionID.isValid(id), "id \(id)")
    }
  }
}

extension ContractTests {
  /// The contract's wait limits are where the decoder puts them: the ends of
  /// timeoutSeconds decode and one past each does not, and a label of
  /// waitLabelMaxLength characters decodes where one more does not.
  @Test func waitLimitsDecodeAtTheirEdges() throws {
    let contract = try Self.contract()
    let timeout = try #require(range(contract["timeoutSeconds"]))
    let maxLabel = try #require(contract["waitLabelMaxLength"] as? Int)
    func decodes(_ text: String) -> Bool {
      (try? WireCodec.decode(Array(text.utf8), defaultSeconds: 5).get()) != nil
    }
    #expect(decodes(#"{"op":"wait","timeoutSeconds":\#(timeout.lowerBound)}"#))
    #expect(decodes(#"{"op":"wait","timeoutSeconds":\#(timeout.upperBound)}"#))
    #expect(!decodes(#"{"op":"wait","timeoutSeconds":\#(timeout.lowerBound - 1)}"#))
    #expect(!decodes(#"{"op":"wait","timeoutSeconds":\#(timeout.upperBound + 1)}"#))
    for op in ["wait", "done", "fail"] {
      let fits = String(repeating: "é", count: maxLabel)
      #expect(decodes(#"{"op":"\#(op)","label":"\#(fits)"}"#), "\(op)")
      #expect(!decodes(#"{"op":"\#(op)","label":"\#(fits)é"}"#), "\(op)")
    }
  }
}
