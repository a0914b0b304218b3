import Foundation

#if canImport(FoundationNetworking)
  import FoundationNetworking
#endif

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
    var watch = SessionWatch(
      session: session, backoff: configuration.reconnectBackoff,
      maxRetryAfter: configuration.maxRetryAfter)
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
    let stream = openStream(req)
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
          stream.taken(data.count)
          // A refusal's body: its error object, if any, a few KB at most.
          if body.count < 4096 { body.append(data.prefix(4096 - body.count)) }
        case .data(let data):
          stream.taken(data.count)
          let events: [ServerSentEvent]
          do { events = try parser.feed(data) } catch {
            return .badResponse(status: 200, "\(error)")
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

extension CountdownClient {
  /// The stream's transport: on Linux a connection of its own (URLSession's spins there
  /// while a stream is idle: see `SocketStream`), else URLSession.
  func openStream(_ req: URLRequest) -> any StreamConnection {
    #if canImport(Glibc)
      return SocketStream(
        req, connectTimeout: configuration.requestTimeout, caFile: configuration.caFile)
    #else
      return StreamingRequest(req)
    #endif
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
