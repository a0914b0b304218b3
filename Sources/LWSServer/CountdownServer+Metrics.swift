import CountdownCore
import Observability

extension CountdownServer {
  /// Called once per service-loop iteration with its busy time.
  public func recordLoopIteration(seconds: Double) {
    network.loopSeconds.observe(seconds)
    network.loopSecondsMax = max(network.loopSecondsMax, seconds)
  }

  func collectNetwork(into writer: inout MetricsWriter) {
    writer.single(
      "countdown_connections_open", .gauge,
      help: "Open viewer connections (WebSocket and event stream).",
      Double(openSockets))
    writer.single(
      "countdown_connections_accepted_total", .counter,
      help:
        "Connections that completed the handshake (WebSocket) or began their stream (event stream).",
      Double(network.accepted))
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
    writer.single(
      "countdown_service_loop_max_seconds", .gauge,
      help: "The longest service-loop iteration since start (thread CPU time).",
      network.loopSecondsMax)
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

  // MARK: Close codes, for countdown_connections_closed_total

  /// The server is closing `wsi` with `code`; the first code on a connection counts.
  func closing(_ wsi: Wsi, code: CloseCode, reason: String) {
    guard table.noteClose(wsi, label: NetworkStats.label(forCode: code.rawValue)) else { return }
    switch code {
    case .policyViolation:
      Logger.shared.warn(
        "flood_closed", ["code": LogValue(code.rawValue), "reason": LogValue(reason)])
    case .goingAway: break
    default:
      Logger.shared.info(
        "connection_closed", ["code": LogValue(code.rawValue), "reason": LogValue(reason)])
    }
  }

  func peerClosing(_ wsi: Wsi, code: UInt16) {
    _ = table.noteClose(wsi, label: NetworkStats.label(forCode: code))
  }

  func countClosed(_ wsi: Wsi, lwsSentClose: Bool) {
    let code = table.takeCloseCode(wsi) ?? (lwsSentClose ? "unknown" : "1006")
    network.closed[code, default: 0] += 1
  }
}
