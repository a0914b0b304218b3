import Testing

@testable import RedisCluster

@Suite struct AddressTests {
  @Test func acceptsIPAddressesAndSockets() throws {
    #expect(
      try RedisAddress.parse("redis://127.0.0.1:6380/2")
        == RedisAddress(endpoint: .tcp(ip: "127.0.0.1", port: 6380), database: 2))
    #expect(
      try RedisAddress.parse("redis://10.0.0.5")
        == RedisAddress(endpoint: .tcp(ip: "10.0.0.5", port: 6379)))
    #expect(
      try RedisAddress.parse("redis://[::1]:7000")
        == RedisAddress(endpoint: .tcp(ip: "::1", port: 7000)))
    #expect(
      try RedisAddress.parse("unix:///run/redis/redis.sock?db=3")
        == RedisAddress(endpoint: .unix(path: "/run/redis/redis.sock"), database: 3))
  }

  @Test(arguments: [
    ("redis://localhost:6379", "not an IP address"),
    ("redis://redis.internal", "not an IP address"),
    ("redis://256.1.1.1:6379", "not an IP address"),
    ("redis://127.0.0.1:0", "port"),
    ("redis://127.0.0.1:99999", "port"),
    ("redis://127.0.0.1:63a", "port"),
    ("redis://127.0.0.1:6379/16", "database"),
    ("redis://127.0.0.1:6379/x", "database"),
    ("redis://@127.0.0.1", "user"),
    ("redis://a b@127.0.0.1", "user"),
    ("http://127.0.0.1:6379", "expected redis://"),
    ("127.0.0.1:6379", "expected redis://"),
    ("redis://", "no address"),
    ("redis://[::1", "unclosed"),
    ("unix://relative.sock", "absolute"),
  ])
  func refusesWithAReason(text: String, reason: String) {
    #expect {
      try RedisAddress.parse(text)
    } throws: { error in
      guard let error = error as? RedisError else { return false }
      return error.kind == .badAddress && error.description.contains(reason)
        && error.description.contains(text)
    }
  }

  /// An ACL user comes before '@', and shows in the description.
  @Test func parsesAnACLUser() throws {
    let address = try RedisAddress.parse("redis://countdown@10.0.0.5:6380/2")
    #expect(address.username == "countdown")
    #expect(address.endpoint == .tcp(ip: "10.0.0.5", port: 6380) && address.database == 2)
    #expect(address.description == "redis://countdown@10.0.0.5:6380/2")
  }

  /// A password in the URL is refused, and the message does not repeat it.
  @Test func refusesAPasswordInTheURLWithoutEchoingIt() {
    #expect {
      try RedisAddress.parse("redis://user:hunter2@127.0.0.1")
    } throws: { error in
      guard let error = error as? RedisError else { return false }
      return error.kind == .badAddress && error.description.contains("--redis-password-file")
        && !error.description.contains("hunter2")
    }
  }
}
