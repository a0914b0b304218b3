#if canImport(Glibc)
  import Foundation
  import FoundationNetworking

  /// One event stream on Linux: a `CurlTransfer` whose answer goes into a `ChunkQueue`.
  final class SocketStream: StreamConnection, Sendable {
    let queue = ChunkQueue()
    private let transfer: CurlTransfer

    init(_ request: URLRequest, connectTimeout: Double, caFile: String?) {
      let queue = self.queue
      transfer = CurlTransfer(
        request, connectTimeout: connectTimeout, caFile: caFile,
        sink: { event in
          switch event {
          case .head(let status, let headers):
            queue.response(
              status: status, retryAfter: headers.value("retry-after"),
              contentType: headers.value("content-type"))
            return true
          case .body(let bytes): return queue.data(Data(bytes))
          case .end: return false
          }
        },
        done: { error in queue.end(error ?? .unreachable("the server ended the stream")) })
    }

    func release() { transfer.cancel() }
  }
#endif
