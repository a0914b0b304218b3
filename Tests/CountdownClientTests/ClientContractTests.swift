import Foundation
import Testing

@testable import CountdownClient

/// The client repeats the contract the page and server share (`Public/constants.js`), since
/// it may not link the server's core; these tests fail when it says anything else.
struct ClientContractTests {
  static func contract() throws -> [String: Any] {
    let url = ServerProcess.root.appendingPathComponent("Public/constants.js")
    let text = try String(contentsOf: url, encoding: .utf8)
    let declaration = try #require(text.range(of: "CONTRACT = Object.freeze("))
    let open = try #require(text[declaration.upperBound...].firstIndex(of: "{"))
    let close = try #require(text.lastIndex(of: "}"))
    return try #require(
      try JSONSerialization.jsonObject(with: Data(text[open...close].utf8)) as? [String: Any])
  }

  func range(_ value: Any?) throws -> ClosedRange<Int64> {
    let object = try #require(value as? [String: Any])
    let min = try #require(object["min"] as? Int)
    let max = try #require(object["max"] as? Int)
    return Int64(min)...Int64(max)
  }

  /// Phases, outcomes and error codes are the contract's, all of them.
  @Test func names() throws {
    let c = try Self.contract()
    #expect(try #require(c["phases"] as? [String]) == Phase.allCases.map(\.rawValue))
    #expect(try #require(c["outcomes"] as? [String]) == Outcome.allCases.map(\.rawValue))
    let codes = try #require(c["errorCodes"] as? [String])
    #expect(
      Set(codes) == Set(ErrorCode.known.map(\.rawValue)) && codes.count == ErrorCode.known.count)
  }

  /// Every op the client sends is one of the contract's; ping and auth stay WebSocket-only.
  @Test func ops() throws {
    let ops = Set(try #require(try Self.contract()["ops"] as? [String]))
    let sent: [Command] = [
      .start(), .startUntil(epochMs: 0), .pause, .resume, .adjust(seconds: 1), .cancel, .wait(),
      .done(), .fail(), .rotateKey, .stop, .message(nil), .blackout(true),
    ]
    #expect(Set(sent.map(\.op)).isSubset(of: ops))
    #expect(ops.subtracting(sent.map(\.op)) == ["ping", "auth"])
  }

  /// The session id rule and the ranges the client checks the server's numbers against.
  @Test func bounds() throws {
    let c = try Self.contract()
    let pattern = try #require(c["sessionIdPattern"] as? String)
    let max = try #require(c["sessionIdMaxLength"] as? Int)
    #expect(pattern == "^[A-Za-z0-9_-]{1,\(max)}$")
    #expect(CountdownClient.isValidSession(String(repeating: "a", count: max)))
    #expect(!CountdownClient.isValidSession(String(repeating: "a", count: max + 1)))
    #expect(try range(c["epochMs"]) == Bounds.epochMs)
    #expect(try range(c["durationSeconds"]) == Bounds.durationSeconds)
  }
}
