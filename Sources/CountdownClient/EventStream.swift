import Foundation

#if canImport(FoundationNetworking)
  import FoundationNetworking
#endif

/// One streaming GET, its response handed over as it arrives: the delegate API, which every
/// platform's URLSession has (Linux's has no `bytes(for:)`).
final class StreamingRequest: NSObject, URLSessionDataDelegate, @unchecked Sendable {
  enum Chunk: Sendable {
    case response(status: Int, retryAfter: Double?, isEventStream: Bool)
    case data(Data)
    case end(CountdownError)
  }

  let chunks: AsyncStream<Chunk>
  private let continuation: AsyncStream<Chunk>.Continuation
  private let lock = NSLock()
  private var lastActivity = Date()
  private var session: URLSession?
  private var responded = false

  init(_ request: URLRequest) {
    (chunks, continuation) = AsyncStream.makeStream(of: Chunk.self, bufferingPolicy: .unbounded)
    super.init()
    let config = URLSessionConfiguration.ephemeral
    // The idle limit is the watch's own (`fail(_:)` from its watchdog): a stream is open
    // for hours, and the request timeout would end it.
    config.timeoutIntervalForRequest = 7 * 86400
    config.timeoutIntervalForResource = 7 * 86400
    config.requestCachePolicy = .reloadIgnoringLocalCacheData
    let session = URLSession(configuration: config, delegate: self, delegateQueue: nil)
    self.session = session
    var req = request
    req.timeoutInterval = 7 * 86400
    session.dataTask(with: req).resume()
  }

  /// Seconds since anything arrived (or since the start).
  func idle(at now: Date) -> Double { lock.locked { now.timeIntervalSince(lastActivity) } }

  /// Ends the stream with `error` and lets go of the connection.
  func fail(_ error: CountdownError) {
    continuation.yield(.end(error))
    close()
  }

  func close() {
    continuation.finish()
    let s = lock.locked { () -> URLSession? in
      defer { session = nil }
      return session
    }
    // Breaks the session's strong hold on its delegate.
    s?.invalidateAndCancel()
  }

  private func touch() { lock.locked { lastActivity = Date() } }

  // The status is reported once: from the response callback, or, where that one is not
  // called, from the task when its first bytes (or its end) arrive. Apple's newer SDKs
  // declare the callback's handler @Sendable, and a method that only nearly matches a
  // requirement is never called; Linux's URLSession may not have set `task.response` yet
  // when the first bytes come, so it needs the callback.
  private func reportResponse(_ response: URLResponse?) {
    guard let http = response as? HTTPURLResponse else { return }
    let first = lock.locked { () -> Bool in
      defer { responded = true }
      return !responded
    }
    guard first else { return }
    continuation.yield(
      .response(
        status: http.statusCode,
        retryAfter: CountdownClient.retryAfter(http.value(forHTTPHeaderField: "Retry-After")),
        isEventStream: http.value(forHTTPHeaderField: "Content-Type")?.lowercased()
          .hasPrefix("text/event-stream") == true))
  }

  func urlSession(
    _ session: URLSession, dataTask: URLSessionDataTask, didReceive response: URLResponse,
    completionHandler: @escaping (URLSession.ResponseDisposition) -> Void
  ) {
    touch()
    reportResponse(response)
    completionHandler(.allow)
  }

  func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
    touch()
    reportResponse(dataTask.response)
    continuation.yield(.data(data))
  }

  func urlSession(
    _ session: URLSession, task: URLSessionTask, didCompleteWithError error: (any Error)?
  ) {
    reportResponse(task.response)
    let why = error.map { CountdownClient.describe($0) } ?? "the server ended the stream"
    fail(.unreachable(why))
  }
}

