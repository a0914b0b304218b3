/// An HTTP answer the server writes itself.
struct HTTPAnswer {
  var status: UInt32
  var type: String
  var body: [UInt8]
  /// Sent as `cache-control` when set.
  var cacheControl: String? = nil
  /// Sent as `retry-after` (seconds) when set.
  var retryAfter: Int? = nil
}
