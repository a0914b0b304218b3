import Testing

@testable import Observability

@Suite struct MetricsWriterTests {
  /// Label values are escaped as the exposition format requires, and integers
  /// print without a fraction.
  @Test func escapesLabelsAndPrintsIntegers() {
    var writer = MetricsWriter()
    writer.family("x_total", .counter, help: "a \\ b\nc")
    writer.sample("x_total", ["path": "a\"b\\c\nd"], 3)
    writer.sample("y", 0.25)
    writer.sample("z", -12)
    #expect(
      writer.text == """
        # HELP x_total a \\\\ b\\nc
        # TYPE x_total counter
        x_total{path="a\\"b\\\\c\\nd"} 3
        y 0.25
        z -12

        """)
  }

  /// Buckets come out cumulative, end with +Inf at the count, and scale to seconds.
  @Test func histogramIsCumulativeAndScaled() {
    var writer = MetricsWriter()
    writer.histogram(
      "lag_seconds", help: "h", bounds: [1, 10], counts: [2, 3, 1], sum: 40, count: 6,
      scale: 0.001)
    #expect(
      writer.text.split(separator: "\n").dropFirst(2) == [
        #"lag_seconds_bucket{le="0.001"} 2"#, #"lag_seconds_bucket{le="0.01"} 5"#,
        #"lag_seconds_bucket{le="+Inf"} 6"#, "lag_seconds_sum 0.04", "lag_seconds_count 6",
      ])
  }

  /// The registry renders its collectors in order, then its own render-time gauge.
  @Test func registryRendersCollectorsThenItsOwnTiming() {
    let registry = MetricsRegistry()
    registry.register { $0.single("a", .gauge, help: "a", 1) }
    registry.register { $0.single("b", .gauge, help: "b", 2) }
    let lines = String(decoding: registry.render(), as: UTF8.self).split(separator: "\n")
    let samples = lines.filter { !$0.hasPrefix("#") }
    #expect(samples.count == 3)
    #expect(samples[0] == "a 1" && samples[1] == "b 2")
    #expect(samples[2] == "countdown_metrics_render_seconds 0")
  }
}

@Suite struct LogTests {
  /// Whatever follows `key=` is replaced, wherever it appears and however it ends.
  @Test func redactsControllerKeys() {
    #expect(Logger.redact("/ws/a?key=0123abcd&since=3") == "/ws/a?key=REDACTED&since=3")
    #expect(Logger.redact("GET /ws/a?key=0123abcd HTTP/1.1") == "GET /ws/a?key=REDACTED HTTP/1.1")
    #expect(Logger.redact("key=a key=b") == "key=REDACTED key=REDACTED")
    #expect(Logger.redact("no secrets here") == "no secrets here")
  }

  /// A JSON line is one object, with strings escaped and keys redacted (a quote
  /// or a newline ends a key's value).
  @Test func jsonLineEscapesAndRedacts() {
    let line = String(
      decoding: Logger.json(
        .warn, "e", [("path", .string("/x?key=s3cret\"\n")), ("n", .int(3)), ("ok", .bool(true))]),
      as: UTF8.self)
    #expect(line.hasPrefix(#"{"ts":""#))
    #expect(
      line.hasSuffix(
        #""level":"warn","event":"e","path":"/x?key=REDACTED\"\n","n":3,"ok":true}"# + "\n"))
    #expect(!line.contains("s3cret"))
  }

  /// Text lines quote values with spaces, so `key=value` pairs stay parseable.
  @Test func textLineQuotesValuesWithSpaces() {
    let line = String(
      decoding: Logger.text(.info, "listening", [("url", .string("http://h/")), ("m", "a b")]),
      as: UTF8.self)
    #expect(line.hasSuffix(#" INFO listening url=http://h/ m="a b""# + "\n"))
  }

  /// Levels below the configured one are neither written nor counted.
  @Test func levelsFilter() {
    let logger = Logger(level: .warn, format: .json, output: -1)
    logger.info("quiet")
    logger.error("loud")
    logger.flush()
    let counts = Dictionary(uniqueKeysWithValues: logger.lineCounts().byLevel)
    #expect(counts[.info] == 0 && counts[.error] == 1)
  }
}
