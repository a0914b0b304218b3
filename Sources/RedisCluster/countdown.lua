#!lua name=countdown
-- The cluster's one writer of session state. Every state change is one call
-- of countdown_command: it checks the phase, takes the time from Redis, bumps
-- the revision, writes the session hash and publishes the change, all in one
-- atomic step, so two starts racing on two instances give one ack and one
-- busy without WATCH/MULTI. The rules mirror SessionRecord.applying in
-- Sources/CountdownCore/SessionRecord.swift exactly: same checks in the same
-- order, same error codes, same limits. RedisCluster embeds this file as
-- FunctionLibrary.source, and a test fails when the two differ.
--
-- KEYS: 1 the session hash, 2 the epoch, 3 the publish position counter.
-- In key mode the session hash holds its controller key's hash, and every
-- command presents the hash of the key its connection holds: a mismatch is
-- refused here too, so one instance's bug cannot command a keyed session.

local SECONDS_MIN, SECONDS_MAX = 1, 86400
local ADJUST_MIN, ADJUST_MAX = -86400, 86400
local AHEAD_MIN, AHEAD_MAX = 1000, 2592000000
-- SessionStateMachine.maxUnstoredPatchesPerSecond: what one instance may
-- publish per second without a command (a tick and a viewer count).
local PATCHES_PER_SECOND = 5
-- A session hash outlives its last command or read by this long.
local KEEP_MS = 7 * 86400 * 1000

local function int(n) return string.format('%.0f', n) end

local function whole_seconds(ms)
  if ms <= 0 then return 0 end
  return math.floor((ms + 999) / 1000)
end

local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

local function read(key)
  local h = redis.call('HGETALL', key)
  if #h == 0 then return nil end
  local f = {}
  for i = 1, #h, 2 do f[h[i]] = h[i + 1] end
  return {
    phase = f.phase or 'idle',
    duration = tonumber(f.duration or '0'),
    endsAt = f.endsAt and tonumber(f.endsAt),
    remainingMs = f.remainingMs and tonumber(f.remainingMs),
    label = f.label,
    revision = tonumber(f.revision or '0'),
    created = tonumber(f.created or '0'),
    key = f.key,
    -- false when only `open` has written (a creation time, a key hash).
    stored = f.phase ~= nil,
  }
end

-- A seq no instance can have passed yet for this session at `at`: each
-- instance starts a session at this floor and publishes at most
-- PATCHES_PER_SECOND a second plus one patch per revision.
local function seq_floor(r, at)
  return PATCHES_PER_SECOND * (whole_seconds(at - r.created) + 1) + r.revision
end

-- One line, the label last since it may hold spaces: what the function
-- returns and publishes, and what RecordMessage parses.
local function encode(epoch, pos, session, r, at)
  local line = table.concat({
    epoch, int(pos), session, int(r.revision), int(seq_floor(r, at)), r.phase,
    int(r.duration), r.endsAt and int(r.endsAt) or '-',
    r.remainingMs and int(r.remainingMs) or '-', int(at),
  }, ' ')
  if r.label then line = line .. ' ' .. r.label end
  return line
end

-- A key hash as the session hash stores it: 64 lower-case hex digits.
local function is_key_hash(text)
  return type(text) == 'string' and #text == 64 and text:find('^[0-9a-f]+$') ~= nil
end

-- SessionRecord.applying: nil on success (r is changed), else the error code.
local function apply(r, op, a, b, label, at)
  if r.phase == 'running' and r.endsAt and r.endsAt <= at then
    r.phase = 'finished'
    r.endsAt = nil
  end
  if op == 'start' then
    if r.phase == 'running' or r.phase == 'paused' then return 'busy' end
    local endsAt
    if a == 'seconds' then
      local seconds = tonumber(b)
      if not seconds or seconds < SECONDS_MIN or seconds > SECONDS_MAX then
        return 'bad_request'
      end
      endsAt = at + seconds * 1000
    elseif a == 'until' then
      local deadline = tonumber(b)
      if not deadline or deadline - at < AHEAD_MIN or deadline - at > AHEAD_MAX then
        return 'bad_request'
      end
      endsAt = deadline
    else
      return 'bad_request'
    end
    r.phase = 'running'
    r.endsAt = endsAt
    r.remainingMs = nil
    r.duration = whole_seconds(endsAt - at)
    if label ~= '' then r.label = label else r.label = nil end
  elseif op == 'cancel' then
    if r.phase ~= 'running' and r.phase ~= 'paused' then return 'not_running' end
    r.phase = 'idle'
    r.endsAt = nil
    r.remainingMs = nil
  elseif op == 'pause' then
    if r.phase ~= 'running' then return 'not_running' end
    r.phase = 'paused'
    r.remainingMs = r.endsAt - at
    r.endsAt = nil
  elseif op == 'resume' then
    if r.phase ~= 'paused' then return 'not_paused' end
    r.phase = 'running'
    r.endsAt = at + r.remainingMs
    r.remainingMs = nil
  elseif op == 'adjust' then
    if r.phase ~= 'running' and r.phase ~= 'paused' then return 'not_running' end
    local seconds = tonumber(a)
    if not seconds or seconds == 0 or seconds < ADJUST_MIN or seconds > ADJUST_MAX then
      return 'bad_request'
    end
    local left = (r.endsAt and (r.endsAt - at) or r.remainingMs) + seconds * 1000
    if left > AHEAD_MAX then return 'bad_request' end
    r.duration = math.max(0, r.duration + seconds)
    if left <= 0 then
      r.phase = 'finished'
      r.endsAt = nil
      r.remainingMs = nil
    elseif r.phase == 'running' then
      r.endsAt = at + left
    else
      r.remainingMs = left
    end
  elseif op == 'rotate_key' then
    if not is_key_hash(a) then return 'bad_request' end
    r.key = a
  else
    return 'bad_request'
  end
  r.revision = r.revision + 1
  return nil
