import CountdownCore
import Foundation
import Synchronization
import Testing

@testable import LWSServer

/// A CountdownServer running `run` on a thread of its own, as main.swift runs it.
private struct RunningServer: Sendable {
  let queue: ServiceQueue
  let serviceThread: pthread_t
  let port: Int
  let loopHanded: Bool
  let active: EventLoop?
  let finished: Task<Void, Never>
  /// The function `onServiceThread` made, and what its handler saw:
  /// each value, and whether it ran on the service thread.
  let send: @Sendable (Int) -> Void
  let received: Locked<[(value: Int, onServiceThread: Bool)]>
  /// Whether `runOnServiceThread` ran its work inside the call, in
  /// `onLoopReady`; and whether it ran any after `run` returned.
  let ranDirectly: Bool
  let ranAfterStop: Locked<Bool>

  static func start(loop: EventLoop) async -> RunningServer {
    let (ready, readyContinuation) = AsyncStream.makeStream(of: RunningServer.self)
    let (done, doneContinuation) = AsyncStream.makeStream(of: Void.self)
    Thread {
      var config = ServerConfig()
      config.port = 0
      config.eventLoop = loop
      config.publicDirectory =
        URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Public").path
      let server = CountdownServer(config: config, hub: Hub(config: HubConfig()))
      var port = 0
      let received = Locked<[(value: Int, onServiceThread: Bool)]>([])
      let ranAfterStop = Locked(false)
      let serviceThread = pthread_self()
      let send: @Sendable (Int) -> Void = server.onServiceThread { (value: Int) in
        let here = pthread_equal(pthread_self(), serviceThread) != 0
        received.update { $0.append((value, here)) }
      }
      server.onLoopReady = { libevLoop in
        var ran = false
        server.runOnServiceThread { ran = true }
        readyContinuation.yield(
          RunningServer(
            queue: server.serviceQueue, serviceThread: pthread_self(), port: port,
            loopHanded: libevLoop != nil, active: server.activeEventLoop, finished: Task {},
            send: send, received: received, ranDirectly: ran, ranAfterStop: ranAfterStop))
      }
      do {
        try server.run { port = $0 }
      } catch {
        Issue.record("run failed: \(error)")
        readyContinuation.finish()
      }
      server.runOnServiceThread { ranAfterStop.update { $0 = true } }
      doneContinuation.finish()
    }.start()
    var iterator = ready.makeAsyncIterator()
    guard let running = await iterator.next() else { fatalError("the server did not start") }
    return RunningServer(
      queue: running.queue, serviceThread: running.serviceThread, port: running.port,
      loopHanded: running.loopHanded, active: running.active,
      finished: Task { for await _ in done {} }, send: running.send, received: running.received,
      ranDirectly: running.ranDirectly, ranAfterStop: running.ranAfterStop)
  }

  /// Posts `work` and waits until it has run on the service thread; false if
  /// the queue refused it or it did not run within 10 s.
  func roundTrip(_ work: @escaping @Sendable () -> Void = {}) async -> Bool {
    let (ran, ranContinuation) = AsyncStream.makeStream(of: Bool.self)
    let accepted = queue.post {
      work()
      ranContinuation.yield(true)
    }
    guard accepted else { return false }
    return await withTaskGroup(of: Bool.self) { group in
      group.addTask {
        for await value in ran { return value }; return false
      }
      group.addTask {
        try? await Task.sleep(for: .seconds(10))
        return false
      }
      let first = await group.next() ?? false
      group.cancelAll()
      ranContinuation.finish()
      return first
    }
  }

  func stop() async {
    CountdownServer.requestStop()
    await finished.value
  }
}

/// A value shared between the test's threads.
private final class Locked<Value: Sendable>: Sendable {
  private let state: Mutex<Value>
  init(_ value: Value) { state = Mutex(value) }
  var value: Value { state.withLock { $0 } }
  func update(_ body: (inout Value) -> Void) { state.withLock { body(&$0) } }
}

