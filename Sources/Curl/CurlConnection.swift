import CCurl

/// A libcurl result that is not `CURLE_OK`, with curl's own words for it. Every libcurl
/// code this module returns becomes one here.
public struct CurlError: Error, Equatable, Sendable, CustomStringConvertible {
  public let description: String

  init(_ code: CURLcode) { description = String(cString: curl_easy_strerror(code)) }
}

/// One connection that libcurl opened (`CURLOPT_CONNECT_ONLY`), http or https, over which
/// the caller speaks HTTP itself. For a client that must wait on the socket in its own
/// `poll`: libcurl does the name lookup, the connect and TLS, and nothing is read or
/// written behind the caller's back. Used by one thread at a time; blocking only in `open`.
public final class CurlConnection {
  private let easy: UnsafeMutableRawPointer
  /// The socket to `poll`; libcurl owns it and closes it with the connection.
  public let socket: Int32

  /// libcurl's process-wide set-up, run once before the first handle.
  private static let ready: Bool = CurlMulti.initialise()

  private init(easy: UnsafeMutableRawPointer, socket: Int32) {
    self.easy = easy
    self.socket = socket
  }

  /// Connects to `url`'s host (and shakes hands for https, verifying the peer against the
  /// PEM certificates in `caFile`, or the system's when nil), within `timeoutMs`.
  public static func open(url: String, caFile: String?, timeoutMs: Int) -> Result<
    CurlConnection, CurlError
  > {
    guard ready, let easy = curl_easy_init() else { return .failure(CurlError(CURLE_FAILED_INIT)) }
    var code = cdc_easy_connect_only(easy, url, caFile, timeoutMs)
    if code == CURLE_OK { code = curl_easy_perform(easy) }
    let socket = code == CURLE_OK ? cdc_easy_socket(easy) : -1
    guard code == CURLE_OK, socket >= 0 else {
      curl_easy_cleanup(easy)
      return .failure(CurlError(code == CURLE_OK ? CURLE_COULDNT_CONNECT : code))
    }
    return .success(CurlConnection(easy: easy, socket: socket))
  }

  /// Sends what it can of `bytes` without waiting: how many went, or nil when the socket
  /// takes none now.
  public func send(_ bytes: UnsafeRawBufferPointer) -> Result<Int?, CurlError> {
    var sent = 0
    let code = curl_easy_send(easy, bytes.baseAddress, bytes.count, &sent)
    if code == CURLE_AGAIN { return .success(nil) }
    return code == CURLE_OK ? .success(sent) : .failure(CurlError(code))
  }

  /// Reads what has arrived into `buffer` without waiting: how many bytes (0 when the
  /// peer closed), or nil when nothing is there now. TLS may hold bytes the socket no
  /// longer shows, so read until nil before the next `poll`.
  public func receive(into buffer: UnsafeMutableRawBufferPointer) -> Result<Int?, CurlError> {
    var count = 0
    let code = curl_easy_recv(easy, buffer.baseAddress, buffer.count, &count)
    if code == CURLE_AGAIN { return .success(nil) }
    return code == CURLE_OK ? .success(count) : .failure(CurlError(code))
  }

  deinit { curl_easy_cleanup(easy) }
}