end

local function write(key, r, at)
  redis.call('DEL', key)
  local fields = {
    'phase', r.phase, 'duration', int(r.duration), 'revision', int(r.revision),
    'created', int(r.created), 'updatedAt', int(at),
  }
  if r.endsAt then table.insert(fields, 'endsAt'); table.insert(fields, int(r.endsAt)) end
  if r.remainingMs then
    table.insert(fields, 'remainingMs'); table.insert(fields, int(r.remainingMs))
  end
  if r.label then table.insert(fields, 'label'); table.insert(fields, r.label) end
  if r.key then table.insert(fields, 'key'); table.insert(fields, r.key) end
  redis.call('HSET', key, unpack(fields))
  redis.call('PEXPIRE', key, KEEP_MS)
end

-- The epoch the caller knows is the cluster's. Redis that lost its data
-- gets it back from the caller; another epoch means the caller is stale.
local function check_epoch(key, epoch)
  local current = redis.call('GET', key)
  if not current then
    redis.call('SET', key, epoch)
    return nil
  end
  if current ~= epoch then return current end
  return nil
end

-- ARGV: epoch, channel, session, op, a, b, finished label ('' for none),
-- then the caller's record (phase, duration, endsAt, remainingMs, revision,
-- label): the base when Redis has lost the session's hash; last, optional,
-- the latest Redis time (ms) at which the caller still waits for the answer
-- ('' for none); then the hash of the key the commanding connection holds
-- ('' in open mode).
-- Returns {'ok', line} | {'rejected', code} | {'epoch', current} | {'expired'}.
-- A rotation also publishes `key <session> <revision> <hash>` first, so every
-- instance stops taking the old key.
local function command(keys, args)
  local epoch, channel, session, op = args[1], args[2], args[3], args[4]
  local at = now_ms()
  -- A call that arrives after its caller gave up (a link that stalled and
  -- then delivered) must change nothing: the caller answered unavailable.
  if args[14] and args[14] ~= '' and at > tonumber(args[14]) then return {'expired'} end
  local other = check_epoch(keys[2], epoch)
  if other then return {'epoch', other} end
  local presented = args[15] or ''
  local r = read(keys[1])
  local had = r ~= nil
  if not r or not r.stored then
    r = {
      phase = args[8], duration = tonumber(args[9]),
      endsAt = args[10] ~= '-' and tonumber(args[10]) or nil,
      remainingMs = args[11] ~= '-' and tonumber(args[11]) or nil,
      revision = tonumber(args[12]), label = args[13] ~= '' and args[13] or nil,
      created = (r and r.created ~= 0 and r.created) or at,
      -- A hash Redis lost keeps the key the caller proved it holds; one
      -- that `open` wrote keeps what it says (no key: open mode).
      key = r and r.key,
    }
    if not r.key and not had and presented ~= '' then r.key = presented end
  end
  if r.key and r.key ~= presented then return {'rejected', 'forbidden'} end
  local refused = apply(r, op, args[5], args[6], args[7], at)
  if refused then return {'rejected', refused} end
  write(keys[1], r, at)
  if op == 'rotate_key' then
    redis.call('PUBLISH', channel, table.concat({'key', session, int(r.revision), r.key}, ' '))
  end
  local pos = redis.call('INCR', keys[3])
  local line = encode(epoch, pos, session, r, at)
  redis.call('PUBLISH', channel, line)
  return {'ok', line}
end

