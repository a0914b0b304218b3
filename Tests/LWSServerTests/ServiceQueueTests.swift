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
      server.onLoopReady = { libevLoop in
        readyContinuation.yield(
          RunningServer(
            queue: server.serviceQueue, serviceThread: pthread_self(), port: port,
            loopHanded: libevLoop != nil, active: server.activeEventLoop, finished: Task {}))
      }
      do {
        try server.run { port = $0 }
      } catch {
        Issue.record("run failed: \(error)")
        readyContinuation.finish()
      }
      doneContinuation.finish()
    }.start()
    var iterator = ready.makeAsyncIterator()
    guard let running = await iterator.next() else { fatalError("the server did not start") }
    return RunningServer(
      queue: running.queue, serviceThread: running.serviceThread, port: running.port,
      loopHanded: running.loopHanded, active: running.active,
      finished: Task { for await _ in done {} })
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
