#!lua name=countdown_v3
-- The cluster's one writer of session state. Every state change is one call
-- of countdown_v3_command: it checks the phase, takes the time from Redis, bumps
-- the revision, writes the session hash and publishes the change, all in one
-- atomic step, so two starts racing on two instances give one ack and one
-- busy without WATCH/MULTI. The rules mirror SessionRecord.applying in
-- Sources/CountdownCore/SessionRecord+Rules.swift exactly: same checks in the same
-- order, same error codes, same limits. RedisCluster embeds this file as
-- FunctionLibrary.source, and a test fails when the two differ.
--
-- The library's name and its functions' carry a version. This release
-- keeps countdown_v3's names but not its record: the hash's new fields
-- (a run's overtime and levels, a finish's overMs, the message and
-- blackout) and the record line's new tokens are unknown to the previous
-- release, so instances of the two must not share a Redis (see
-- docs/operating.md: no rolling upgrade across it).
--
-- KEYS: 1 the session hash, 2 the epoch, 3 the publish position counter,
-- 4 the session index (optional), 5 the command's idempotency hash (optional),
-- 6-8 with it the idempotency keys held by the session, by the client's
-- address and by everyone (optional: see idem_sets), then, when webhooks are
-- on (ARG.events), the events keys (see EVENTS).
-- In key mode the session hash holds its controller key's hash, and every
-- command presents the hash of the key its connection holds: a mismatch is
-- refused here too, so one instance's bug cannot command a keyed session.

local SECONDS_MIN, SECONDS_MAX = 1, 86400
local ADJUST_MIN, ADJUST_MAX = -86400, 86400
local AHEAD_MIN, AHEAD_MAX = 1000, 2592000000
local TIMEOUT_MIN, TIMEOUT_MAX = 1, 86400
-- RunOptions' warning and danger times (seconds left), and
-- SessionRecord.maxOvertimeMs: how long a run may stay in overtime before
-- it finishes by itself (stopped), so an abandoned one cannot tick for ever.
local LEVEL_MIN, LEVEL_MAX = 1, 86400
local OVERTIME_MAX_MS = 86400000
-- SessionRecord's longest presenter message, in Unicode scalars.
local MESSAGE_MAX = 140
-- SessionStateMachine.maxUnstoredPatchesPerSecond: what one instance may
-- publish per second without a command (a tick and a viewer count).
local PATCHES_PER_SECOND = 5
-- A session hash outlives its last command or read by this long.
local KEEP_MS = 7 * 86400 * 1000
-- How many nonces of applied (and of voided) commands a session keeps: a
-- command whose reply was lost is looked up among them (see resolve).
local NONCES_KEPT = 16
-- What a session nobody commanded leaves behind (a creation time, viewer
-- counts) outlives the last instance that has it open by this long: those
-- instances renew the viewer counts well within it (see renew).
local VIEW_MS = 180000
-- IdempotencyKey.keepMs: a command's first answer is kept this long.
local IDEM_MS = 86400000
-- Rules refusals that are remembered for an idempotency key: final answers
-- (IdempotentAnswer.remembers). Others are "try again", or depend on the caller.
local REMEMBERED = {
  busy = true, not_running = true, not_paused = true, not_waiting = true, bad_request = true,
}
local function int(n) return string.format('%.0f', n) end

local function whole_seconds(ms)
  if ms <= 0 then return 0 end
  return math.floor((ms + 999) / 1000)
end

local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- SessionRecord's ranges: a record outside them is damaged, and nothing
-- here does arithmetic on a field before it is checked.
local EPOCH_MAX = 253402300799999
local DURATION_MAX = 2147483647
local COUNTER_MAX = 9007199254740991
local LABEL_MAX = 64
local PHASES = {
  idle = true, running = true, paused = true, finished = true, waiting = true, overtime = true,
}
local OUTCOMES = {elapsed = true, done = true, failed = true, timeout = true, stopped = true}
-- The phases a run is in, which alone hold its options (RunOptions).
local IN_RUN = {running = true, paused = true, overtime = true}

-- A whole number in decimal digits within lo..hi, else nil. tonumber alone
-- would take '1e3', '0x10', ' 5', 'inf' and 'nan'.
local function integer(text, lo, hi)
  if type(text) ~= 'string' or #text > 17 or not text:find('^%-?%d+$') then return nil end
  local n = tonumber(text)
  if n < lo or n > hi then return nil end
  if n == 0 then return 0 end
  return n
end

-- 1 to `most` characters (Unicode scalars: bytes that start one), none of
-- them a control character (a NUL would cut C strings short on every viewer).
local function is_text(text, most)
  if type(text) ~= 'string' or #text == 0 or text:find('[%z\1-\31\127]') then return false end
  local _, characters = text:gsub('[^\128-\191]', '')
  return characters <= most
end

-- SessionRecord.isValidFinishedLabel.
local function is_label(text) return is_text(text, LABEL_MAX) end

-- SessionRecord.isValidMessage: the presenter message, up to 140 characters.
local function is_message(text) return is_text(text, MESSAGE_MAX) end

-- A flag as the hash and the ARGV hold it: '1' or '0' (absent: false), else nil.
local function flag(text)
  if text == nil or text == '0' then return false end
  if text == '1' then return true end
  return nil
end

-- A key hash as the session hash stores it: 64 lower-case hex digits.
local function is_key_hash(text)
  return type(text) == 'string' and #text == 64 and text:find('^[0-9a-f]+$') ~= nil
end