// One server at a time: the signal path (`requestStop`) is process-wide.
@Suite(.serialized) struct ServiceQueueTests {
  /// Work posted from four threads at once all runs, once each, on the
  /// service thread, and in posting order per thread.
  @Test(arguments: EventLoop.allCases)
  func workFromManyThreadsRunsOnTheServiceThreadInOrder(loop: EventLoop) async {
    let server = await RunningServer.start(loop: loop)
    let log = Locked<[(poster: Int, sequence: Int, onServiceThread: Bool)]>([])
    let serviceThread = server.serviceThread
    await withTaskGroup(of: Void.self) { group in
      for poster in 0..<4 {
        group.addTask {
          await withCheckedContinuation { (finished: CheckedContinuation<Void, Never>) in
            Thread {
              for sequence in 0..<500 {
                server.queue.post {
                  let here = pthread_equal(pthread_self(), serviceThread) != 0
                  log.update { $0.append((poster, sequence, here)) }
                }
              }
              finished.resume()
            }.start()
          }
        }
      }
    }
    // The queue is FIFO: once this has run, everything posted before it has.
    #expect(await server.roundTrip())
    let entries = log.value
    #expect(entries.count == 2000)
    #expect(entries.allSatisfy { $0.onServiceThread })
    for poster in 0..<4 {
      #expect(entries.filter { $0.poster == poster }.map(\.sequence) == Array(0..<500))
    }
    await server.stop()
  }

  /// A post wakes a loop that has nothing else to do at once, rather than at
  /// its next timer (the keepalive timer comes about once a second).
  @Test(arguments: EventLoop.allCases)
  func postWakesAnIdleLoop(loop: EventLoop) async {
    let server = await RunningServer.start(loop: loop)
    let started = ContinuousClock.now
    for _ in 0..<20 { #expect(await server.roundTrip()) }
    #expect(ContinuousClock.now - started < .seconds(1))
    await server.stop()
  }

  /// Values sent through `onServiceThread`'s function from another thread
  /// reach its handler on the service thread, in order with work posted to
  /// the queue between them.
  @Test(arguments: EventLoop.allCases)
  func valuesForTheServiceThreadKeepTheQueuesOrder(loop: EventLoop) async {
    let server = await RunningServer.start(loop: loop)
    let order = Locked<[Int]>([])
    await withCheckedContinuation { (finished: CheckedContinuation<Void, Never>) in
      Thread {
        for value in 0..<300 {
          if value % 3 == 1 {
            server.queue.post { order.update { $0.append(value) } }
          } else {
            server.send(value)
          }
        }
        finished.resume()
      }.start()
    }
    // Posted last, so it runs after every value: the handler has seen them all.
    #expect(await server.roundTrip())
    let received = server.received.value
    #expect(received.map(\.value) == (0..<300).filter { $0 % 3 != 1 })
    #expect(received.allSatisfy { $0.onServiceThread })
    #expect(order.value == (0..<300).filter { $0 % 3 == 1 })
    await server.stop()
  }

  /// Work already on the service thread runs inside `runOnServiceThread`,
  /// not later through the queue; once `run` returned, it does not run.
  @Test(arguments: EventLoop.allCases)
  func serviceThreadWorkRunsDirectlyAndNotAfterStop(loop: EventLoop) async {
    let server = await RunningServer.start(loop: loop)
    #expect(server.ranDirectly)
    await server.stop()
    #expect(!server.ranAfterStop.value)
  }

  /// The loop asked for is the loop used, and only libev hands out a loop to
  /// attach to; once stopped, the queue refuses work instead of losing it silently.
  @Test(arguments: EventLoop.allCases)
  func loopPortAndStop(loop: EventLoop) async {
    let server = await RunningServer.start(loop: loop)
    #expect(server.active == loop)
    #expect(server.loopHanded == (loop == .libev))
    await server.stop()
    let accepted = server.queue.post {}
    #expect(!accepted)
  }
}
