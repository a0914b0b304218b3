import CountdownCore
import Observability

/// What each part of the cluster adapter (ordering, change feed, presence)
/// holds: the settings, the channel and this instance's name, Redis's clock
/// and this instance's own, the commands connection and the sessions open
/// here. The parts are made from the same references, in one place.
class ClusterPart {
  let settings: RedisSequencer.Settings
  let channel: String
  let instance: String
  /// This instance's own clock, and Redis's (see `RedisClock`).
  let clock: any WallClock
  let redisClock: RedisClock
  let commands: RedisConnection
  let sessions: OpenSessions
  let log = Logger.shared

  init(
    settings: RedisSequencer.Settings, instance: String, redisClock: RedisClock,
    commands: RedisConnection, sessions: OpenSessions
  ) {
    self.settings = settings
    self.channel = RedisSequencer.channel(settings.address)
    self.instance = instance
    self.redisClock = redisClock
    self.clock = redisClock.local
    self.commands = commands
    self.sessions = sessions
  }
}
