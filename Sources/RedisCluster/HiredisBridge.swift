import CHiredis
import Libev

#if canImport(Glibc)
  import Glibc
#endif

// The one file where hiredis is touched: raw pointers, Unmanaged and the
// @convention(c) callbacks end here. Everything above sees handles
// (`HiredisContext`, `BlockingRedis`) and `RedisReply` values. The loop and
// its timers are module Libev's (`LibevLoop`, `LoopTimer`).

/// What a `HiredisContext` reports to its owner, on the loop's thread. Each
/// call names the context by `HiredisContext.id`, so an owner can ignore a
/// context it has already let go.
protocol HiredisContextOwner: AnyObject {
  func contextConnected(_ id: UInt)
  /// The connection failed or closed; hiredis frees the context itself.
  func contextLost(_ id: UInt, _ error: RedisError)
  /// `reply` is nil when the context went before the reply came.
  func contextReplied(_ id: UInt, tag: UInt, _ reply: RedisReply?)
}

/// One hiredis async connection (a `redisAsyncContext *`) attached to a loop.
/// Replies come back by tag; every command's callback runs exactly once,
/// with nil when the connection goes first. Subscription messages come with
/// the subscribe's tag, once per message.
final class HiredisContext {
  private let raw: UnsafeMutablePointer<redisAsyncContext>
  private var freed = false

  var id: UInt { UInt(bitPattern: raw) }

  /// Starts a non-blocking connect; `owner` must outlive the context.
  init(
    connecting address: RedisAddress, loop: LibevLoop, owner: any HiredisContextOwner
  ) throws(RedisError) {
    let context: UnsafeMutablePointer<redisAsyncContext>?
    switch address.endpoint {
    case .tcp(let ip, let port): context = redisAsyncConnect(ip, Int32(clamping: port))
    case .unix(let path): context = redisAsyncConnectUnix(path)
    }
    guard let context else { throw RedisError(.disconnected, "out of memory") }
    if context.pointee.err != 0 {
      let message = String(cString: context.pointee.errstr)
      redisAsyncFree(context)
      throw RedisError(.disconnected, message)
    }
    raw = context
    // Keepalive finds a peer that vanished without a FIN (a cut cable, a
    // paused VM) where TCP alone would wait for hours.
    if case .tcp = address.endpoint { _ = cdh_enable_keepalive(context) }
    context.pointee.data = Unmanaged.passUnretained(owner as AnyObject).toOpaque()
    _ = cdh_libev_attach(loop.unsafeRawLoop, context)
    redisAsyncSetConnectCallback(context) { context, status in
      guard let context, let owner = HiredisContext.owner(of: context) else { return }
      let id = UInt(bitPattern: context)
      if status == REDIS_OK {
        owner.contextConnected(id)
      } else {
        owner.contextLost(id, HiredisContext.error(of: context, fallback: "cannot connect"))
      }
    }
    redisAsyncSetDisconnectCallback(context) { context, _ in
      guard let context, let owner = HiredisContext.owner(of: context) else { return }
      owner.contextLost(
        UInt(bitPattern: context), HiredisContext.error(of: context, fallback: "connection closed"))
    }
  }

  private static func owner(of context: UnsafePointer<redisAsyncContext>) -> (
    any HiredisContextOwner
  )? {
    guard let data = context.pointee.data else { return nil }
    return Unmanaged<AnyObject>.fromOpaque(data).takeUnretainedValue() as? any HiredisContextOwner
  }

  private static func error(of context: UnsafePointer<redisAsyncContext>, fallback: String)
    -> RedisError
  {
    guard context.pointee.err != 0, let text = context.pointee.errstr else {
      return RedisError(.disconnected, fallback)
    }
    return RedisError(.disconnected, String(cString: text))
  }

  /// Queues a command; false when hiredis refused it (the context is going).
  func send(_ arguments: [String], tag: UInt) -> Bool {
    guard !freed else { return false }
    let status = withArgv(arguments) { count, argv, argvlen in
      redisAsyncCommandArgv(
        raw,
        { context, reply, tag in
          guard let context, let owner = HiredisContext.owner(of: context) else { return }
          let value = reply.map { convert($0.assumingMemoryBound(to: redisReply.self)) }
          owner.contextReplied(
            UInt(bitPattern: context), tag: UInt(bitPattern: tag), value)
        }, UnsafeMutableRawPointer(bitPattern: tag), count, argv, argvlen)
    }
    return status == REDIS_OK
  }

  /// Closes now: pending commands get their callback with nil, then the
  /// owner hears `contextLost` if the connection was up. Not from inside a
  /// reply callback of this context.
  func close() {
    guard !freed else { return }
    freed = true
    redisAsyncFree(raw)
  }

  /// Closes without telling the owner anything: for an owner that is going
  /// away, whose callbacks must not run.
  func abandon() {
    guard !freed else { return }
    raw.pointee.data = nil
    close()
  }

  /// hiredis freed the context itself (after `contextLost`): forget it.
  func forget() { freed = true }
}

