import CountdownCore
import SQLiteStore
import WebhookDelivery

/// The `--webhook*` flags: where events go, how they are signed, which ones,
/// and how long and how hard to keep trying.
struct WebhookOptions {
  var endpoints: [WebhookEndpoint] = []
  /// The file the secret was read from; the secret itself is never shown.
  var secretFile: String?
  var secret: WebhookSecret?
  /// Trusted instead of the system's CAs for https endpoints.
  var caBundle: WebhookCABundle?
  var events = WebhookEventFilter.all
  var retryForSeconds = 86_400
  var timeoutSeconds = 10
  var maxInFlight = 256
  /// Test only: the backoff's base and cap (ms), so retries come quickly.
  var testBackoffMs = 0

  var enabled: Bool { !endpoints.isEmpty }

  var settings: WebhookDeliverer.Settings? {
    guard let secret, enabled else { return nil }
    let policy =
      testBackoffMs > 0
      ? RetryPolicy(
        baseMs: Int64(testBackoffMs), capMs: Int64(testBackoffMs),
        windowMs: Int64(retryForSeconds) * 1000)
      : RetryPolicy(windowMs: Int64(retryForSeconds) * 1000)
    return WebhookDeliverer.Settings(
      endpoints: endpoints, secret: secret, events: events, policy: policy,
      timeoutMs: timeoutSeconds * 1000, maxInFlight: maxInFlight, caFile: caBundle?.path)
  }
}

extension Options {
  static let webhookTable: [OptionSpec] = [
    OptionSpec(
      flag: "--webhook", valueName: "URL", section: .webhooks,
      help: "Send every session event, signed by Standard\n"
        + "Webhooks, to this http or https URL. Repeatable.\n"
        + "Needs --webhook-secret-file, and --data or --redis.",
      apply: { o, v, n throws(UsageError) in
        do throws(WebhookConfigError) {
          o.webhook.endpoints.append(try WebhookEndpoint(parsing: v))
        } catch {
          throw UsageError(
            message:
              "\(n): \(error.description), not '\(WebhookEndpoint.redacted(String(v.prefix(80))))'")
        }
      },
      show: { $0.webhook.endpoints.map(\.description).joined(separator: ",") },
      reset: { $0.webhook.endpoints = [] }),
    OptionSpec(
      flag: "--webhook-secret-file", valueName: "PATH", section: .webhooks,
      help: "The signing secret (whsec_ and base64 of a 24-64\n"
        + "byte key), read from this file at start-up.",
      apply: { o, v, n throws(UsageError) in
        o.webhook.secret = try loadFile(v, n, WebhookSecret.init(file:))
        o.webhook.secretFile = v
      },
      show: { $0.webhook.secretFile ?? "" }),
    OptionSpec(
      flag: "--webhook-ca-file", valueName: "PATH", section: .webhooks,
      help: "Verify https webhook endpoints against the CA\n"
        + "certificates in this PEM file instead of the\nsystem's (default: the system's).",
      apply: { o, v, n throws(UsageError) in
        o.webhook.caBundle = try loadFile(v, n, WebhookCABundle.init(file:))
      },
      show: { $0.webhook.caBundle?.path ?? "" }),
    OptionSpec(
      flag: "--webhook-events", valueName: "LIST", section: .webhooks,
      help: "Comma-separated event types to send (default all),\n"
        + "e.g. session.finished,session.started.",
      apply: { o, v, n throws(UsageError) in
        do throws(WebhookConfigError) {
          o.webhook.events = try WebhookEventFilter(parsing: v)
        } catch {
          throw UsageError(message: "\(n): \(error.description)")
        }
      },
      show: { $0.webhook.events.description }),
    .integer(
      "--webhook-retry-for", "SECONDS", .webhooks, 0...2_592_000, \.webhook.retryForSeconds,
      help: "Keep retrying an event this long after its change\n"
        + "(default 86400); then it is dropped as dead."),
    .integer(
      "--webhook-timeout", "SECONDS", .webhooks, 1...300, \.webhook.timeoutSeconds,
      help: "Give up on one request after this long, connecting\nincluded (default 10)."),
    .integer(
      "--webhook-max-in-flight", "N", .webhooks, 1...100_000, \.webhook.maxInFlight,
      help: "Events being sent or awaiting a retry at once\n"
        + "(default 256); the rest wait in the outbox."),
    .integer(
      "--test-webhook-backoff-ms", "MS", .testing, 0...3_600_000, \.webhook.testBackoffMs,
      help: "Retry failed webhooks after at most MS, every time,\n"
        + "instead of the growing backoff. Default 0 (off)."),
  ]

  /// What the webhook flags need of the others.
  func checkWebhooks() throws(UsageError) {
    guard webhook.enabled else {
      if webhook.caBundle != nil {
        throw UsageError(message: "--webhook-ca-file needs --webhook: it is for webhook endpoints")
      }
      return
    }
    guard webhook.secret != nil else {
      throw UsageError(message: "--webhook needs --webhook-secret-file: events are always signed")
    }
    guard redis != nil || dataPath != SQLiteStore.inMemory else {
      throw UsageError(
        message:
          "--webhook needs --data FILE or --redis: events wait in a durable outbox, "
          + "and --data :memory: keeps none")
    }
  }
}
