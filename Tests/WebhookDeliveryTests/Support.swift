import CountdownCore
import Foundation
import Observability

#if canImport(Glibc)
  import Glibc
#endif

/// Waits on a condition without sleeping: every change signals the waiters.
final class Watched<State>: @unchecked Sendable {
  private let condition = NSCondition()
  private var state: State

  init(_ state: State) { self.state = state }

  func update<Result, Failure: Error>(_ body: (inout State) throws(Failure) -> Result)
    throws(Failure) -> Result
  {
    condition.lock()
    defer {
      condition.broadcast()
      condition.unlock()
    }
    return try body(&state)
  }

  var value: State { update { $0 } }

  /// True when `ready` came to hold within `seconds`.
  func wait(seconds: Double = 10, until ready: (State) -> Bool) -> Bool {
    let deadline = Date(timeIntervalSinceNow: seconds)
    condition.lock()
    defer { condition.unlock() }
    while !ready(state) {
      guard condition.wait(until: deadline) else { return ready(state) }
    }
    return true
  }
}

/// An outbox in memory, for the deliverer's tests: entries are due at their
/// `at`, handed out once until settled or retried, and every call is kept.
final class MemoryOutbox: WebhookOutbox, @unchecked Sendable {
  enum Call: Equatable {
    case take(limit: Int)
    case delivered(String)
    case dead(String)
    case retry(String, attempts: Int, at: Int64)
    case handBack([String])
  }

  struct State {
    var waiting: [(entry: OutboxEntry, at: Int64)] = []
    var calls: [Call] = []
    var handedOut: Set<String> = []
    /// `take` throws while set, as an outbox whose database is gone would.
    var failTakes = false
  }

  struct Broken: Error {}

  let state = Watched(State())

  func add(_ event: WebhookEvent, handle: String, attempts: Int = 0, at: Int64 = 0) {
    state.update {
      $0.waiting.append((OutboxEntry(event: event, attempts: attempts, handle: handle), at))
    }
  }

  func take(limit: Int, now: Int64) throws -> [OutboxEntry] {
    try state.update { state throws(Broken) in
      state.calls.append(.take(limit: limit))
      if state.failTakes { throw Broken() }
      var taken: [OutboxEntry] = []
      for item in state.waiting
      where taken.count < limit && item.at <= now && !state.handedOut.contains(item.entry.handle) {
        taken.append(item.entry)
        state.handedOut.insert(item.entry.handle)
      }
      return taken
    }
  }

  func delivered(_ entry: OutboxEntry) throws { settle(entry, .delivered(entry.handle)) }
  func dead(_ entry: OutboxEntry) throws { settle(entry, .dead(entry.handle)) }

  func retry(_ entry: OutboxEntry, attempts: Int, at: Int64) throws {
    state.update { state in
      state.calls.append(.retry(entry.handle, attempts: attempts, at: at))
      if let index = state.waiting.firstIndex(where: { $0.entry.handle == entry.handle }) {
        state.waiting[index].entry.attempts = attempts
        state.waiting[index].at = at
      }
    }
  }

  func handBack(_ entries: [OutboxEntry]) throws {
    state.update { state in
      state.calls.append(.handBack(entries.map(\.handle)))
      state.handedOut.subtract(entries.map(\.handle))
    }
  }

  private func settle(_ entry: OutboxEntry, _ call: Call) {
    state.update { state in
      state.calls.append(call)
      state.waiting.removeAll { $0.entry.handle == entry.handle }
      state.handedOut.remove(entry.handle)
    }
  }

  /// The calls other than `take`, in order.
  var settlements: [Call] {
    state.value.calls.filter { if case .take = $0 { false } else { true } }
  }
}

/// A real HTTP/1.1 receiver on a loopback port: reads each request whole
/// (headers and Content-Length body) and answers with the status `answer`
/// gives, or never (nil), as a receiver that hangs would.
final class Receiver: @unchecked Sendable {
  struct Request: Equatable {
    var method: String
    var path: String
    var headers: [String: String]
    var body: [UInt8]
    /// When it arrived, on the monotonic clock (seconds).
    var arrivedAt = 0.0
  }

  let port: Int
  let requests = Watched([Request]())
  private let listener: Int32
  private let answer: @Sendable (Request, Int) -> Int?

  /// `answer` gets the request and how many came before it.
  init(answer: @escaping @Sendable (Request, Int) -> Int?) throws {
    self.answer = answer
    let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    self.listener = listener
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    address.sin_port = 0
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    let bound = withUnsafeMutablePointer(to: &address) { pointer in
      pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { socketAddress in
        bind(listener, socketAddress, length) == 0 && listen(listener, 64) == 0
          && getsockname(listener, socketAddress, &length) == 0
      }
    }
    guard bound else { throw POSIXError(.EADDRNOTAVAIL) }
    port = Int(UInt16(bigEndian: address.sin_port))
    Thread.detachNewThread { [self] in accepting() }
  }