-- A session opened on an instance: make sure it has a creation time and, in
-- key mode, a controller key hash (the first instance to ask wins, so a
-- creation race between instances settles on one key). Returns
-- {line, key hash or ''}.
-- ARGV: epoch, session, key hash ('' in open mode).
local function open(keys, args)
  local epoch, session, keyHash = args[1], args[2], args[3]
  local at = now_ms()
  redis.call('HSETNX', keys[1], 'created', int(at))
  if keyHash ~= '' then redis.call('HSETNX', keys[1], 'key', keyHash) end
  redis.call('PEXPIRE', keys[1], KEEP_MS)
  local r = read(keys[1])
  local pos = tonumber(redis.call('GET', keys[3]) or '0')
  return {encode(epoch, pos, session, r, at), r.key or ''}
end

-- Viewer counts, cluster-wide: each instance keeps its own count of a
-- session's viewers in the session's viewer hash (field: the instance id),
-- and its heartbeat in the instance set, a sorted set scored by the Redis
-- time (ms) until which the instance counts. The counts of an instance whose
-- heartbeat expired stop counting (and are removed). The sum is published
-- when it changes, so every instance can show it. Every key is declared.

-- How long an expired instance stays in the set: long enough for every live
-- instance's heartbeat to have seen it expire.
local FORGET_INSTANCE_MS = 60000

local function beat(set, instance, ttl, at)
  redis.call('ZADD', set, int(at + tonumber(ttl)), instance)
end

-- KEYS: 1 the session's viewer hash, 2 the instance set, 3 the caller's
-- session index (the sessions it counts viewers in, so that when it dies
-- only those are recounted). ARGV: instance id, its count, channel, session,
-- heartbeat TTL (ms). Returns {sum, version}: the version orders sums that
-- reach an instance both as replies and as messages.
local function viewers(keys, args)
  local instance, count, channel, session = args[1], tonumber(args[2]), args[3], args[4]
  local at = now_ms()
  beat(keys[2], instance, args[5], at)
  if count > 0 then
    redis.call('HSET', keys[1], instance, int(count))
    redis.call('SADD', keys[3], session)
  else
    redis.call('HDEL', keys[1], instance)
    redis.call('SREM', keys[3], session)
  end
  redis.call('PEXPIRE', keys[3], KEEP_MS)
  local version = redis.call('HINCRBY', keys[1], '#', 1)
  local h = redis.call('HGETALL', keys[1])
  local sum, before = 0, nil
  for i = 1, #h, 2 do
    if h[i] == '#' then
      -- the version, not an instance
    elseif h[i] == '~' then
      before = tonumber(h[i + 1])
    else
      local deadline = redis.call('ZSCORE', keys[2], h[i])
      if deadline and tonumber(deadline) >= at then
        sum = sum + tonumber(h[i + 1])
      else
        redis.call('HDEL', keys[1], h[i])
      end
    end
  end
  if sum ~= before then
    redis.call('HSET', keys[1], '~', int(sum))
    redis.call(
      'PUBLISH', channel,
      table.concat({'viewers', session, int(sum), instance, int(version)}, ' '))
  end
  redis.call('PEXPIRE', keys[1], KEEP_MS)
  return {sum, version}
end

-- An instance's heartbeat, about once a second. KEYS: 1 the instance set.
-- ARGV: instance id, TTL (ms). Returns {lapsed, expired}: lapsed is 1 when
-- this instance's own heartbeat had expired (others may have dropped its
-- counts, so it sends them again); expired lists the instances whose
-- heartbeat has and that nobody has reaped yet (see reap). Steady state
-- costs one call a second per instance, whatever the session count.
local function heartbeat(keys, args)
  local instance = args[1]
  local at = now_ms()
  local own = redis.call('ZSCORE', keys[1], instance)
  beat(keys[1], instance, args[2], at)
  redis.call('ZREMRANGEBYSCORE', keys[1], '-inf', int(at - FORGET_INSTANCE_MS))
  local expired = redis.call('ZRANGEBYSCORE', keys[1], '-inf', '(' .. int(at))
  local lapsed = 0
  if not own or tonumber(own) < at then lapsed = 1 end
  return {lapsed, expired}
end

-- Claims an expired instance for recounting: the first live instance to ask
-- gets the sessions it counted viewers in (and recounts them), every later
-- one gets nothing, and one that is not expired after all is left alone.
-- KEYS: 1 the instance set, 2 that instance's session index. ARGV: its id.
local function reap(keys, args)
  local at = now_ms()
  local deadline = redis.call('ZSCORE', keys[1], args[1])
  if not deadline or tonumber(deadline) >= at then return {} end
  redis.call('ZREM', keys[1], args[1])
  local sessions = redis.call('SMEMBERS', keys[2])
  redis.call('DEL', keys[2])
  return sessions
end

redis.register_function('countdown_command', command)
redis.register_function('countdown_viewers', viewers)
redis.register_function('countdown_open', open)
redis.register_function('countdown_heartbeat', heartbeat)
redis.register_function('countdown_reap', reap)