-- A record from its fields as text (a session hash's, or a caller's), or
-- nil and why it cannot be taken: SessionRecord.damage. Fields that only
-- `open` writes (a creation time, a key hash) make an unstored record.
-- `caller`: the fields are a caller's record, written at some time up to
-- f.updatedAt (now), not at it.
local function parse(f, caller)
  local r = {
    phase = f.phase, label = f.label, key = f.key, stored = f.phase ~= nil,
    applied = f.applied, voided = f.voided, waitLabel = f.waitLabel, outcome = f.outcome,
    message = f.message,
  }
  r.created = integer(f.created or '0', 0, EPOCH_MAX)
  if not r.created then return nil, 'created out of range' end
  if r.key ~= nil and not is_key_hash(r.key) then return nil, 'key is not a key hash' end
  if not r.stored then
    r.phase, r.duration, r.revision = 'idle', 0, 0
    return r
  end
  if not PHASES[r.phase] then return nil, 'unknown phase' end
  r.duration = integer(f.duration, 0, DURATION_MAX)
  if not r.duration then return nil, 'duration out of range' end
  r.revision = integer(f.revision, 0, COUNTER_MAX)
  if not r.revision then return nil, 'revision out of range' end
  if r.label ~= nil and not is_label(r.label) then return nil, 'label is not text' end
  if r.waitLabel ~= nil and not is_label(r.waitLabel) then return nil, 'waitLabel is not text' end
  if r.outcome ~= nil and not OUTCOMES[r.outcome] then return nil, 'unknown outcome' end
  if r.message ~= nil and not is_message(r.message) then return nil, 'message is not text' end
  r.blackout = flag(f.blackout)
  if r.blackout == nil then return nil, 'blackout is not a flag' end
  r.overtime = flag(f.overtime)
  if r.overtime == nil then return nil, 'overtime is not a flag' end
  if f.warnAtSeconds ~= nil then
    r.warn = integer(f.warnAtSeconds, LEVEL_MIN, LEVEL_MAX)
    if not r.warn then return nil, 'warnAtSeconds out of range' end
  end
  if f.dangerAtSeconds ~= nil then
    r.danger = integer(f.dangerAtSeconds, LEVEL_MIN, LEVEL_MAX)
    if not r.danger then return nil, 'dangerAtSeconds out of range' end
  end
  if r.warn and r.danger and r.danger >= r.warn then
    return nil, 'dangerAtSeconds is not below warnAtSeconds'
  end
  if (r.overtime or r.warn or r.danger) and not IN_RUN[r.phase] then
    return nil, 'only a run holds overtime, warnAtSeconds or dangerAtSeconds'
  end
  if r.phase == 'overtime' and not r.overtime then
    return nil, 'an overtime record lacks its overtime option'
  end
  if f.overMs ~= nil then
    r.overMs = integer(f.overMs, 0, OVERTIME_MAX_MS)
    if not r.overMs then return nil, 'overMs out of range' end
  end
  if (r.overMs ~= nil) ~= (r.outcome == 'stopped') then
    return nil, 'a stopped record, and only a stopped one, holds overMs'
  end
  if f.startedAt ~= nil then
    r.startedAt = integer(f.startedAt, 0, EPOCH_MAX)
    if not r.startedAt then return nil, 'startedAt out of range' end
  end
  if f.timeoutAt ~= nil then
    r.timeoutAt = integer(f.timeoutAt, 0, EPOCH_MAX)
    if not r.timeoutAt then return nil, 'timeoutAt out of range' end
  end
  if f.endsAt ~= nil then
    r.endsAt = integer(f.endsAt, 0, EPOCH_MAX)
    if not r.endsAt then return nil, 'endsAt out of range' end
  end
  if f.remainingMs ~= nil then
    r.remainingMs = integer(f.remainingMs, 1, AHEAD_MAX)
    if not r.remainingMs then return nil, 'remainingMs out of range' end
  end
  local running, paused = r.phase == 'running', r.phase == 'paused'
  local waiting, over = r.phase == 'waiting', r.phase == 'overtime'
  -- An overtime record keeps the deadline it passed, overSince, as endsAt.
  if (r.endsAt ~= nil) ~= (running or over) or (r.remainingMs ~= nil) ~= paused
    or (r.startedAt ~= nil) ~= waiting or (r.timeoutAt ~= nil and not waiting)
    or (r.waitLabel ~= nil and not waiting) or (r.outcome ~= nil) ~= (r.phase == 'finished')
  then
    return nil, 'fields disagree with the phase'
  end
  if waiting and r.duration ~= 0 then return nil, 'a waiting record has a duration' end
  if r.timeoutAt ~= nil then
    local span = r.timeoutAt - r.startedAt
    if span < TIMEOUT_MIN * 1000 or span > TIMEOUT_MAX * 1000 then
      return nil, 'timeoutAt is not 1 s to 1 day after startedAt'
    end
  end
  -- No command sets a deadline more than the longest run past its own time.
  local updated = integer(f.updatedAt, 0, EPOCH_MAX)
  if f.updatedAt ~= nil and not updated then return nil, 'updatedAt out of range' end
  if running and updated and r.endsAt - updated > AHEAD_MAX then
    return nil, "endsAt is more than 30 days after updatedAt"
  end
  if waiting and updated and r.startedAt > updated then
    return nil, 'startedAt is after updatedAt'
  end
  -- Overtime's deadline may be after the record's time, as a running one's
  -- may (a run written before zero, settled since), or less than the
  -- longest overtime before it: by then it would have finished by itself.
  -- A caller's record may have been written long before now.
  if over and updated and (r.endsAt - updated > AHEAD_MAX
    or (not caller and updated - r.endsAt >= OVERTIME_MAX_MS))
  then
    return nil, 'overSince is more than 30 days after updatedAt or a day before it'
  end
  return r
end

-- The session hash: nil when absent; else the record, or nil, why it is
-- damaged, and its raw fields.
local function read(key)
  local h = redis.call('HGETALL', key)
  if #h == 0 then return nil end
  local f = {}
  for i = 1, #h, 2 do f[h[i]] = h[i + 1] end
  -- A finished hash that countdown_v2 wrote has no outcome: its run elapsed.
  if f.phase == 'finished' and f.outcome == nil then f.outcome = 'elapsed' end
  local r, why = parse(f)
  return r, why, f
end

-- A seq no instance can have passed yet for this session at `at`: each
-- instance starts a session at this floor and publishes at most
-- PATCHES_PER_SECOND a second plus one patch per revision.
local function seq_floor(r, at)
  local floor = PATCHES_PER_SECOND * (whole_seconds(at - r.created) + 1) + r.revision
  return math.min(floor, COUNTER_MAX)