extension CountdownClient {
  /// The session's state as it changes, over the event stream (`GET …/events`): one
  /// element per snapshot or patch applied, and one per change of `connection`.
  ///
  /// A lost stream is reopened after the page's backoff (full jitter, 0.5 s doubling to
  /// 10 s), resuming with `Last-Event-ID`; the server answers with a fresh snapshot, so
  /// nothing missed is lost. The sequence ends only when the server refuses the stream for
  /// good (`.closed`), or when the consumer stops iterating (the stream is closed then).
  /// A consumer that falls behind gets the newest elements: each one is the whole state.
  public func changes() -> AsyncStream<SessionUpdate> {
    let (stream, continuation) = AsyncStream.makeStream(
      of: SessionUpdate.self, bufferingPolicy: .bufferingNewest(256))
    let task = Task { await watch(into: continuation) }
    continuation.onTermination = { _ in task.cancel() }
    return stream
  }

  func watch(into out: AsyncStream<SessionUpdate>.Continuation) async {
    var watch = SessionWatch(session: session, backoff: configuration.reconnectBackoff)
    out.yield(watch.update)
    while !Task.isCancelled {
      let error = await follow(&watch, into: out)
      if Task.isCancelled { break }
      switch watch.lost(error, random: Double.random(in: 0..<1)) {
      case .retry(let after, let update):
        out.yield(update)
        do { try await Task.sleep(nanoseconds: UInt64(after * 1_000_000_000)) } catch { break }
      case .stop(let update):
        out.yield(update)
        out.finish()
        return
      default:
        break
      }
    }
    out.finish()
  }

  /// One connection, followed until it ends; why it ended.
  private func follow(
    _ watch: inout SessionWatch, into out: AsyncStream<SessionUpdate>.Continuation
  ) async -> CountdownError {
    var req = request(endpoint("/events"), method: "GET")
    req.setValue("text/event-stream", forHTTPHeaderField: "Accept")
    // The stream is a viewer's and needs no credential: it does not carry one.
    req.setValue(nil, forHTTPHeaderField: "Authorization")
    if let id = watch.lastEventID { req.setValue(String(id), forHTTPHeaderField: "Last-Event-ID") }
    let sentAt = Date()
    let stream = StreamingRequest(req)
    defer { stream.close() }
    let idleLimit = configuration.streamIdleTimeout
    let watchdog = Task {
      while !Task.isCancelled {
        try await Task.sleep(nanoseconds: 250_000_000)
        if stream.idle(at: Date()) > idleLimit {
          stream.fail(.unreachable("nothing from the server for \(Int(idleLimit)) s"))
          return
        }
      }
    }
    defer { watchdog.cancel() }
    return await withTaskCancellationHandler {
      var parser = EventStreamParser()
      var status = 0
      var retryAfter: Double?
      var body = Data()
      for await chunk in stream.chunks {
        switch chunk {
        case .response(let s, let after, let isEventStream):
          status = s
          retryAfter = after
          if let refused = SessionWatch.refusesStream(status: s, isEventStream: isEventStream) {
            return refused
          }
        case .data(let data) where status != 200:
          // A refusal's body: its error object, if any, a few KB at most.
          if body.count < 4096 { body.append(data.prefix(4096 - body.count)) }
        case .data(let data):
          let events: [ServerSentEvent]
          do { events = try parser.feed(data) } catch {
            return .badResponse(status: 200, "an event-stream line over 64 KB")
          }
          for event in events {
            switch watch.received(event, sentAt: sentAt, at: Date()) {
            case .emit(let update): out.yield(update)
            case .drop(let error): return error
            default: break
            }
          }
        case .end(let error):
          if status != 200, status != 0 {
            return Self.refusal(status: status, body: body, retryAfter: retryAfter)
          }
          return error
        }
      }
      return .unreachable("the stream was closed")
    } onCancel: {
      stream.close()
    }
  }
}

extension NSLock {
  /// `withLock`, which older Apple SDKs lack.
  func locked<T>(_ body: () throws -> T) rethrows -> T {
    lock()
    defer { unlock() }
    return try body()
  }
}
