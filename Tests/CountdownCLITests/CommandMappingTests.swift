import CountdownClient
import Foundation
import Testing

@testable import CountdownCLI

@Suite struct CommandMappingTests {
  /// Each one-shot action becomes the command of the same name with its operands.
  @Test func actionsBecomeCommands() throws {
    let now = Date(timeIntervalSince1970: 1_796_024_361)
    #expect(
      try oneShot(.start(seconds: 90, until: nil, finishLabel: "Go"), now: now)
        == .start(seconds: 90, finishLabel: "Go"))
    #expect(try oneShot(.adjust(seconds: -60), now: now) == .adjust(seconds: -60))
    #expect(
      try oneShot(.wait(label: "D", timeoutSeconds: 9, timeoutLabel: "T"), now: now)
        == .wait(label: "D", timeoutSeconds: 9, timeoutLabel: "T"))
    #expect(try oneShot(.fail(label: nil), now: now) == .fail(label: nil))
    #expect(try oneShot(.cancel, now: now) == .cancel)
  }

  /// --until HH:MM is the next such local time after now, and anything else is a usage error.
  @Test func untilTimeOfDay() throws {
    var calendar = Calendar(identifier: .gregorian)
    calendar.timeZone = TimeZone(identifier: "UTC")!
    let now = Date(timeIntervalSince1970: 1_796_024_361)  // 2026-11-30 07:39:21 UTC
    guard
      case .startUntil(let ms, nil, _) = try oneShot(
        .start(seconds: nil, until: "18:30", finishLabel: nil), now: now, calendar: calendar)
    else {
      Issue.record("not a start until")
      return
    }
    #expect(ms == 1_796_063_400_000)
    for bad in ["25:00", "18:60", "1830", "18:30:00", "-1:00", "", "18:3", "１８:３０"] {
      #expect(throws: UsageError.self, "\(bad)") {
        try oneShot(
          .start(seconds: nil, until: bad, finishLabel: nil), now: now, calendar: calendar)
      }
    }
  }

  /// --exit-on-finish's status: 0 for elapsed or done, 1 for failed or timeout, none before.
  @Test func finishStatuses() {
    func state(_ phase: Phase, _ outcome: Outcome?) -> SessionState {
      SessionState(
        phase: phase, spinner: false, enabled: true, label: "", remaining: 0, duration: 0,
        endsAt: nil, remainingMs: nil, startedAt: nil, timeoutAt: nil, outcome: outcome,
        viewers: 0, stale: false)
    }
    #expect(finishStatus(state(.finished, .elapsed)) == 0)
    #expect(finishStatus(state(.finished, .done)) == 0)
    #expect(finishStatus(state(.finished, .failed)) == 1)
    #expect(finishStatus(state(.finished, .timeout)) == 1)
    #expect(finishStatus(state(.waiting, nil)) == nil)
    #expect(finishStatus(state(.idle, nil)) == nil)
  }
}
