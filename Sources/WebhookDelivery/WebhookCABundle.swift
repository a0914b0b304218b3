import Observability

/// The CA certificates that https webhook endpoints must chain to, instead
/// of the system's: for receivers signed by an operator's own CA. Checked
/// once at start-up, so a wrong path fails then and not at the first event;
/// libcurl reads the file itself for each connection.
public struct WebhookCABundle: Sendable, Equatable {
  public let path: String

  /// Far past any real bundle (the system's whole one is about 200 KB).
  static let limit = 4 << 20
  static let marker = Array("-----BEGIN CERTIFICATE-----".utf8)

  public init(file path: String) throws(WebhookConfigError) {
    let bytes: [UInt8]
    do throws(SmallFile.Failure) {
      bytes = try SmallFile.read(path, limit: Self.limit)
    } catch {
      throw WebhookConfigError(error.description)
    }
    guard bytes.firstRange(of: Self.marker) != nil else {
      throw WebhookConfigError("it holds no PEM certificate ('-----BEGIN CERTIFICATE-----')")
    }
    self.path = path
  }
}
