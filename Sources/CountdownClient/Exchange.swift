import Foundation

#if canImport(FoundationNetworking)
  import FoundationNetworking
#endif

/// One request and its answer, with what URLSession's async `data(for:)` does not bound: the
/// answer's body is cut off at `maxAnswer` bytes, a redirect is answered as itself (never
/// followed: a command's retried POST would carry its token to wherever the server points),
/// and the whole exchange, not only each silence, ends at its deadline.
extension Exchange {
  /// The largest answer read: an ack or a snapshot is a few KB.
  static let maxAnswer = 1 << 20

  struct Answer: Sendable {
    var status: Int
    var body: Data
    var retryAfter: String?
    var location: String?
  }

  static func tooLarge(status: Int) -> CountdownError {
    .badResponse(status: status, "an answer over \(maxAnswer >> 20) MB, not read further")
  }
}

#if canImport(Glibc)
  /// On Linux, over a `CurlTransfer` (see there why not URLSession).
  final class Exchange: @unchecked Sendable {
    private let lock = NSLock()
    private var status = 0
    private var headers: [HTTPResponseReader.Header] = []
    private var body = Data()
    private var continuation: CheckedContinuation<Answer, any Error>?
    private var transfer: CurlTransfer?
    private var stopped = false

    /// Sends `request` and returns its answer, whatever the status; throws `CountdownError`
    /// (`unreachable` for no answer within `timeout` seconds) or `CancellationError`.
    static func perform(_ request: URLRequest, timeout: Double, caFile: String?) async throws
      -> Answer
    {
      let exchange = Exchange()
      return try await withTaskCancellationHandler {
        try await withCheckedThrowingContinuation { continuation in
          exchange.start(request, timeout: timeout, caFile: caFile, continuation)
        }
      } onCancel: {
        exchange.stop(CancellationError())
      }
    }

    private func start(
      _ request: URLRequest, timeout: Double, caFile: String?,
      _ continuation: CheckedContinuation<Answer, any Error>
    ) {
      let early = lock.locked { () -> Bool in
        self.continuation = continuation
        return stopped
      }
      if early { return resume(.failure(CancellationError())) }
      let transfer = CurlTransfer(
        request, connectTimeout: timeout, caFile: caFile,
        sink: { [self] event in take(event) },
        done: { [self] error in
          let answer = lock.locked {
            Answer(
              status: status, body: body, retryAfter: headers.value("retry-after"),
              location: headers.value("location"))
          }
          resume(error.map { .failure($0) } ?? .success(answer))
        })
      lock.locked { self.transfer = transfer }
      DispatchQueue.global().asyncAfter(deadline: .now() + timeout) { [weak self] in
        self?.stop(CountdownError.unreachable("no answer within \(Int(timeout)) s"))
      }
    }

    private func take(_ event: HTTPResponseReader.Event) -> Bool {
      let over = lock.locked { () -> Int? in
        switch event {
        case .head(let s, let h): (status, headers) = (s, h)
        case .body(let bytes):
          guard body.count + bytes.count <= Exchange.maxAnswer else { return status }
          body.append(contentsOf: bytes)
        case .end: break
        }
        return nil
      }
      if let over { stop(Exchange.tooLarge(status: over)) }
      return over == nil
    }

    /// Ends the exchange with `error` at once (the first reason given wins); a connect
    /// under way finishes on its own thread.
    func stop(_ error: any Error) {
      let transfer = lock.locked { () -> CurlTransfer? in
        stopped = true
        return self.transfer
      }
      resume(.failure(error))
      transfer?.cancel()
    }

    private func resume(_ result: Result<Answer, any Error>) {
      let continuation = lock.locked { () -> CheckedContinuation<Answer, any Error>? in
        defer { self.continuation = nil }
        return self.continuation
      }
      continuation?.resume(with: result)
    }
  }
#else
  /// On Apple platforms, through URLSession's delegate API.
  final class Exchange: NSObject, URLSessionDataDelegate, @unchecked Sendable {
    private let lock = NSLock()
    private var body = Data()
    private var continuation: CheckedContinuation<Answer, any Error>?
    private var session: URLSession?
    private var task: URLSessionDataTask?
    private var stopped: (any Error)?

    /// Sends `request` and returns its answer, whatever the status; throws `CountdownError`
    /// (`unreachable` for no answer within `timeout` seconds) or `CancellationError`.
    static func perform(_ request: URLRequest, timeout: Double) async throws -> Answer {
      let exchange = Exchange()
      return try await withTaskCancellationHandler {
        try await withCheckedThrowingContinuation { continuation in
          exchange.start(request, timeout: timeout, continuation)
        }
      } onCancel: {
        exchange.stop(CancellationError())
      }
    }

    private func start(
      _ request: URLRequest, timeout: Double, _ continuation: CheckedContinuation<Answer, any Error>
    ) {
      let config = URLSessionConfiguration.ephemeral
      config.timeoutIntervalForRequest = timeout
      config.timeoutIntervalForResource = timeout
      config.requestCachePolicy = .reloadIgnoringLocalCacheData
      let session = URLSession(configuration: config, delegate: self, delegateQueue: nil)
      let task = session.dataTask(with: request)
      let early = lock.locked { () -> (any Error)? in
        self.continuation = continuation
        self.session = session
        self.task = task
        return stopped
      }
      if let early {
        finish(.failure(early))
        return
      }
      task.resume()
      DispatchQueue.global().asyncAfter(deadline: .now() + timeout) { [weak self] in
        self?.stop(CountdownError.unreachable("no answer within \(Int(timeout)) s"))
      }
    }

    /// Ends the exchange with `error` (the first reason given wins).
    func stop(_ error: any Error) {
      let task = lock.locked { () -> URLSessionDataTask? in
        if stopped == nil { stopped = error }
        return self.task
      }
      task?.cancel()
    }

    private func finish(_ result: Result<Answer, any Error>) {
      let (continuation, session) = lock.locked {
        defer {
          self.continuation = nil
          self.session = nil
          self.task = nil
        }
        return (self.continuation, self.session)
      }
      // Breaks the session's strong hold on its delegate.
      session?.finishTasksAndInvalidate()
      continuation?.resume(with: result)
    }

    func urlSession(
      _ session: URLSession, task: URLSessionTask,
      willPerformHTTPRedirection response: HTTPURLResponse, newRequest request: URLRequest,
      completionHandler: @escaping (URLRequest?) -> Void
    ) {
      completionHandler(nil)
    }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
      let over = lock.locked { () -> Bool in
        guard body.count + data.count <= Self.maxAnswer else { return true }
        body.append(data)
        return false
      }
      if over {
        let status = (dataTask.response as? HTTPURLResponse)?.statusCode ?? 0
        stop(Exchange.tooLarge(status: status))
      }
    }

    func urlSession(
      _ session: URLSession, task: URLSessionTask, didCompleteWithError error: (any Error)?
    ) {
      let (stopped, body) = lock.locked { (self.stopped, self.body) }
      if let stopped { return finish(.failure(stopped)) }
      if let error {
        return finish(.failure(CountdownError.unreachable(CountdownClient.describe(error))))
      }
      guard let http = task.response as? HTTPURLResponse else {
        return finish(.failure(CountdownError.badResponse(status: 0, "not an HTTP answer")))
      }
      finish(
        .success(
          Answer(
            status: http.statusCode, body: body,
            retryAfter: http.value(forHTTPHeaderField: "Retry-After"),
            location: http.value(forHTTPHeaderField: "Location"))))
    }
  }
#endif