end

-- One line, the texts last since they may hold spaces: what the function
-- returns and publishes, and what RecordMessage parses. The wait label's
-- and the message's lengths in bytes (0: none) say where each ends; the
-- finished label is the rest. Each text present follows one space.
local function encode(epoch, pos, session, r, at)
  local line = table.concat({
    epoch, int(pos), session, int(r.revision), int(seq_floor(r, at)), r.phase,
    int(r.duration), r.endsAt and int(r.endsAt) or '-',
    r.remainingMs and int(r.remainingMs) or '-', int(at),
    r.startedAt and int(r.startedAt) or '-', r.timeoutAt and int(r.timeoutAt) or '-',
    r.outcome or '-', int(r.waitLabel and #r.waitLabel or 0),
    r.overtime and '1' or '0', r.warn and int(r.warn) or '-', r.danger and int(r.danger) or '-',
    r.overMs and int(r.overMs) or '-', r.blackout and '1' or '0',
    int(r.message and #r.message or 0),
  }, ' ')
  if r.waitLabel then line = line .. ' ' .. r.waitLabel end
  if r.message then line = line .. ' ' .. r.message end
  if r.label then line = line .. ' ' .. r.label end
  return line
end

-- An optional label operand: '' for none, else text (false: not a label).
local function label_operand(text)
  if text == nil or text == '' then return nil end
  if is_label(text) then return text end
  return false
end

-- Leaves the waiting phase's fields behind.
local function end_wait(r)
  r.startedAt = nil
  r.timeoutAt = nil
  r.waitLabel = nil
end

-- Leaves a run's times and options behind (RunOptions.none).
local function end_run(r)
  r.endsAt = nil
  r.remainingMs = nil
  r.overtime = false
  r.warn = nil
  r.danger = nil
end

-- A run or a wait holds the session: start and wait are busy.
local function is_busy(r) return IN_RUN[r.phase] or r.phase == 'waiting' end

-- The rules of each op, SessionRecord.applying's cases: each changes r and
-- returns nil, or returns the error code. Keyed by the op names of
-- SessionCommand.Op; a test fails when the two lists differ.
local RULES = {}

-- o: the run's options, o.overtime '1' or '0' ('' for '0'), o.warn and
-- o.danger seconds ('' for none).
function RULES.start(r, a, b, label, at, o)
  if is_busy(r) then return 'busy' end
  local endsAt
  if a == 'seconds' then
    local seconds = integer(b, SECONDS_MIN, SECONDS_MAX)
    if not seconds then return 'bad_request' end
    endsAt = at + seconds * 1000
  elseif a == 'until' then
    local deadline = integer(b, at + AHEAD_MIN, at + AHEAD_MAX)
    if not deadline then return 'bad_request' end
    endsAt = deadline
  else
    return 'bad_request'
  end
  -- A caller that sends no options ('') asks for none.
  local overtime, warn, danger = flag(o.overtime ~= '' and o.overtime or nil), nil, nil
  if overtime == nil then return 'bad_request' end
  if o.warn ~= '' then
    warn = integer(o.warn, LEVEL_MIN, LEVEL_MAX)
    if not warn then return 'bad_request' end
  end
  if o.danger ~= '' then
    danger = integer(o.danger, LEVEL_MIN, LEVEL_MAX)
    if not danger then return 'bad_request' end
  end
  if warn and danger and danger >= warn then return 'bad_request' end
  r.phase = 'running'
  r.outcome = nil
  r.overMs = nil
  r.endsAt = endsAt
  r.remainingMs = nil
  r.overtime, r.warn, r.danger = overtime, warn, danger
  r.duration = whole_seconds(endsAt - at)
  if label == '' then
    r.label = nil
  elseif is_label(label) then
    r.label = label
  else
    return 'bad_request'
  end
end

function RULES.cancel(r)
  if not is_busy(r) then return 'not_running' end
  r.phase = 'idle'
  end_run(r)
  end_wait(r)
end

-- A run ends here, before or past zero: overMs is how far past.
function RULES.stop(r, a, b, label, at)
  if not IN_RUN[r.phase] then return 'not_running' end
  -- A deadline after now (a record written before zero) is no time over.
  r.overMs = r.phase == 'overtime' and math.max(0, at - r.endsAt) or 0
  r.phase = 'finished'
  r.outcome = 'stopped'
  end_run(r)
end

-- a: '1' to set the message (label: its text), '' to clear it. Any phase.
function RULES.message(r, a, b, label)
  if a == '1' and is_message(label) then
    r.message = label
  elseif a == '' then
    r.message = nil
  else
    return 'bad_request'
  end
end

-- a: '1' on, '0' off. Any phase.
function RULES.blackout(r, a)
  if a ~= '1' and a ~= '0' then return 'bad_request' end
  r.blackout = a == '1'
end

function RULES.pause(r, a, b, label, at)
  if r.phase ~= 'running' then return 'not_running' end
  r.phase = 'paused'
  -- A clock stepped back by weeks could leave more than a run may hold.
  r.remainingMs = math.min(r.endsAt - at, AHEAD_MAX)
  r.endsAt = nil
end

function RULES.resume(r, a, b, label, at)
  if r.phase ~= 'paused' then return 'not_paused' end
  r.phase = 'running'
  r.endsAt = at + r.remainingMs
  r.remainingMs = nil
end

-- In overtime the deadline passed (overSince) moves: ahead of now the run
-- counts down again; still behind, it stays overtime from the new one.
function RULES.adjust(r, a, b, label, at)
  if not IN_RUN[r.phase] then return 'not_running' end
  local seconds = integer(a, ADJUST_MIN, ADJUST_MAX)
  if not seconds or seconds == 0 then return 'bad_request' end
  local left = (r.endsAt and (r.endsAt - at) or r.remainingMs) + seconds * 1000
  if left > AHEAD_MAX or -left >= OVERTIME_MAX_MS then return 'bad_request' end
  r.duration = math.min(DURATION_MAX, math.max(0, r.duration + seconds))
  if left <= 0 and r.overtime then
    r.phase = 'overtime'
    r.endsAt = at + left
    r.remainingMs = nil
  elseif left <= 0 then
    r.phase = 'finished'
    r.outcome = 'elapsed'
    end_run(r)
  elseif r.phase == 'paused' then
    r.remainingMs = left
  else
    r.phase = 'running'
    r.endsAt = at + left
  end
end

function RULES.rotate_key(r, a)
  if not is_key_hash(a) then return 'bad_request' end
  r.key = a
end

-- a: timeoutSeconds ('' for none), b: the timeout's label, label: the wait's.
function RULES.wait(r, a, b, label, at)
  if is_busy(r) then return 'busy' end
  local shown, timeoutLabel = label_operand(label), label_operand(b)
  if shown == false or timeoutLabel == false then return 'bad_request' end
  local timeoutAt
  if a ~= nil and a ~= '' then
    local seconds = integer(a, TIMEOUT_MIN, TIMEOUT_MAX)
    if not seconds then return 'bad_request' end
    timeoutAt = at + seconds * 1000
  end
  r.phase = 'waiting'
  r.outcome = nil
  r.overMs = nil
  r.startedAt = at
  r.timeoutAt = timeoutAt
  r.duration = 0
  r.waitLabel = shown
  r.label = timeoutLabel
end

-- done and fail: a wait ends with this outcome, and the label (if any) shown.
local function end_waiting(r, label, outcome)
  if r.phase ~= 'waiting' then return 'not_waiting' end
  local finished = label_operand(label)
  if finished == false then return 'bad_request' end
  r.phase = 'finished'
  r.outcome = outcome
  r.label = finished
  end_wait(r)
end

function RULES.done(r, a, b, label) return end_waiting(r, label, 'done') end

function RULES.fail(r, a, b, label) return end_waiting(r, label, 'failed') end

-- SessionRecord.settled(at:): the record as it stands at `at`. A run past
-- its deadline finishes (elapsed), or with overtime counts up from it; an
-- overtime that has lasted OVERTIME_MAX_MS finishes (stopped) at that.
local function settle(r, at)
  if r.phase == 'running' and r.endsAt and r.endsAt <= at and r.overtime then
    r.phase = 'overtime'
  elseif r.phase == 'running' and r.endsAt and r.endsAt <= at then
    r.phase = 'finished'
    r.outcome = 'elapsed'
    end_run(r)
  end
  if r.phase == 'overtime' and at - r.endsAt >= OVERTIME_MAX_MS then
    r.phase = 'finished'
    r.outcome = 'stopped'
    r.overMs = OVERTIME_MAX_MS
    end_run(r)
  elseif r.phase == 'waiting' and r.timeoutAt and r.timeoutAt <= at then
    -- Every instance derives the same end from the shared timeoutAt.
    r.phase = 'finished'
    r.outcome = 'timeout'
    end_wait(r)
  end
end

-- SessionRecord.applying: nil on success (r is changed), else the error code.
-- o: the start's run options.
local function apply(r, op, a, b, label, at, o)
  settle(r, at)
  local rule = RULES[op]
  if not rule then return 'bad_request' end
  local refused = rule(r, a, b, label, at, o)
  if refused then return refused end
  if r.revision >= COUNTER_MAX then return 'bad_request' end
  r.revision = r.revision + 1
  return nil
end

-- Nonces are kept as one space-separated field, the newest last.
local function listed(list, nonce)
  if not list then return false end
  for item in string.gmatch(list, '%S+') do
    if item == nonce then return true end
  end
  return false
end

local function count_listed(list)
  local n = 0
  if list then for _ in string.gmatch(list, '%S+') do n = n + 1 end end
  return n
end

local function push(list, nonce)
  local items = {}
  if list then for item in string.gmatch(list, '%S+') do table.insert(items, item) end end
  table.insert(items, nonce)
  while #items > NONCES_KEPT do table.remove(items, 1) end
  return table.concat(items, ' ')
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
  if r.startedAt then table.insert(fields, 'startedAt'); table.insert(fields, int(r.startedAt)) end
  if r.timeoutAt then table.insert(fields, 'timeoutAt'); table.insert(fields, int(r.timeoutAt)) end
  if r.outcome then table.insert(fields, 'outcome'); table.insert(fields, r.outcome) end
  if r.waitLabel then table.insert(fields, 'waitLabel'); table.insert(fields, r.waitLabel) end
  if r.overtime then table.insert(fields, 'overtime'); table.insert(fields, '1') end
  if r.warn then table.insert(fields, 'warnAtSeconds'); table.insert(fields, int(r.warn)) end
  if r.danger then table.insert(fields, 'dangerAtSeconds'); table.insert(fields, int(r.danger)) end
  if r.overMs then table.insert(fields, 'overMs'); table.insert(fields, int(r.overMs)) end
  if r.message then table.insert(fields, 'message'); table.insert(fields, r.message) end
  if r.blackout then table.insert(fields, 'blackout'); table.insert(fields, '1') end
  if r.key then table.insert(fields, 'key'); table.insert(fields, r.key) end
  if r.applied then table.insert(fields, 'applied'); table.insert(fields, r.applied) end
  if r.voided then table.insert(fields, 'voided'); table.insert(fields, r.voided) end
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

-- The ARGV slots of countdown_v3_command, by name: CommandCall.Slot in
-- Sources/RedisCluster/CommandCall.swift names the same slots with the same
-- numbers, and a test fails when the two differ. The command's operands
-- (first, second, label: what SessionCommand's case carries); then the
-- caller's record (phase ... baseLabel), the base when Redis has lost the
-- session's hash; then, each optional ('' for none), the latest Redis time
-- (ms) at which the caller still waits for the answer, the command's nonce,
-- kept with the session when it applies so that a caller whose reply was
-- lost can tell (resolve), and the hash of the key the commanding connection
-- holds ('' in open mode); then the rest of the caller's record, a wait's
-- (startedAt, timeoutAt: '-' for none) and a finished one's outcome ('' for none);
-- then '1' when an API token authorised the command: it may command any
-- session, and passes the key check without a key (an instance never sends
-- a session's own hash back for it); then the command's fingerprint, kept
-- with an idempotency key's answer; then '1' when webhooks are on (see
-- EVENTS). Then the rest of the caller's record: a run's options (overtime
-- '1' or '0', warnAtSeconds and dangerAtSeconds '-' for none), a stopped
-- finish's overMs ('-'), the message ('' for none) and blackout ('1' or
-- '0'); then a start's run options (overtime '1' or '0', the warning and
-- danger seconds '' for none; all '' for other ops); then the idempotency
-- limits per session, per address and in all ('' for none; see idem_sets).
local ARG = {
  epoch = 1, channel = 2, session = 3, op = 4, first = 5, second = 6, label = 7,
  phase = 8, duration = 9, endsAt = 10, remainingMs = 11, revision = 12, baseLabel = 13,
  deadline = 14, nonce = 15, presented = 16,
  startedAt = 17, timeoutAt = 18, outcome = 19, baseWaitLabel = 20, byToken = 21,
  fingerprint = 22, events = 23,
  overtime = 24, warnAtSeconds = 25, dangerAtSeconds = 26, overMs = 27, baseMessage = 28,
  blackout = 29, overtimeOption = 30, warnOption = 31, dangerOption = 32,
  idemPerSession = 33, idemPerAddress = 34, idemTotal = 35,
}

-- IdempotencyLimits: the keys a session, a client address and everyone may
-- hold at once. Each is a sorted set of idempotency hashes' names scored by
-- when they were remembered, so those past their day leave it as the hashes
-- do. A new key past a limit is refused rate_limited and nothing applies:
-- making room would forget a key whose retry then applies twice, and the
-- key that went could be another session's or another client's.
local IDEM_LIMIT_MAX = 1000000000

-- The sets of a call whose KEYS carry them (6-8), each with its limit from
-- ARGV ('' or absent: no limit), or nil. A caller from before the limits
-- passes neither, and its keys are not counted.
local function idem_sets(keys, given, args)
  if given < 8 then return nil end
  local sets = {}
  local limits = {args[ARG.idemPerSession], args[ARG.idemPerAddress], args[ARG.idemTotal]}
  for i = 1, 3 do
    local limit = integer(limits[i] or '', 1, IDEM_LIMIT_MAX)
    if limit then sets[#sets + 1] = {key = keys[5 + i], limit = limit} end
  end
  return sets
end

-- Whether a new key fits within every limit, once keys past their day are gone.
local function idem_admits(sets, at)
  for _, set in ipairs(sets) do
    redis.call('ZREMRANGEBYSCORE', set.key, '-inf', int(at - IDEM_MS))
    if redis.call('ZCARD', set.key) >= set.limit then return false end
  end
  return true
end

-- Remembers a command's first answer in its idempotency hash, for a day,
-- and counts the key in each set.
local function idem_remember(idem, sets, at, ...)
  redis.call('HSET', idem, ...)
  redis.call('PEXPIRE', idem, IDEM_MS)
  for _, set in ipairs(sets or {}) do
    redis.call('ZADD', set.key, int(at), idem)
    redis.call('PEXPIRE', set.key, IDEM_MS)
  end
end

-- Webhooks' transactional outbox: with ARG.events = '1', the command's
-- KEYS end with three more, the events stream, the deadlines set and the
-- deadlines' records, and every applied change is added to the stream in
-- this same call (op, the record line, at), so an event is recorded exactly
-- when its change is. A run's endsAt or a wait's timeoutAt is kept in the
-- deadlines set (scored by it) with the record line it belongs to: the
-- finish no command causes is moved to the stream once, by the first call
-- that sees it due (a command on the session, or countdown_v3_due, which
-- the delivery side calls), since the move takes it out of the set. The
-- stream is trimmed to about EVENTS_MAX entries: beyond that backlog the
-- oldest go even if undelivered.
local EVENTS_MAX = 100000

local function events_keys(keys, first)
  return {stream = keys[first], deadlines = keys[first + 1], lines = keys[first + 2]}
end

local function emit(ev, op, line, at)
  redis.call(
    'XADD', ev.stream, 'MAXLEN', '~', EVENTS_MAX, '*', 'op', op, 'line', line, 'at', int(at))
end

-- Records the session's finish if its deadline is due at `at`; true when it did.
local function settle_due(ev, session, at)
  local score = redis.call('ZSCORE', ev.deadlines, session)
  if not score or tonumber(score) > at then return false end
  local line = redis.call('HGET', ev.lines, session)
  redis.call('ZREM', ev.deadlines, session)
  redis.call('HDEL', ev.lines, session)
  if not line then return false end
  emit(ev, 'finish', line, tonumber(score))
  return true
end

-- SessionRecord.selfFinishAt: when the record finishes by itself, if it
-- does. A run with overtime reaches zero silently and finishes (stopped) a
-- day after its deadline.
local function self_finish_at(r)
  if r.phase == 'running' and r.overtime then return r.endsAt + OVERTIME_MAX_MS end
  if r.phase == 'running' then return r.endsAt end
  if r.phase == 'overtime' then return r.endsAt + OVERTIME_MAX_MS end
  if r.phase == 'waiting' then return r.timeoutAt end
  return nil
end

-- After a change: the record's deadline (if any) replaces the session's
-- last, and the change is recorded. A key rotation is no event.
local function record_change(ev, session, op, r, line, at)
  local deadline = self_finish_at(r)
  if deadline then
    redis.call('ZADD', ev.deadlines, int(deadline), session)
    redis.call('HSET', ev.lines, session, line)
  else
    redis.call('ZREM', ev.deadlines, session)
    redis.call('HDEL', ev.lines, session)
  end
  if op ~= 'rotate_key' then emit(ev, op, line, at) end
end

-- Returns {'ok', line} | {'rejected', code} | {'epoch', current} | {'expired'}
-- | {'replayed', 'ok', line} | {'replayed', 'rejected', code}.
--
-- With KEYS[5], the hash of the command's Idempotency-Key (on this session):
-- if it exists the command was sequenced before, and its first answer is
-- returned without applying anything (a different command under the same
-- key is bad_request); else the answer is stored there, with the command's
-- fingerprint, for a day, in this same atomic call. KEYS[4], the session
-- index, gets every commanded session (countdown_v3_peek lists it).
-- A rotation also publishes `key <session> <revision> <hash>` first, so every
-- instance stops taking the old key.
local function command(keys, args)
  local epoch, channel = args[ARG.epoch], args[ARG.channel]
  local session, op = args[ARG.session], args[ARG.op]
  local at = now_ms()
  -- A call that arrives after its caller gave up (a link that stalled and
  -- then delivered) must change nothing: the caller answered unavailable.
  local deadline = integer(args[ARG.deadline] or '', 0, EPOCH_MAX)
  if deadline and at > deadline then return {'expired'} end
  local other = check_epoch(keys[2], epoch)
  if other then return {'epoch', other} end
  local presented = args[ARG.presented] or ''
  local by_token = args[ARG.byToken] == '1'
  local ev = nil
  local given = #keys
  if args[ARG.events] == '1' then
    given = #keys - 3
    ev = events_keys(keys, given + 1)
  end
  local index = given >= 4 and keys[4] or nil
  local idem = given >= 5 and keys[5] or nil
  local r, damage, f = read(keys[1])
  local nonce = args[ARG.nonce] or ''
  -- A caller that lost the reply has asked already, and answered that this
  -- command changed nothing: it must not apply now.
  if nonce ~= '' and f and listed(f.voided, nonce) then return {'expired'} end
  if not r or not r.stored then
    -- Redis lost the session's hash, or only `open` wrote it, or it is
    -- damaged: the caller's record, checked like any other, is the base.
    local base = parse({
      phase = args[ARG.phase], duration = args[ARG.duration],
      endsAt = args[ARG.endsAt] ~= '-' and args[ARG.endsAt] or nil,
      remainingMs = args[ARG.remainingMs] ~= '-' and args[ARG.remainingMs] or nil,
      revision = args[ARG.revision],
      label = args[ARG.baseLabel] ~= '' and args[ARG.baseLabel] or nil,
      startedAt = args[ARG.startedAt] ~= '-' and args[ARG.startedAt] or nil,
      timeoutAt = args[ARG.timeoutAt] ~= '-' and args[ARG.timeoutAt] or nil,
      outcome = args[ARG.outcome] ~= '' and args[ARG.outcome] or nil,
      waitLabel = args[ARG.baseWaitLabel] ~= '' and args[ARG.baseWaitLabel] or nil,
      overtime = args[ARG.overtime],
      warnAtSeconds = args[ARG.warnAtSeconds] ~= '-' and args[ARG.warnAtSeconds] or nil,
      dangerAtSeconds = args[ARG.dangerAtSeconds] ~= '-' and args[ARG.dangerAtSeconds] or nil,
      overMs = args[ARG.overMs] ~= '-' and args[ARG.overMs] or nil,
      message = args[ARG.baseMessage] ~= '' and args[ARG.baseMessage] or nil,
      blackout = args[ARG.blackout],
      -- The caller's record was written at or before now.
      updatedAt = int(at),
    }, true)
    if not base or not base.stored then return {'rejected', 'bad_request'} end
    base.created = (r and r.created ~= 0 and r.created)
      or (f and integer(f.created, 1, EPOCH_MAX)) or at
    -- A hash `open` wrote keeps its key (none: open mode), and so does a
    -- damaged one whose key is sound. A hash lost, or whose key is damaged
    -- too, takes the key the caller proved it holds.
    if r then
      base.key = r.key
    elseif f and is_key_hash(f.key) then
      base.key = f.key
    elseif presented ~= '' then
      base.key = presented
    end
    base.voided = f and f.voided
    r = base
  end
  if r.key and r.key ~= presented and not by_token then return {'rejected', 'forbidden'} end
  -- Only key mode has keys: an open-mode caller must not make a session keyed.
  if op == 'rotate_key' and not r.key and presented == '' then
    return {'rejected', 'bad_request'}
  end
  local fingerprint = args[ARG.fingerprint] or ''
  local sets = nil
  if idem then
    local first = redis.call('HMGET', idem, 'fingerprint', 'line', 'code')
    if first[1] then
      if first[1] ~= fingerprint then return {'rejected', 'bad_request'} end
      if first[2] then return {'replayed', 'ok', first[2]} end
      return {'replayed', 'rejected', first[3] or 'bad_request'}
    end
    sets = idem_sets(keys, given, args)
    if sets and not idem_admits(sets, at) then return {'rejected', 'rate_limited'} end
  end
  -- A deadline passed before this command: its finish came first.
  if ev then settle_due(ev, session, at) end
  local options = {
    overtime = args[ARG.overtimeOption] or '', warn = args[ARG.warnOption] or '',
    danger = args[ARG.dangerOption] or '',
  }
  local refused = apply(r, op, args[ARG.first], args[ARG.second], args[ARG.label], at, options)
  if refused then
    if idem and REMEMBERED[refused] then
      idem_remember(idem, sets, at, 'fingerprint', fingerprint, 'code', refused)
    end
    return {'rejected', refused}
  end
  if nonce ~= '' then r.applied = push(r.applied, nonce) end
  write(keys[1], r, at)
  if op == 'rotate_key' then
    redis.call('PUBLISH', channel, table.concat({'key', session, int(r.revision), r.key}, ' '))
  end
  local pos = redis.call('INCR', keys[3])
  local line = encode(epoch, pos, session, r, at)
  redis.call('PUBLISH', channel, line)
  if ev then record_change(ev, session, op, r, line, at) end
  if index then redis.call('ZADD', index, 0, session) end
  if idem then idem_remember(idem, sets, at, 'fingerprint', fingerprint, 'line', line) end
  -- A damaged hash was replaced: the caller logs why.
  if damage then return {'ok', line, damage} end
  return {'ok', line}
end

-- A session opened on an instance: make sure it has a creation time and, in
-- key mode, a controller key hash (the first instance to ask wins, so a
-- creation race between instances settles on one key). Returns
-- {line, key hash or ''[, why the hash was damaged]}.
-- ARGV: epoch, session, key hash ('' in open mode), channel.
local function open(keys, args)
  local epoch, session, keyHash = args[1], args[2], args[3]
  local at = now_ms()
  local r, damage, f = read(keys[1])
  if f and not r then
    -- A damaged hash starts over, idle, at a revision past the old one, and
    -- every instance hears of it; what it held that is sound is kept.
    r = {
      phase = 'idle', duration = 0,
      revision = (integer(f.revision, 0, COUNTER_MAX - 1) or 0) + 1,
      created = integer(f.created, 0, EPOCH_MAX) or at,
      key = is_key_hash(f.key) and f.key or (keyHash ~= '' and keyHash or nil),
    }
    write(keys[1], r, at)
    local pos = redis.call('INCR', keys[3])
    local line = encode(epoch, pos, session, r, at)
    redis.call('PUBLISH', args[4] or '', line)
    return {line, r.key or '', damage}
  end
  if not r or not r.stored then
    -- Nothing commanded yet. The creation time bounds the seq every
    -- instance starts at; a viewer's alone is gone within minutes. A key
    -- (key mode: the first instance to ask made a host) lives as long as a
    -- commanded session.
    redis.call('HSETNX', keys[1], 'created', int(at))
    local made = keyHash ~= '' and redis.call('HSETNX', keys[1], 'key', keyHash) == 1
    if made then
      redis.call('PEXPIRE', keys[1], KEEP_MS)
    elseif not (r and r.key) then
      redis.call('PEXPIRE', keys[1], VIEW_MS)
    end
  else
    redis.call('PEXPIRE', keys[1], KEEP_MS)
  end
  r = read(keys[1])
  local pos = integer(redis.call('GET', keys[3]) or '0', 0, COUNTER_MAX) or 0
  return {encode(epoch, pos, session, r, at), r.key or ''}
end

-- A command whose reply was lost (the connection dropped after it was
-- sent): did it apply? Its nonce among the session's applied ones says yes;
-- the nonces kept cover every revision it could have made, or the hash was
-- never commanded, say no. Before answering no, while the command could
-- still arrive (Redis time not past its deadline), its nonce is voided so
-- that it never applies. Otherwise it cannot be known.
-- KEYS as countdown_command. ARGV: epoch, session, nonce, the revision the
-- caller had when it sent the command, the command's deadline (Redis ms).
-- Returns {'applied', line} | {'absent'} | {'unknown'}.
local function resolve(keys, args)
  local epoch, session, nonce = args[1], args[2], args[3]
  local base = integer(args[4], 0, COUNTER_MAX)
  local deadline = integer(args[5], 0, EPOCH_MAX)
  if not base or not deadline or nonce == nil or nonce == '' then return {'unknown'} end
  local at = now_ms()
  local r = read(keys[1])
  if r and r.stored and listed(r.applied, nonce) then
    -- A command with an idempotency key (KEYS[4]) is answered as it will be
    -- replayed: its stored line, the same bytes on every instance.
    local line = keys[4] and redis.call('HGET', keys[4], 'line')
    if line then return {'applied', line} end
    local pos = integer(redis.call('GET', keys[3]) or '0', 0, COUNTER_MAX) or 0
    return {'applied', encode(epoch, pos, session, r, at)}
  end
  if at <= deadline then
    redis.call('HSET', keys[1], 'voided', push(r and r.voided, nonce))
    if not r then redis.call('PEXPIRE', keys[1], 60000) end
  end
  if not r then return {'unknown'} end
  if not r.stored then return {'absent'} end
  -- Applied, it made a revision above base; the applied nonces kept name
  -- the commands that made the last revisions, one each.
  if r.revision - count_listed(r.applied) <= base then return {'absent'} end
  return {'unknown'}
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
-- heartbeat TTL (ms), '1' when the session is open there (else '0'). Returns {sum, version}: the version orders sums that
-- reach an instance both as replies and as messages.
local function viewers(keys, args)
  local instance, channel, session = args[1], args[3], args[4]
  local count = integer(args[2], 0, COUNTER_MAX) or 0
  local at = now_ms()
  beat(keys[2], instance, args[5], at)
  -- An instance keeps its field (0 too) while it has the session open, so
  -- that `forget` can tell whether anyone still does.
  if args[6] == '1' then
    redis.call('HSET', keys[1], instance, int(count))
    redis.call('SADD', keys[3], session)
  else
    redis.call('HDEL', keys[1], instance)
    redis.call('SREM', keys[3], session)
  end
  redis.call('PEXPIRE', keys[3], VIEW_MS)
  -- Versions start from Redis's clock, so one deleted and made anew still
  -- orders after every version sent before.
  local last = integer(redis.call('HGET', keys[1], '#') or '0', 0, COUNTER_MAX) or 0
  local version = math.max(last + 1, at * 1000)
  redis.call('HSET', keys[1], '#', int(version))
  local h = redis.call('HGETALL', keys[1])
  local sum, before = 0, nil
  for i = 1, #h, 2 do
    if h[i] == '#' then
      -- the version, not an instance
    elseif h[i] == '~' then
      before = integer(h[i + 1], 0, COUNTER_MAX)
    else
      local deadline = redis.call('ZSCORE', keys[2], h[i])
      if deadline and tonumber(deadline) >= at then
        sum = sum + (integer(h[i + 1], 0, COUNTER_MAX) or 0)
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
  redis.call('PEXPIRE', keys[1], VIEW_MS)
  return {sum, version}
end

-- Renews what sessions open on an instance keep (their viewer hashes, the
-- instance's index) for another VIEW_MS: the instance sends a slice of them
-- with each heartbeat. KEYS: the keys to renew. Returns how many exist.
local function renew(keys)
  local renewed = 0
  for i = 1, #keys do renewed = renewed + redis.call('PEXPIRE', keys[i], VIEW_MS) end
  return renewed
end

-- An instance forgot a session: its field and index entry go, and when no
-- live instance has the session open any more, so do its viewer hash and
-- its session hash (unless a run or a wait is still in it: that one keeps its TTL).
-- KEYS: 1 the session hash, 2 its viewer hash, 3 the instance set, 4 the
-- caller's session index, 5 the cluster's session index (optional), whose
-- entry goes with the session hash. ARGV: instance id, session. Returns 1
-- when the keys went.
local function forget(keys, args)
  local at = now_ms()
  redis.call('HDEL', keys[2], args[1])
  redis.call('SREM', keys[4], args[2])
  local h = redis.call('HGETALL', keys[2])
  for i = 1, #h, 2 do
    if h[i] ~= '#' and h[i] ~= '~' then
      local deadline = redis.call('ZSCORE', keys[3], h[i])
      if deadline and tonumber(deadline) >= at then return 0 end
    end
  end
  redis.call('DEL', keys[2])
  local r = read(keys[1])
  -- What is still under way keeps its hash: a run (counting down or up) or
  -- a wait, until it finishes by itself.
  local ends = r and r.stored and self_finish_at(r)
  if not (r and (r.phase == 'paused' or (ends and ends > at) or (r.phase == 'waiting' and not ends)))
  then
    redis.call('DEL', keys[1])
    if keys[5] then redis.call('ZREM', keys[5], args[2]) end
  end
  return 1
end

-- Reads sessions without creating anything: for the HTTP API's reads of a
-- session this instance does not hold, and its list of the cluster's
-- sessions (whose ids come from the session index, read by ZRANGEBYLEX: the
-- index is a sorted set scored 0, so members page in id order, never by
-- SCAN or KEYS). KEYS: 1 the session index, 2 the position counter, then
-- for each session its hash and its viewer hash. ARGV: epoch, then the
-- session ids, in KEYS's order. Returns, per session, {line, viewers} ({'',
-- 0} when it has no hash). A listed session whose hash has expired leaves
-- the index here, since its TTL ran out without `forget`.
local function peek(keys, args)
  local at = now_ms()
  local pos = integer(redis.call('GET', keys[2]) or '0', 0, COUNTER_MAX) or 0
  local out = {}
  for i = 2, #args do
    local session = args[i]
    local hash, viewers = keys[1 + 2 * (i - 1)], keys[2 + 2 * (i - 1)]
    local r = read(hash)
    if r then
      local sum = integer(redis.call('HGET', viewers, '~') or '0', 0, COUNTER_MAX) or 0
      table.insert(out, {encode(args[1], pos, session, r, at), sum})
    else
      if redis.call('EXISTS', hash) == 0 then redis.call('ZREM', keys[1], session) end
      table.insert(out, {'', 0})
    end
  end
  return out
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

-- Moves the finishes whose deadline has passed (by Redis's clock) to the
-- events stream, each once: the delivery side calls it before it reads the
-- stream, so a deadline that passed while every instance was down is
-- recorded by the first to come back. KEYS: the events keys. ARGV: the most
-- to move in this call. Returns how many it moved.
local function due(keys, args)
  local limit = integer(args[1] or '', 1, 10000) or 100
  local at = now_ms()
  local ev = events_keys(keys, 1)
  local members = redis.call('ZRANGEBYSCORE', ev.deadlines, '-inf', int(at), 'LIMIT', 0, limit)
  local moved = 0
  for _, session in ipairs(members) do
    if settle_due(ev, session, at) then moved = moved + 1 end
  end
  return moved
end

-- touch's and release's one body. ARGV: the group, the consumer, then entry
-- ids: each still pending under this consumer is claimed to it again, with
-- `tail` before JUSTID; one another instance has taken over stays that
-- one's. Returns the ids that were this consumer's.
local function claim_own(keys, args, tail)
  local group, consumer = args[1], args[2]
  local ours, claim = {}, nil
  local function flush()
    if claim then
      for _, word in ipairs(tail) do table.insert(claim, word) end
      table.insert(claim, 'JUSTID')
      redis.call(unpack(claim))
      claim = nil
    end
  end
  for i = 3, #args do
    local entry = redis.call('XPENDING', keys[1], group, args[i], args[i], 1)[1]
    if entry and entry[2] == consumer then
      table.insert(ours, args[i])
      claim = claim or {'XCLAIM', keys[1], group, consumer, '0'}
      table.insert(claim, args[i])
      -- unpack's stack is bounded: claimed a thousand at a time.
      if #claim >= 1005 then flush() end
    end
  end
  flush()
  return ours
end

-- The delivery side's hold on the entries it is sending or retrying: each
-- one still pending under this consumer is claimed to it again (its idle
-- time starts over, its delivery count stays), so no other instance takes it
-- for a dead one's; one another instance has taken over stays that one's.
-- KEYS: 1 the events stream. ARGV: the group, the consumer, then entry ids.
-- Returns the ids still this consumer's.
local function touch(keys, args)
  return claim_own(keys, args, {})
end

-- An instance that stops hands back what it holds: each entry still its own
-- is made to look idle far past any claim timeout, so the next instance to
-- poll takes it over at once rather than a claim timeout later. A year, not
-- more: Redis counts an idle time past the epoch as none at all.
-- KEYS: 1 the events stream. ARGV: the group, the consumer, then entry ids.
-- Returns the ids handed back.
local RELEASED_IDLE_MS = '31536000000'
local function release(keys, args)
  return claim_own(keys, args, {'IDLE', RELEASED_IDLE_MS})
end

redis.register_function('countdown_v3_command', command)
redis.register_function('countdown_v3_touch', touch)
redis.register_function('countdown_v3_release', release)
redis.register_function('countdown_v3_due', due)
redis.register_function('countdown_v3_viewers', viewers)
redis.register_function('countdown_v3_open', open)
redis.register_function('countdown_v3_forget', forget)
redis.register_function('countdown_v3_renew', renew)
redis.register_function('countdown_v3_heartbeat', heartbeat)
redis.register_function('countdown_v3_reap', reap)
redis.register_function('countdown_v3_resolve', resolve)
redis.register_function('countdown_v3_peek', peek)