/// Hands hiredis a command as byte buffers with their lengths, valid for
/// the duration of `body`. Binary-safe: each buffer holds exactly the
/// argument's UTF-8 bytes, a NUL among them included, and hiredis reads
/// `argvlen` bytes of it (a C-string copy would stop at the NUL while the
/// length ran on into the heap).
private func withArgv<Result>(
  _ arguments: [String],
  _ body: (
    Int32, UnsafeMutablePointer<UnsafePointer<CChar>?>?, UnsafePointer<Int>?
  ) -> Result
) -> Result {
  let bytes = arguments.map { Array($0.utf8) }
  let lengths = bytes.map(\.count)
  let copies = bytes.map { argument -> UnsafeMutableBufferPointer<CChar> in
    let buffer = UnsafeMutableBufferPointer<CChar>.allocate(capacity: max(1, argument.count))
    for (index, byte) in argument.enumerated() { buffer[index] = CChar(bitPattern: byte) }
    return buffer
  }
  defer { copies.forEach { $0.deallocate() } }
  var pointers = copies.map { UnsafePointer<CChar>($0.baseAddress) }
  return pointers.withUnsafeMutableBufferPointer { argv in
    lengths.withUnsafeBufferPointer { argvlen in
      body(Int32(clamping: arguments.count), argv.baseAddress, argvlen.baseAddress)
    }
  }
}

/// The message in a blocking context's fixed-size `errstr`.
private func errorText(of context: UnsafeMutablePointer<redisContext>) -> String {
  withUnsafePointer(to: context.pointee.errstr) {
    $0.withMemoryRebound(to: CChar.self, capacity: 128) { String(cString: $0) }
  }
}

/// Copies a hiredis reply into a Swift value.
private func convert(_ reply: UnsafeMutablePointer<redisReply>) -> RedisReply {
  let value = reply.pointee
  func text() -> String {
    guard let str = value.str else { return "" }
    return String(
      decoding: UnsafeRawBufferPointer(start: str, count: Int(value.len)), as: UTF8.self)
  }
  switch value.type {
  case REDIS_REPLY_STRING: return .string(text())
  case REDIS_REPLY_STATUS: return .status(text())
  case REDIS_REPLY_ERROR: return .error(text())
  case REDIS_REPLY_INTEGER: return .integer(Int64(value.integer))
  case REDIS_REPLY_ARRAY:
    return .array((0..<Int(value.elements)).map { convert(value.element[$0]!) })
  default: return .null
  }
}

/// A blocking connection, never on the service thread: at start-up (before
/// the listener opens) loading the function library and agreeing on the
/// cluster epoch, and the webhook delivery thread's own (`StreamOutbox`).
public final class BlockingRedis {
  private let raw: UnsafeMutablePointer<redisContext>

  public init(_ address: RedisAddress, timeoutMs: Int) throws(RedisError) {
    let timeout = timeval(tv_sec: timeoutMs / 1000, tv_usec: (timeoutMs % 1000) * 1000)
    let context: UnsafeMutablePointer<redisContext>?
    switch address.endpoint {
    case .tcp(let ip, let port):
      context = redisConnectWithTimeout(ip, Int32(clamping: port), timeout)
    case .unix(let path): context = redisConnectUnixWithTimeout(path, timeout)
    }
    guard let context else { throw RedisError(.disconnected, "out of memory") }
    guard context.pointee.err == 0 else {
      let message = errorText(of: context)
      redisFree(context)
      throw RedisError(.disconnected, "\(address): \(message)")
    }
    _ = redisSetTimeout(context, timeout)
    raw = context
  }

  deinit { redisFree(raw) }

  /// Sends one command and waits for its reply; an error reply throws.
  @discardableResult
  public func command(_ arguments: [String]) throws(RedisError) -> RedisReply {
    let reply = withArgv(arguments) { count, argv, argvlen in
      redisCommandArgv(raw, count, argv, argvlen)
    }
    guard let reply else { throw RedisError(.disconnected, errorText(of: raw)) }
    let typed = reply.assumingMemoryBound(to: redisReply.self)
    defer { freeReplyObject(reply) }
    let value = convert(typed)
    if case .error(let message) = value {
      throw RedisError.reply(message, toAuth: arguments.first == "AUTH")
    }
    return value
  }

  /// Sends every command at once and then reads their replies, in order:
  /// one round trip for all. Each reply is returned as it is, an error reply
  /// too; a broken connection throws.
  public func pipeline(_ commands: [[String]]) throws(RedisError) -> [RedisReply] {
    for arguments in commands {
      let status = withArgv(arguments) { count, argv, argvlen in
        redisAppendCommandArgv(raw, count, argv, argvlen)
      }
      guard status == REDIS_OK else { throw RedisError(.disconnected, errorText(of: raw)) }
    }
    var replies: [RedisReply] = []
    for _ in commands {
      var reply: UnsafeMutableRawPointer?
      guard redisGetReply(raw, &reply) == REDIS_OK, let reply else {
        throw RedisError(.disconnected, errorText(of: raw))
      }
      defer { freeReplyObject(reply) }
      replies.append(convert(reply.assumingMemoryBound(to: redisReply.self)))
    }
    return replies
  }

  /// AUTH, before anything else on this connection: as `username` (an ACL
  /// user) or the default user. Nothing here puts the password in a message.
  public func authenticate(username: String?, password: String) throws(RedisError) {
    try command(RedisConnection.authArguments(username: username, password: password))
  }
}
