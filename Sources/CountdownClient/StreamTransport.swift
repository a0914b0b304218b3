import Foundation

#if canImport(FoundationNetworking)
  import FoundationNetworking
#endif

/// What a streaming GET hands over, in order: its status once, data as it arrives, one end.
enum StreamChunk: Sendable {
  case response(status: Int, retryAfter: Double?, isEventStream: Bool)
  case data(Data)
  case end(CountdownError)
}

/// One open event stream, whichever transport carries it.
protocol StreamConnection: AnyObject, Sendable {
  /// What the transport hands over.
  var queue: ChunkQueue { get }
  /// Lets go of the connection; the queue has ended.
  func release()
}

extension StreamConnection {
  var chunks: AsyncStream<StreamChunk> { queue.chunks }

  /// Seconds since anything arrived (or since the start).
  func idle(at now: Date) -> Double { queue.idle(at: now) }

  /// The consumer is done with `bytes` of data: they no longer count as a backlog.
  func taken(_ bytes: Int) { queue.taken(bytes) }

  /// Ends the stream with `error` and lets go of the connection.
  func fail(_ error: CountdownError) {
    queue.end(error)
    release()
  }

  func close() { fail(.unreachable("the stream was closed")) }
}

/// The hand-over from a transport's thread to the consumer, with the bytes not yet consumed
/// counted: a server that sends faster than the client reads ends its stream at
/// `maxBacklog` instead of filling memory.
final class ChunkQueue: @unchecked Sendable {
  static let maxBacklog = 4 << 20

  let chunks: AsyncStream<StreamChunk>
  private let continuation: AsyncStream<StreamChunk>.Continuation
  private let lock = NSLock()
  private var lastActivity = Date()
  private var backlog = 0
  private var responded = false
  private var ended = false

  init() {
    (chunks, continuation) = AsyncStream.makeStream(
      of: StreamChunk.self, bufferingPolicy: .unbounded)
  }

  func idle(at now: Date) -> Double { lock.locked { now.timeIntervalSince(lastActivity) } }

  func taken(_ bytes: Int) { lock.locked { backlog -= bytes } }

  /// The status and headers, reported once.
  func response(status: Int, retryAfter: String?, contentType: String?) {
    let first = lock.locked { () -> Bool in
      lastActivity = Date()
      defer { responded = true }
      return !responded && !ended
    }
    guard first else { return }
    continuation.yield(
      .response(
        status: status, retryAfter: CountdownClient.retryAfter(retryAfter),
        isEventStream: contentType?.lowercased().hasPrefix("text/event-stream") == true))
  }

  /// False when the stream has ended, or ends now because the backlog is over its limit.
  @discardableResult
  func data(_ data: Data) -> Bool {
    let over = lock.locked { () -> Bool? in
      guard !ended else { return nil }
      lastActivity = Date()
      backlog += data.count
      return backlog > Self.maxBacklog
    }
    guard let over else { return false }
    if over {
      end(
        .badResponse(
          status: 200, "the server sent over \(Self.maxBacklog >> 20) MB the client had not read"))
      return false
    }
    continuation.yield(.data(data))
    return true
  }

  /// Ends the stream with `error`; later calls do nothing.
  func end(_ error: CountdownError) {
    let first = lock.locked { () -> Bool in
      defer { ended = true }
      return !ended
    }
    guard first else { return }
    continuation.yield(.end(error))
    continuation.finish()
  }
}

/// One streaming GET through URLSession's delegate API, which every platform's URLSession
/// has. Used on Apple platforms only (still compiled on Linux, so it is type-checked here):
/// there swift-corelibs-foundation leaves a write source on the socket once the request is
/// sent, and an idle stream spins (see `CurlTransfer`). Redirects are not followed.
final class StreamingRequest: NSObject, URLSessionDataDelegate, StreamConnection,
  @unchecked Sendable
{
  let queue = ChunkQueue()
  private let lock = NSLock()
  private var session: URLSession?

  init(_ request: URLRequest) {
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

  func release() {
    let s = lock.locked { () -> URLSession? in
      defer { session = nil }
      return session
    }
    // Breaks the session's strong hold on its delegate.
    s?.invalidateAndCancel()
  }

  // The status is reported once: from the response callback, or, where that one is not
  // called, from the task when its first bytes (or its end) arrive. Apple's newer SDKs
  // declare the callback's handler @Sendable, and a method that only nearly matches a
  // requirement is never called; Linux's URLSession may not have set `task.response` yet
  // when the first bytes come, so it needs the callback.
  private func reportResponse(_ response: URLResponse?) {
    guard let http = response as? HTTPURLResponse else { return }
    queue.response(
      status: http.statusCode, retryAfter: http.value(forHTTPHeaderField: "Retry-After"),
      contentType: http.value(forHTTPHeaderField: "Content-Type"))
  }

  func urlSession(
    _ session: URLSession, dataTask: URLSessionDataTask, didReceive response: URLResponse,
    completionHandler: @escaping (URLSession.ResponseDisposition) -> Void
  ) {
    reportResponse(response)
    completionHandler(.allow)
  }

  // Each delegate declares its own: a subclass's methods are not the protocol's witnesses,
  // so a shared base class would have hidden the others from URLSession.
  func urlSession(
    _ session: URLSession, task: URLSessionTask,
    willPerformHTTPRedirection response: HTTPURLResponse, newRequest request: URLRequest,
    completionHandler: @escaping (URLRequest?) -> Void
  ) {
    completionHandler(nil)
  }

  func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
    reportResponse(dataTask.response)
    if !queue.data(data) { close() }
  }

  func urlSession(
    _ session: URLSession, task: URLSessionTask, didCompleteWithError error: (any Error)?
  ) {
    reportResponse(task.response)
    let why = error.map { CountdownClient.describe($0) } ?? "the server ended the stream"
    fail(.unreachable(why))
  }
}