  var url: String { "http://127.0.0.1:\(port)/hook" }

  deinit {
    shutdown(listener, Int32(SHUT_RDWR))
    close(listener)
  }

  private func accepting() {
    while true {
      let client = accept(listener, nil, nil)
      guard client >= 0 else { return }
      Thread.detachNewThread { [self] in serve(client) }
    }
  }

  private func serve(_ client: Int32) {
    defer { close(client) }
    var buffer: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: 65536)
    while true {
      // Headers end at the first blank line; the body is Content-Length bytes.
      var request: Request?
      while request == nil {
        if let parsed = Self.parse(&buffer) {
          request = parsed
          break
        }
        let count = read(client, &chunk, chunk.count)
        guard count > 0 else { return }
        buffer += chunk[0..<count]
      }
      guard var request else { return }
      request.arrivedAt = ProcessInfo.processInfo.systemUptime
      let before = requests.update { all in
        all.append(request)
        return all.count - 1
      }
      guard let status = answer(request, before) else {
        // Hold the connection open without a word until the client gives up.
        while read(client, &chunk, chunk.count) > 0 {}
        return
      }
      let response = Array("HTTP/1.1 \(status) X\r\nContent-Length: 2\r\n\r\nok".utf8)
      guard
        response.withUnsafeBytes({ send(client, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) })
          == response.count
      else { return }
    }
  }

  private static func parse(_ buffer: inout [UInt8]) -> Request? {
    let separator = Array("\r\n\r\n".utf8)
    guard buffer.count >= 4,
      let end = (0...(buffer.count - 4)).first(where: { Array(buffer[$0..<$0 + 4]) == separator })
    else { return nil }
    let head = String(decoding: buffer[0..<end], as: UTF8.self).components(separatedBy: "\r\n")
    let requestLine = head[0].split(separator: " ")
    var headers: [String: String] = [:]
    for line in head.dropFirst() {
      guard let colon = line.firstIndex(of: ":") else { continue }
      headers[line[..<colon].lowercased()] = line[line.index(after: colon)...]
        .trimmingCharacters(in: .whitespaces)
    }
    let length = Int(headers["content-length"] ?? "0") ?? 0
    guard buffer.count >= end + 4 + length else { return nil }
    let body = Array(buffer[(end + 4)..<(end + 4 + length)])
    buffer.removeFirst(end + 4 + length)
    return Request(
      method: String(requestLine.first ?? ""),
      path: requestLine.count > 1 ? String(requestLine[1]) : "", headers: headers, body: body)
  }
}

/// A finished run's event, built by the core as every recorder builds it.
func sampleEvent(
  _ type: WebhookEventType = .finished, session: String = "team-a", seq: UInt64 = 3,
  at: Int64 = 1_700_000_000_000
) -> WebhookEvent {
  let record = SessionRecord(.finished(.elapsed), duration: 5, seq: seq, updatedAt: at)
  return WebhookEvent(
    type, session: session, record: record, at: at, config: SessionConfig.Shared(SessionConfig()))
}

/// A loopback port nothing listens on: bound by the kernel's choice, then closed.
func closedPort() -> Int {
  let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
  defer { close(fd) }
  var address = sockaddr_in()
  address.sin_family = sa_family_t(AF_INET)
  address.sin_addr.s_addr = inet_addr("127.0.0.1")
  var length = socklen_t(MemoryLayout<sockaddr_in>.size)
  _ = withUnsafeMutablePointer(to: &address) { pointer in
    pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
      bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0
    }
  }
  return Int(UInt16(bigEndian: address.sin_port))
}

/// A logger writing to a file of its own, read back by the test.
final class CapturedLog {
  let logger: Logger
  private let path: String
  private let fd: Int32

  init() throws {
    path =
      FileManager.default.temporaryDirectory.appendingPathComponent(
        "webhook-log-\(getpid())-\(UInt32.random(in: 0...UInt32.max)).log"
      ).path
    fd = open(path, O_CREAT | O_WRONLY | O_TRUNC, 0o600)
    guard fd >= 0 else { throw POSIXError(.EIO) }
    logger = Logger(level: .info, format: .json, output: fd)
  }

  /// Every line logged so far.
  func text() throws -> String {
    logger.flush()
    return try String(contentsOfFile: path, encoding: .utf8)
  }

  deinit {
    close(fd)
    unlink(path)
  }
}
