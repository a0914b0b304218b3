#if canImport(Glibc)
  import Curl
  import Foundation
  import FoundationNetworking
  import Glibc

  /// One HTTP/1.1 request and its answer on Linux, http or https, on a thread of its own.
  ///
  /// swift-corelibs-foundation's URLSession drives libcurl through dispatch sources and keeps
  /// the write source it made to send a request for as long as the transfer lasts; a socket
  /// is always writable, so an idle event stream wakes its queue without end (an eventfd
  /// write, a `TIOCOUTQ`, a zero-timeout poll by curl, and again). Here libcurl only connects
  /// (and does TLS), and the thread sleeps in `poll` on the socket and on a pipe that
  /// `cancel()` writes to: an idle stream costs nothing between the server's keepalives.
  /// The request is sent with `Connection: close`, and a redirect is an answer like any other.
  final class CurlTransfer: @unchecked Sendable {
    /// Takes each part of the answer as it arrives; false ends the transfer.
    typealias Sink = @Sendable (HTTPResponseReader.Event) -> Bool

    private let lock = NSLock()
    private var cancelled = false
    private var wake: (read: Int32, write: Int32) = (-1, -1)

    /// Sends `request` (its method, headers and body) and hands the answer to `sink`, then
    /// calls `done` once: nil when the answer ended as framed, else why it did not.
    init(
      _ request: URLRequest, connectTimeout: Double, caFile: String?, sink: @escaping Sink,
      done: @escaping @Sendable (CountdownError?) -> Void
    ) {
      var fds: [Int32] = [-1, -1]
      guard pipe(&fds) == 0 else {
        cancelled = true
        done(.unreachable("no pipe: \(String(cString: strerror(errno)))"))
        return
      }
      wake = (fds[0], fds[1])
      for fd in fds {
        _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
        _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
      }
      let thread = Thread { [self] in
        let error = run(request, connectTimeout: connectTimeout, caFile: caFile, sink: sink)
        lock.locked {
          cancelled = true
          Glibc.close(wake.read)
          Glibc.close(wake.write)
        }
        done(error)
      }
      thread.name = "countdown.http"
      thread.start()
    }

    /// Ends the transfer soon: its thread leaves its next wait. A connect under way runs
    /// out its own time first, on that thread.
    func cancel() {
      lock.locked {
        guard !cancelled else { return }
        cancelled = true
        var byte: UInt8 = 1
        _ = Glibc.write(wake.write, &byte, 1)
      }
    }

    private var isCancelled: Bool { lock.locked { cancelled } }

    /// Waits until `fd` is ready for `events`: false when `cancel()` was called or the time
    /// ran out (`ms` < 0: no limit).
    private func ready(_ fd: Int32, _ events: Int32, ms: Int32) -> Bool {
      var fds = [
        pollfd(fd: fd, events: Int16(events), revents: 0),
        pollfd(fd: wake.read, events: Int16(POLLIN), revents: 0),
      ]
      while true {
        let n = poll(&fds, 2, ms)
        if n < 0, errno == EINTR { continue }
        return n > 0 && fds[1].revents == 0
      }
    }

    /// The request as it goes on the wire.
    static func head(_ request: URLRequest) -> [UInt8]? {
      guard let url = request.url, let host = url.host, !host.isEmpty else { return nil }
      var target = url.path.isEmpty ? "/" : url.path
      if let query = url.query { target += "?" + query }
      let hostHeader = (host.contains(":") ? "[\(host)]" : host) + (url.port.map { ":\($0)" } ?? "")
      let method = request.httpMethod ?? "GET"
      var head = "\(method) \(target) HTTP/1.1\r\nHost: \(hostHeader)\r\nConnection: close\r\n"
      for (name, value) in (request.allHTTPHeaderFields ?? [:]).sorted(by: { $0.key < $1.key }) {
        head += "\(name): \(value)\r\n"
      }
      if let body = request.httpBody { head += "Content-Length: \(body.count)\r\n" }
      head += "\r\n"
      return Array(head.utf8) + (request.httpBody.map(Array.init) ?? [])
    }

    private func run(
      _ request: URLRequest, connectTimeout: Double, caFile: String?, sink: Sink
    ) -> CountdownError? {
      guard let url = request.url, let bytes = Self.head(request) else {
        return .invalidArgument("no host in the URL")
      }
      let timeoutMs = Int32(clamping: Int((connectTimeout * 1000).rounded()))
      let connection: CurlConnection
      switch CurlConnection.open(url: url.absoluteString, caFile: caFile, timeoutMs: Int(timeoutMs))
      {
      case .success(let c): connection = c
      case .failure(let error): return .unreachable("\(url.host ?? ""): \(error)")
      }
      var out = bytes[...]
      while !out.isEmpty {
        switch out.withUnsafeBytes({ connection.send($0) }) {
        case .success(let sent?): out = out.dropFirst(sent)
        case .success(nil):
          guard ready(connection.socket, POLLOUT, ms: timeoutMs) else {
            return .unreachable(isCancelled ? "closed" : "the request could not be sent")
          }
        case .failure(let error): return .unreachable("\(error)")
        }
      }
      var reader = HTTPResponseReader()
      var status = 0
      var buffer = [UInt8](repeating: 0, count: 64 * 1024)
      while true {
        let n: Int
        switch buffer.withUnsafeMutableBytes({ connection.receive(into: $0) }) {
        case .success(let count?): n = count
        case .success(nil):
          // No limit here: the caller's own deadline or watchdog decides when silence
          // means lost, and cancels.
          guard ready(connection.socket, POLLIN, ms: -1) else { return .unreachable("closed") }
          continue
        case .failure(let error): return .unreachable("\(error)")
        }
        // Closed with no answer at all: lost on the way, as a reset is, so worth a retry.
        if n == 0, status == 0, !reader.started {
          return .unreachable("the server closed the connection without answering")
        }
        let events: [HTTPResponseReader.Event]
        do {
          events = n == 0 ? try reader.finish() : try reader.feed(buffer[..<n])
        } catch {
          return .badResponse(status: status, error.why)
        }
        for event in events {
          if case .head(let s, _) = event { status = s }
          if case .end = event { return nil }
          guard sink(event) else { return .unreachable("closed") }
        }
        if n == 0 { return nil }
      }
    }
  }
#endif
