#if canImport(Glibc)
  import Foundation
  import FoundationNetworking
  import Glibc

  /// One streaming GET over a plain TCP socket (HTTP/1.1, what the server speaks), for `http`
  /// URLs on Linux. swift-corelibs-foundation's URLSession drives libcurl through dispatch
  /// sources and keeps the write source it made to send the request for as long as the
  /// transfer lasts; a socket is always writable, so an idle stream wakes its queue without
  /// end (an eventfd write, a `TIOCOUTQ`, a zero-timeout poll by curl, and again). Here one
  /// thread sleeps in `poll` on the socket and a pipe that `close()` writes to: an idle
  /// stream costs nothing between the server's keepalives. Redirects are not followed.
  final class SocketStream: StreamConnection, @unchecked Sendable {
    let queue = ChunkQueue()
    private let lock = NSLock()
    private var closed = false
    private var wake: (read: Int32, write: Int32) = (-1, -1)

    init(_ request: URLRequest, connectTimeout: Double) {
      var fds: [Int32] = [-1, -1]
      guard pipe(&fds) == 0 else {
        queue.end(.unreachable("no pipe: \(String(cString: strerror(errno)))"))
        closed = true
        return
      }
      wake = (fds[0], fds[1])
      for fd in fds {
        _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
        _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
      }
      let thread = Thread { [self] in
        run(request, connectTimeout: connectTimeout)
        lock.locked {
          closed = true
          Glibc.close(wake.read)
          Glibc.close(wake.write)
        }
      }
      thread.name = "countdown.events"
      thread.start()
    }

    func release() {
      lock.locked {
        guard !closed else { return }
        closed = true
        var byte: UInt8 = 1
        _ = Glibc.write(wake.write, &byte, 1)
      }
    }

    /// Waits until `fd` is ready for `events`: false when `close()` was called or the
    /// time ran out (`ms` < 0: no limit).
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

    private var isClosed: Bool { lock.locked { closed } }

    private func run(_ request: URLRequest, connectTimeout: Double) {
      guard let url = request.url, let host = url.host, !host.isEmpty else {
        return queue.end(.invalidArgument("no host in the stream's URL"))
      }
      let port = url.port ?? 80
      let timeoutMs = Int32(clamping: Int((connectTimeout * 1000).rounded()))
      let fd: Int32
      switch connect(host: host, port: port, timeoutMs: timeoutMs) {
      case .success(let s): fd = s
      case .failure(let error): return queue.end(error)
      }
      defer { Glibc.close(fd) }
      var target = url.path.isEmpty ? "/" : url.path
      if let query = url.query { target += "?" + query }
      let hostHeader = (host.contains(":") ? "[\(host)]" : host) + (url.port.map { ":\($0)" } ?? "")
      var head = "GET \(target) HTTP/1.1\r\nHost: \(hostHeader)\r\nConnection: close\r\n"
      for (name, value) in (request.allHTTPHeaderFields ?? [:]).sorted(by: { $0.key < $1.key }) {
        head += "\(name): \(value)\r\n"
      }
      head += "\r\n"
      var out = Array(head.utf8)[...]
      while !out.isEmpty {
        guard ready(fd, POLLOUT, ms: timeoutMs) else {
          return queue.end(.unreachable(isClosed ? "closed" : "the request could not be sent"))
        }
        let n = out.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        if n < 0, errno == EAGAIN || errno == EINTR { continue }
        guard n > 0 else { return queue.end(.unreachable(Self.errorText())) }
        out = out.dropFirst(n)
      }
      var reader = HTTPResponseReader()
      var status = 0
      var buffer = [UInt8](repeating: 0, count: 64 * 1024)
      while true {
        // No limit here: the watch's watchdog decides when silence means lost.
        guard ready(fd, POLLIN, ms: -1) else { return }
        let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
        if n < 0, errno == EAGAIN || errno == EINTR { continue }
        if n < 0 { return queue.end(.unreachable(Self.errorText())) }
        let events: [HTTPResponseReader.Event]
        do {
          events = n == 0 ? try reader.finish() : try reader.feed(buffer[..<n])
        } catch {
          return queue.end(.badResponse(status: status, error.why))
        }
        for event in events {
          switch event {
          case .head(let s, let headers):
            status = s
            queue.response(
              status: s, retryAfter: headers.value("retry-after"),
              contentType: headers.value("content-type"))
          case .body(let bytes):
            guard queue.data(Data(bytes)) else { return }
          case .end:
            return queue.end(.unreachable("the server ended the stream"))
          }
        }
        if n == 0 { return queue.end(.unreachable("the server ended the stream")) }
      }
    }

    /// A connected, non-blocking socket to `host`, trying each of its addresses in turn.
    private func connect(host: String, port: Int, timeoutMs: Int32) -> Result<
      Int32, CountdownError
    > {
      var hints = addrinfo()
      hints.ai_family = AF_UNSPEC
      hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
      var list: UnsafeMutablePointer<addrinfo>? = nil
      let rc = getaddrinfo(host, String(port), &hints, &list)
      guard rc == 0 else {
        return .failure(.unreachable("\(host): \(String(cString: gai_strerror(rc)))"))
      }
      defer { freeaddrinfo(list) }
      var why = "no address for \(host)"
      var next = list
      while let ai = next?.pointee {
        next = ai.ai_next
        let fd = socket(ai.ai_family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { continue }
        _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
        if Glibc.connect(fd, ai.ai_addr, ai.ai_addrlen) == 0 { return .success(fd) }
        if errno == EINPROGRESS {
          if ready(fd, POLLOUT, ms: timeoutMs) {
            var err: Int32 = 0
            var len = socklen_t(MemoryLayout<Int32>.size)
            getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len)
            if err == 0 { return .success(fd) }
            why = String(cString: strerror(err))
          } else {
            why = isClosed ? "closed" : "no connection within \(timeoutMs / 1000) s"
          }
        } else {
          why = Self.errorText()
        }
        Glibc.close(fd)
        if isClosed { break }
      }
      return .failure(.unreachable(why))
    }

    private static func errorText() -> String { String(cString: strerror(errno)) }
  }
#endif
