import CCurl

/// libcurl's multi interface as the webhook delivery thread uses it: POSTs run side
/// by side on one thread, each known by a tag. The handle is made, used and freed on
/// that thread only.
public final class CurlMulti {
  /// A finished request: its tag, and the HTTP status or why none came.
  public struct Done: Sendable {
    public let tag: Int
    /// 0 when no response came.
    public let status: Int
    /// curl's reason when the transfer failed (timeout, refused, TLS).
    public let failure: String?
  }

  private let multi: UnsafeMutableRawPointer
  private var transfers:
    [Int: (easy: UnsafeMutableRawPointer, headers: UnsafeMutablePointer<curl_slist>?)] = [:]
  private var wakeUps: [curl_waitfd]
  /// The CA bundle https peers are verified against; nil: the system's.
  private let caFile: String?

  /// `wakeFD` ends a `poll` when it turns readable.
  public init(wakeFD: Int32, caFile: String? = nil) {
    guard let multi = curl_multi_init() else { fatalError("curl_multi_init failed") }
    self.multi = multi
    self.caFile = caFile
    wakeUps = [curl_waitfd(fd: wakeFD, events: Int16(CURL_WAIT_POLLIN), revents: 0)]
  }

  /// Once per process, before any transfer: libcurl's own set-up.
  public static func initialise() -> Bool { cdc_global_init() == CURLE_OK }

  public var count: Int { transfers.count }

  /// Starts a POST of `body` with `headers`; false if libcurl refused it.
  public func post(tag: Int, url: String, body: [UInt8], headers: [String], timeoutMs: Int) -> Bool
  {
    guard let easy = curl_easy_init() else { return false }
    var list: UnsafeMutablePointer<curl_slist>?
    for line in headers { list = curl_slist_append(list, line) }
    var prepared = cdc_easy_prepare(easy, url, body, body.count, list, tag, timeoutMs)
    if prepared == CURLE_OK, let caFile { prepared = cdc_easy_trust(easy, caFile) }
    guard prepared == CURLE_OK, curl_multi_add_handle(multi, easy) == CURLM_OK else {
      curl_easy_cleanup(easy)
      curl_slist_free_all(list)
      return false
    }
    transfers[tag] = (easy, list)
    return true
  }

  /// Moves every transfer on as far as it goes without waiting, and returns
  /// those that finished.
  public func perform() -> [Done] {
    var running: Int32 = 0
    _ = curl_multi_perform(multi, &running)
    var finished: [Done] = []
    var easy: UnsafeMutableRawPointer?
    var result = CURLE_OK
    while cdc_multi_next_done(multi, &easy, &result) != 0, let done = easy {
      let tag = cdc_easy_tag(done)
      let status = cdc_easy_status(done)
      let failure = result == CURLE_OK ? nil : String(cString: curl_easy_strerror(result))
      remove(tag)
      finished.append(Done(tag: tag, status: status, failure: failure))
    }
    return finished
  }

  /// Waits for socket activity, a curl timer, the wake-up descriptor, or
  /// `timeoutMs`; true when the wake-up descriptor was readable.
  public func poll(timeoutMs: Int) -> Bool {
    wakeUps[0].revents = 0
    _ = curl_multi_poll(multi, &wakeUps, 1, Int32(clamping: timeoutMs), nil)
    return wakeUps[0].revents != 0
  }

  /// Abandons a transfer: its connection is closed if it was under way.
  public func remove(_ tag: Int) {
    guard let transfer = transfers.removeValue(forKey: tag) else { return }
    curl_multi_remove_handle(multi, transfer.easy)
    curl_easy_cleanup(transfer.easy)
    curl_slist_free_all(transfer.headers)
  }

  deinit {
    for tag in Array(transfers.keys) { remove(tag) }
    curl_multi_cleanup(multi)
  }
}
