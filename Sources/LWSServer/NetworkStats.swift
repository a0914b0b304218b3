import CountdownCore
import Observability

/// Why an upgrade (or, for `sessionCap`, a join just after it) was refused.
public enum RefusalCause: String, CaseIterable, Sendable {
  case badVersion = "bad_version"
  case badKey = "bad_key"
  case badSessionID = "bad_session_id"
  case origin
  case perIP = "per_ip"
  case totalCap = "total_cap"
  case draining
  case sessionCap = "session_cap"

  /// The HTTP status of a refusal during the handshake.
  var status: UInt32 {
    switch self {
    case .badVersion: 426
    case .badKey: 400
    case .badSessionID: 404
    case .origin: 403
    case .perIP: 429
    case .totalCap, .draining, .sessionCap: 503
    }
  }
}

/// The network layer's counters: plain integers bumped on the service thread
/// by the events that change them, so a render reads them in O(1).
struct NetworkStats {
  var accepted: UInt64 = 0
  /// By close code (as a label value): what either side sent first, "1006"
  /// when the TCP connection ended without a Close, "unknown" when lws sent a
  /// Close of its own (1002 or 1007; lws 4.1.6 does not say which).
  var closed: [String: UInt64] = [:]
  var refused = [UInt64](repeating: 0, count: RefusalCause.allCases.count)
  var framesSent: UInt64 = 0
  var bytesSent: UInt64 = 0
  /// Busy time of one service-loop iteration: thread CPU time, so the wait
  /// in poll() is not counted.
  var loopSeconds = Histogram(bounds: [
    0.000_05, 0.000_1, 0.000_25, 0.000_5, 0.001, 0.002_5, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1,
  ])

  static let loopBoundLabels = MetricsWriter.boundLabels(NetworkStats().loopSeconds.bounds)
  static let latenessBounds = HubStats().tickLatenessMs.bounds
  static let latenessBoundLabels = MetricsWriter.boundLabels(latenessBounds, scale: 0.001)

  mutating func refuse(_ cause: RefusalCause) {
    refused[RefusalCause.allCases.firstIndex(of: cause)!] += 1
  }

  /// A client may send any code; codes outside the registered range share one label.
  static func label(forCode code: UInt16) -> String {
    (1000...1015).contains(code) || code == 4000 ? String(code) : "other"
  }
}

extension CountdownServer {
  /// Called once per service-loop iteration with its busy time.
  public func recordLoopIteration(seconds: Double) {
    network.loopSeconds.observe(seconds)
  }

  func collectNetwork(into writer: inout MetricsWriter) {
    writer.single(
      "countdown_connections_open", .gauge, help: "Open WebSocket connections.",
      Double(openSockets))
    writer.single(
      "countdown_connections_accepted_total", .counter,
      help: "WebSocket connections that completed the handshake.", Double(network.accepted))
    writer.family(
      "countdown_connections_closed_total", .counter,
      help: "WebSocket connections closed, by the close code either side sent first "
        + "(1006: none, the TCP connection ended; unknown: a Close lws sent itself).")
    for (code, count) in network.closed.sorted(by: { $0.key < $1.key }) {
      writer.sample("countdown_connections_closed_total", ["code": code], Double(count))
    }
    writer.family(
      "countdown_upgrades_refused_total", .counter,
      help: "WebSocket upgrades refused, by cause (session_cap: refused by the hub just after it).")
    for (index, cause) in RefusalCause.allCases.enumerated() {
      writer.sample(
        "countdown_upgrades_refused_total", ["cause": cause.rawValue],
        Double(network.refused[index]))
    }
    writer.histogram(
      "countdown_service_loop_seconds",
      help: "Busy (thread CPU) time of one service-loop iteration, waiting excluded.",
      network.loopSeconds, boundLabels: NetworkStats.loopBoundLabels)
    writer.singles([
      (
        "countdown_frames_sent_total", .counter, "WebSocket frames written (data and pings).",
        Double(network.framesSent)
      ),
      (
        "countdown_bytes_sent_total", .counter, "WebSocket payload bytes written.",
        Double(network.bytesSent)
      ),
      ("countdown_ready", .gauge, "1 when /readyz answers 200.", isReady ? 1 : 0),
      ("countdown_draining", .gauge, "1 from SIGTERM until the process exits.", draining ? 1 : 0),
    ])
  }
}

/// The hub's counters (`Hub.stats`), rendered without touching a session.
public func collectHubStats(_ hub: Hub, into writer: inout MetricsWriter) {
  let stats = hub.stats
  writer.family("countdown_sessions", .gauge, help: "Live sessions, by phase.")
  for (index, phase) in Phase.allCases.enumerated() where index < stats.sessionsByPhase.count {
    writer.sample(
      "countdown_sessions", ["phase": phase.rawValue], Double(stats.sessionsByPhase[index]))
  }
  writer.family(
    "countdown_commands_total", .counter,
    help: "Commands received, by op and result (ok or the error code).")
  for (op, results) in stats.commands.sorted(by: { $0.key < $1.key }) {
    for (result, count) in results.sorted(by: { $0.key < $1.key }) {
      writer.sample("countdown_commands_total", ["op": op, "result": result], Double(count))
    }
  }
  writer.singles([
    (
      "countdown_sessions_created_total", .counter, "Sessions created.",
      Double(stats.sessionsCreated)
    ),
    (
      "countdown_sessions_forgotten_total", .counter, "Quiet sessions forgotten.",
      Double(stats.sessionsForgotten)
    ),
    (
      "countdown_commands_in_flight", .gauge,
      "Commands waiting for the sequencer to complete them.",
      Double(stats.commandsInFlight)
    ),
    (
      "countdown_patches_merged_total", .counter,
      "Merged catch-up patches sent to viewers that fell behind.", Double(stats.patchesMerged)
    ),
    (
      "countdown_replies_dropped_total", .counter,
      "Acks, errors and pongs dropped: their connection had 16 KiB of replies waiting.",
      Double(stats.repliesDropped)
    ),
  ])
  let lateness = stats.tickLatenessMs
  writer.histogram(
    "countdown_tick_lateness_seconds",
    help: "How late each tick was applied against its deadline.", lateness,
    boundLabels: lateness.bounds == NetworkStats.latenessBounds
      ? NetworkStats.latenessBoundLabels
      : MetricsWriter.boundLabels(lateness.bounds, scale: 0.001),
    scale: 0.001)
}

extension MetricsWriter {
  /// A histogram kept by `Histogram` (of CountdownCore), with its bound labels cached.
  mutating func histogram(
    _ name: String, help: String, _ histogram: Histogram, boundLabels: [String], scale: Double = 1
  ) {
    self.histogram(
      name, help: help, boundLabels: boundLabels, counts: histogram.counts, sum: histogram.sum,
      count: histogram.count, scale: scale)
  }
}
