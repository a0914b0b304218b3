// Pure logic for the countdown page: no DOM, no sockets, no timers, no globals.
// Everything here takes its inputs as arguments (including the time and the
// randomness), so it can be unit-tested with `node --test IntegrationTests/js/` and is
// used by app.js unchanged. Every rule the server shares with the page comes
// from CONTRACT (constants.js), never from a copy here.

import { CONTRACT } from "./constants.js";

export { CONTRACT };

/** Session ids accepted by the server (wire contract). */
export const SESSION_RE = new RegExp(CONTRACT.sessionIdPattern);

export const DEFAULT_SESSION = "default";
export const DEFAULT_SECONDS = 5;
export const MIN_SECONDS = CONTRACT.seconds.min;
export const MAX_SECONDS = CONTRACT.seconds.max;

/** WebSocket subprotocol spoken by the page. */
export const SUBPROTOCOL = CONTRACT.subprotocol;

/** The labels the server uses when nobody chose one (see the README's state fields). */
export const SERVER_READY_LABEL = CONTRACT.labels.idle;
export const SERVER_FINISHED_LABEL = CONTRACT.labels.finished;
export const SERVER_WAITING_LABEL = CONTRACT.labels.waiting;

/** How far one press of "−1 min" or "+1 min" moves the deadline, in seconds. */
export const ADJUST_STEP = 60;

/** A query string ("?a=1", or null for none) or URLSearchParams, as URLSearchParams. */
export function queryParams(search) {
  return search instanceof URLSearchParams ? search : new URLSearchParams(search ?? "");
}

/**
 * Reads the session id from a query string ("?session=team-a" or a
 * URLSearchParams). An absent or empty value means the default session.
 * @returns {{ok: true, session: string} | {ok: false, raw: string}}
 */
export function parseSession(search) {
  const params = queryParams(search);
  const raw = params.get("session");
  if (raw === null || raw === "") return { ok: true, session: DEFAULT_SESSION };
  return SESSION_RE.test(raw) ? { ok: true, session: raw } : { ok: false, raw };
}

/**
 * ws:// or wss:// URL of a session on the page's own host. With `since` (the
 * last seq this page applied) the server may resume; today it always answers
 * with a fresh snapshot, which the page handles the same way. It never
 * carries a controller key: that goes in the first message (authMessage), so
 * it stays out of proxy logs and the browser's own console lines.
 */
export function sessionUrl(location, session, since = null) {
  const scheme = location.protocol === "https:" ? "wss:" : "ws:";
  // The id is already restricted to URL-safe characters; encoding is belt and braces.
  const base = `${scheme}//${location.host}/ws/${encodeURIComponent(session)}`;
  return Number.isSafeInteger(since) && since >= 0 ? `${base}?since=${since}` : base;
}

/** The first message of a connection that holds a controller key: `auth`. */
export function authMessage(key, id) {
  return isKey(key) ? JSON.stringify({ op: "auth", key, id }) : null;
}

// ---- Who may press Start (`--control key`) -------------------------------------

/**
 * What a controller key may look like. The server hands out 32 hex digits;
 * the page accepts any short URL-safe token so a future, longer key still
 * works, and drops anything else rather than put it in a URL.
 */
export const KEY_RE = /^[A-Za-z0-9_-]{1,128}$/;

function isKey(v) {
  return typeof v === "string" && KEY_RE.test(v);
}

/** The controller key in a query string ("?session=a&key=…", old links), or null. */
export function parseKey(search) {
  const params = queryParams(search);
  const raw = params.get("key");
  return isKey(raw) ? raw : null;
}

/** The controller key in a fragment ("#key=…"), where links carry it now, or null. */
export function parseKeyFragment(hash) {
  return parseKey(String(hash ?? "").replace(/^#/, ""));
}

/**
 * Where the page's address keeps a key it was opened with, step by step:
 * `moved` is the address with a `?key=` (an old link) moved into the
 * fragment, and `clean` the address with no key at all, query or fragment,
 * which is what the address bar shows once the key is in sessionStorage.
 * Both are path+query+fragment, for history.replaceState; null when there is
 * nothing to change.
 */
export function keyAddresses(href) {
  const u = new URL(href);
  const fromQuery = parseKey(u.search);
  const fragment = new URLSearchParams(u.hash.replace(/^#/, ""));
  const rel = (x) => `${x.pathname}${x.search}${x.hash}`;
  let moved = null;
  if (u.searchParams.has("key")) {
    u.searchParams.delete("key");
    if (fromQuery && !fragment.has("key")) fragment.set("key", fromQuery);
    u.hash = fragment.toString();
    moved = rel(u);
  }
  if (!fragment.has("key")) return { moved, clean: moved };
  fragment.delete("key");
  u.hash = fragment.toString();
  return { moved, clean: rel(u) };
}

/** The sessionStorage key under which a tab keeps a session's controller key. */
export function keyStorageName(session) {
  return `countdown.key.${session}`;
}

/**
 * The role to show after a snapshot, while this page may have an `auth` in
 * flight. A snapshot that says "viewer" before the auth's answer is the
 * join's, not the key's verdict: showing it would flash the view-only page
 * at a controller on every connect. So until the answer, the role shown
 * stays what it was (null on a first connect: the controls as before any
 * snapshot); a "controller" snapshot is taken at once.
 */
export function roleDuringAuth(shown, snapshotRole, authPending) {
  if (!authPending || snapshotRole === "controller") return snapshotRole;
  return shown;
}

/**
 * This connection's part, from its snapshot:
 * - no `role` member: the server runs `--control open` and everyone controls;
 * - "controller": this connection may start and cancel; `key` is the
 *   session's controller key (null if the server sent none or a malformed one);
 * - "viewer", or any role this page does not know: watch only (fail closed;
 *   the server decides anyway).
 * @returns {{role: "open"|"controller"|"viewer", key: string|null}}
 */
export function controlOf(snapshot) {
  if (!isPlainObject(snapshot) || !("role" in snapshot)) return { role: "open", key: null };
  if (snapshot.role === "controller") return { role: "controller", key: isKey(snapshot.key) ? snapshot.key : null };
  return { role: "viewer", key: null };
}

/**
 * What the page shows for a role. `role` is null before the first snapshot
 * (the controls show, disabled, as they always have); `key` is the key the
 * page holds; `offered` is the key this connection presented, if any.
 * - controls: the duration or time to start with, and the run's controls
 *   (the big button shows for everyone: a viewer's is disabled, but it still
 *   spins while a countdown runs);
 * - viewOnly: the "View only" note instead of those controls;
 * - keyRejected: the page presented a key and is a viewer all the same
 *   (a mistyped link, or a session that was forgotten and begun anew);
 * - share: the Share area, for everyone once the server has answered (the
 *   viewer link is anyone's to pass on);
 * - controllerLink: the controller link in it, for a controller with a key.
 */
export function controlView(role, key = null, offered = null) {
  const viewer = role === "viewer";
  return {
    controls: !viewer,
    viewOnly: viewer,
    keyRejected: viewer && isKey(offered),
    share: role !== null,
    controllerLink: role === "controller" && isKey(key),
  };
}

/**
 * The two links the Share area offers, on the page's own origin and path:
 * a viewer link (?session=…) and, given a key, a controller link
 * (?session=…#key=…) for co-hosts. The key is in the fragment, which a
 * browser never sends to a server, so no proxy logs it. No ?lang=: each
 * visitor gets their own.
 */
export function shareLinks(location, session, key = null) {
  const u = new URL(location.pathname || "/", location.origin);
  u.searchParams.set("session", session);
  const viewer = u.href;
  return { viewer, controller: isKey(key) ? `${viewer}#key=${encodeURIComponent(key)}` : null };
}

function isPlainObject(v) {
  return v !== null && typeof v === "object" && !Array.isArray(v);
}

/**
 * RFC 7396 JSON Merge Patch. Returns a new value; neither argument is mutated,
 * so a snapshot held elsewhere stays intact.
 * - a non-object patch replaces the target wholesale;
 * - a null member removes that member;
 * - object members merge recursively; arrays are replaced, never merged.
 */
export function applyMergePatch(target, patch) {
  if (!isPlainObject(patch)) return cloneJson(patch);
  const result = isPlainObject(target) ? { ...target } : {};
  for (const [key, value] of Object.entries(patch)) {
    if (value === null) {
      delete result[key];
    } else {
      result[key] = applyMergePatch(result[key], value);
    }
  }
  return result;
}

// JSON values only (no Dates, Maps...), so a JSON-equivalent copy is enough.
function cloneJson(v) {
  if (Array.isArray(v)) return v.map(cloneJson);
  if (isPlainObject(v)) {
    const out = {};
    for (const [k, x] of Object.entries(v)) out[k] = cloneJson(x);
    return out;
  }
  return v;
}

/**
 * Fills in what a merge patch may legitimately leave out. A patch carrying
 * "endsAt": null or "remainingMs": null *removes* the member (RFC 7396), so
 * absent means null. (startedAt, timeoutAt and outcome are removed the same
 * way; what reads them takes anything but a number or a known word as none.)
 */
export function normalizeState(state) {
  const s = isPlainObject(state) ? { ...state } : {};
  if (s.endsAt === undefined) s.endsAt = null;
  if (s.remainingMs === undefined) s.remainingMs = null;
  return s;
}

/**
 * What to do with one server message, given what the page holds.
 * `held` is {epoch, seq, state} (state null before any snapshot) and
 * `snapshotted` says whether this connection has had its snapshot yet.
 * Returns the new {epoch, seq, state} plus flags, or null to ignore the message.
 *
 * - A snapshot replaces everything. If its epoch differs from the one held,
 *   the server restarted (or is another server): `restarted` is set and
 *   nothing of the old state survives, not even its seq.
 * - A patch applies only on top of this connection's snapshot, and only if
 *   its seq is newer (seq may jump when the server merges patches).
 */
export function reduceMessage(held, msg, snapshotted) {
  if (msg?.type === "snapshot") {
    if (!isPlainObject(msg.state)) return null;
    const epoch = typeof msg.epoch === "string" ? msg.epoch : null;
    return {
      epoch,
      seq: Number.isFinite(msg.seq) ? msg.seq : -Infinity,
      state: normalizeState(msg.state),
      restarted: held.epoch != null && epoch !== held.epoch,
    };
  }
  if (msg?.type === "patch") {
    if (!snapshotted || !held.state || !isPlainObject(msg.patch)) return null;
    if (Number.isFinite(msg.seq) && msg.seq <= held.seq) return null;
    return {
      epoch: held.epoch,
      seq: Number.isFinite(msg.seq) ? msg.seq : held.seq,
      state: normalizeState(applyMergePatch(held.state, msg.patch)),
      restarted: false,
    };
  }
  return null;
}

// ---- Reconnecting ---------------------------------------------------------------

/**
 * Reconnect delay in ms: capped exponential backoff with "full jitter"
 * (uniform in [0, min(cap, base * 2^attempt))), which spreads a crowd of
 * clients out after a server restart instead of having them retry in step.
 * @param {number} attempt 0 for the first retry after a loss
 * @param {{base?: number, cap?: number, random?: () => number}} [opts]
 */
export function backoffDelay(attempt, { base = 500, cap = 10_000, random = Math.random } = {}) {
  const n = Math.max(0, Math.floor(attempt) || 0);
  // 2^n overflows to Infinity for large n; Math.min keeps the cap in charge.
  const ceiling = Math.min(cap, base * 2 ** n);
  const r = Math.min(Math.max(Number(random()) || 0, 0), 1 - Number.EPSILON);
  return Math.floor(r * ceiling);
}

/** Close reason with which a server says "this is final, do not come back". */
export const NO_RETRY_REASON = CONTRACT.noRetryReason;

/**
 * What to do after a close: `{retry, why}`. The page stops only when the
 * server closed cleanly and said in its reason that retrying cannot help
 * ("no-retry", whatever the code: the server ended the conversation on purpose).
 * The close code alone never stops it:
 * - 1008 (policy violation) is what the server sends a connection that kept
 *   flooding it with commands; a fresh connection, after the backoff, is fine.
 *   (A session id the server refuses never gets this far: the handshake fails.)
 * - 1013 (try again later) follows a too_many_sessions refusal.
 * - 1006 (the server died or the network went), 1001 (a restart), 1011, and
 *   a plain 1000, which a proxy or a draining server may send; 1003 and 1009
 *   answer one bad message.
 * `why` names the words to show (a key of STRINGS in i18n.js): "ended" when stopping,
 * "flooded" or "full" when the server said why it let go, otherwise null.
 * @param {number} code CloseEvent.code
 * @param {string} [reason] CloseEvent.reason
 * @param {boolean} [wasClean] CloseEvent.wasClean (a close frame was exchanged)
 */
export function closeOutcome(code, reason = "", wasClean = true) {
  if (!wasClean) return { retry: true, why: null }; // a torn connection never carries the server's word
  if (String(reason).trim().toLowerCase() === NO_RETRY_REASON) return { retry: false, why: "ended" };
  if (code === CONTRACT.closeCodes.policyViolation) return { retry: true, why: "flooded" };
  if (code === CONTRACT.closeCodes.tryAgainLater) return { retry: true, why: "full" };
  return { retry: true, why: null };
}

/** Whether to reconnect after a close (see closeOutcome). */
export function shouldReconnect(code, reason = "", wasClean = true) {
  return closeOutcome(code, reason, wasClean).retry;
}

// ---- Clock offset (NTP-style) -----------------------------------------------------

/**
 * One ping/pong exchange as a clock sample. The server read its clock somewhere
 * between the client's send (t0) and receive (t1), so the true offset
 * (server − client) lies in [serverTime − t1, serverTime − t0]; the midpoint
 * is off by at most rtt/2. Returns null for nonsense (negative rtt, NaN).
 */
export function clockSample(t0, t1, serverTime) {
  if (![t0, t1, serverTime].every(Number.isFinite) || t1 < t0) return null;
  return { offset: serverTime - (t0 + t1) / 2, rtt: t1 - t0, at: t1 };
}

/**
 * Adds a sample to the recent ones, keeping at most `max` and none older
 * than `maxAge` ms (clients' clocks get stepped, so old samples go stale).
 */
export function addClockSample(samples, sample, { max = 8, maxAge = 10 * 60_000 } = {}) {
  if (!sample) return samples;
  const fresh = samples.filter((s) => sample.at - s.at <= maxAge);
  fresh.push(sample);
  return fresh.slice(-max);
}

/**
 * The offset estimate: that of the lowest-RTT sample, as NTP does (the
 * shortest round trip bounds the error tightest). A later sample wins a tie.
 * Returns null when there are no samples.
 */
export function bestOffset(samples) {
  let best = null;
  for (const s of samples) if (!best || s.rtt <= best.rtt) best = s;
  return best ? best.offset : null;
}

/** Whole seconds left, rounded up, as the server counts them (may be ≤ 0). */
export function remainingAt(endsAt, serverNow) {
  return Math.ceil((endsAt - serverNow) / 1000);
}

/**
 * The offset to draw with, given the estimate and the latest authoritative
 * number: `anchor` = {endsAt, remaining, at, sentAt?} from the last snapshot
 * or patch that carried `remaining` while running. `at` is the local receive
 * time; `sentAt` is the server time it was sent: a snapshot's serverTime, and
 * for a tick patch endsAt − remaining s (that is when the server sends it),
 * which is the default.
 *
 * Patches are authoritative: if the estimate would not have shown
 * `anchor.remaining` when it arrived, the estimate is wrong for this run, and
 * the page draws as if the message had arrived the moment it was sent.
 * Otherwise the estimate stands.
 */
export function effectiveOffset(estimate, anchor) {
  const est = Number.isFinite(estimate) ? estimate : 0;
  if (!anchor || ![anchor.endsAt, anchor.remaining, anchor.at].every(Number.isFinite)) return est;
  if (remainingAt(anchor.endsAt, anchor.at + est) === anchor.remaining) return est;
  const sentAt = Number.isFinite(anchor.sentAt)
    ? anchor.sentAt
    : anchor.endsAt - anchor.remaining * 1000;
  return sentAt - anchor.at;
}

/**
 * The whole seconds to show while running, drawn from endsAt and the server's
 * time. Never below 1 (the server's finish patch ends the run, not the page)
 * and never above the run's duration.
 */
export function displaySeconds(state, serverNow) {
  const raw = remainingAt(state.endsAt, serverNow);
  const top = Number.isFinite(state.duration) && state.duration >= 1 ? state.duration : Infinity;
  return Math.min(Math.max(raw, 1), top);
}

/**
 * Milliseconds until the shown number next changes (the next whole-second
 * boundary before endsAt, or after startedAt while waiting), or null when
 * nothing is counting. The +1 lands the
 * timer just past the boundary rather than a hair before it.
 */
export function msUntilNextChange(state, serverNow) {
  if (isWaiting(state)) return msUntilNextElapsed(state, serverNow);
  if (isOvertime(state)) return msUntilNextOver(state, serverNow);
  if (!isCounting(state)) return null;
  const left = state.endsAt - serverNow;
  if (left <= 0) return null; // waiting for the finish patch
  const shown = Math.ceil(left / 1000);
  return Math.max(1, left - (shown - 1) * 1000 + 1);
}

function isCounting(state) {
  return state?.phase === "running" && Number.isFinite(state.endsAt);
}

/**
 * The whole seconds the big label shows, or null when it shows words:
 * - running: drawn from endsAt and the server's clock (see displaySeconds);
 *   without endsAt, the server's own `remaining`;
 * - paused: the frozen value, the server's `remaining` (whole seconds rounded
 *   up), or failing that `remainingMs` rounded up the same way.
 */
export function shownSeconds(state, serverNow) {
  if (isCounting(state) && Number.isFinite(serverNow)) return displaySeconds(state, serverNow);
  if (state?.phase !== "running" && state?.phase !== "paused") return null;
  if (Number.isFinite(state.remaining)) return Math.max(0, Math.ceil(state.remaining));
  if (Number.isFinite(state.remainingMs)) return Math.max(0, Math.ceil(state.remainingMs / 1000));
  return null;
}

const pad2 = (n) => String(n).padStart(2, "0");
const HOUR_S = 60 * 60;
const DAY_S = 24 * HOUR_S;

/** Whole seconds split into days, hours, minutes and seconds (never negative). */
export function clockParts(seconds) {
  const total = Math.max(0, Math.floor(Number(seconds) || 0));
  return {
    days: Math.floor(total / DAY_S),
    hours: Math.floor((total % DAY_S) / HOUR_S),
    minutes: Math.floor((total % HOUR_S) / 60),
    seconds: total % 60,
  };
}

/**
 * Seconds as a clock: the seed's plain seconds under a minute ("5"), then
 * m:ss ("1:05"), h:mm:ss ("1:02:05"), and from a day "Nd hh:mm:ss".
 */
export function formatClock(seconds) {
  const { days, hours, minutes, seconds: s } = clockParts(seconds);
  const total = days * DAY_S + hours * HOUR_S + minutes * 60 + s;
  if (total < 60) return String(total);
  if (total < HOUR_S) return `${minutes}:${pad2(s)}`;
  if (total < DAY_S) return `${hours}:${pad2(minutes)}:${pad2(s)}`;
  return `${days}d ${pad2(hours)}:${pad2(minutes)}:${pad2(s)}`;
}

/**
 * The same value in words for screen readers, in the page's language:
 * "1 hour, 2 minutes, 5 seconds". Zero parts are left out, except that
 * nothing at all reads "0 seconds".
 */
export function clockWords(seconds, strings) {
  const parts = clockParts(seconds);
  const words = ["days", "hours", "minutes", "seconds"]
    .filter((unit) => parts[unit] > 0)
    .map((unit) => strings.units[unit](parts[unit]));
  return words.length ? words.join(strings.units.joiner) : strings.units.seconds(0);
}

/**
 * Text for the big label.
 * - running or paused: the seconds left (shownSeconds) as a clock
 *   (formatClock); without a number, the server's own label;
 * - finished/idle: the server's label, translated when it is the server's
 *   default text ("Countdown finished", "Ready"); a custom finishedLabel wins.
 */
export function labelText(state, serverNow, strings) {
  if (!state) return "—";
  const secs = shownSeconds(state, serverNow);
  if (secs !== null) return formatClock(secs);
  const over = overSeconds(state, serverNow);
  if (over !== null) return formatOver(over);
  const label = state.label;
  const text = typeof label === "string" ? label : label == null ? "" : String(label);
  if (strings) {
    const outcome = outcomeOf(state);
    // A stop shows the run's finish text: the server's default is the finished words.
    if (outcome === STOPPED_OUTCOME && text === CONTRACT.labels[outcome]) return strings.finished;
    if (outcome && text === CONTRACT.labels[outcome]) return strings.outcomes[outcome];
    if (state.phase === "finished" && !outcome && text === SERVER_FINISHED_LABEL) return strings.finished;
    if (state.phase === "idle" && text === SERVER_READY_LABEL) return strings.ready;
    if (isWaiting(state) && text === SERVER_WAITING_LABEL) return strings.waitLabel;
  }
  return text;
}

/**
 * What a screen reader hears for the big label: the clock in words, or the
 * label's text; while waiting, the text and the time elapsed in words; once
 * finished from outside, the outcome's word first unless the text is that
 * word ("Failed: Deploy failed").
 */
export function labelWords(state, serverNow, strings) {
  const secs = shownSeconds(state, serverNow);
  if (secs !== null) return clockWords(secs, strings);
  const over = overSeconds(state, serverNow);
  if (over !== null) return strings.overWords(clockWords(over, strings));
  const text = labelText(state, serverNow, strings);
  const elapsed = elapsedSeconds(state, serverNow);
  if (elapsed !== null) return strings.elapsedWords(text, clockWords(elapsed, strings));
  const badge = outcomeBadge(state, serverNow, strings);
  const stoppedOver = stoppedOverSeconds(state);
  // "+1:23" is for the eyes; a screen reader hears the time over in words.
  if (badge?.shown && stoppedOver > 0) {
    return strings.outcomeWords(strings.overWords(clockWords(stoppedOver, strings)), text);
  }
  return badge?.shown ? strings.outcomeWords(badge.words, text) : text;
}

/**
 * Duration input to the integer the start command carries, or null when the
 * text is not a whole number in range. Accepts surrounding blanks only.
 */
export function parseSeconds(text) {
  const t = String(text ?? "").trim();
  if (!/^\d+$/.test(t)) return null;
  const n = Number(t);
  return n >= MIN_SECONDS && n <= MAX_SECONDS ? n : null;
}

// Units the duration field takes after a number, in English and Chinese.
const DURATION_UNITS = new Map([
  ...["s", "sec", "secs", "second", "seconds", "秒"].map((u) => [u, 1]),
  ...["m", "min", "mins", "minute", "minutes", "分", "分鐘"].map((u) => [u, 60]),
  ...["h", "hr", "hrs", "hour", "hours", "時", "小時"].map((u) => [u, 3600]),
]);
const UNIT_RUN_RE = /(\d+)\s*([a-z]+|小時|分鐘|[秒分時])\s*/y;

/**
 * The duration field's text to whole seconds. It takes plain seconds ("600"),
 * a clock ("10:00" is m:ss, "1:30:00" h:mm:ss) and numbers with units, alone
 * or together, largest first ("90s", "10m", "1h", "1h 30m", "10分"). The
 * result is checked against `range`: the contract's for a start's length
 * unless the caller names another of its ranges.
 * @returns {{ok: true, seconds: number} | {ok: false, why: "format"|"range"}}
 */
export function parseDuration(text, range = CONTRACT.seconds) {
  const t = String(text ?? "").trim().toLowerCase();
  let seconds = null;
  let m;
  if (/^\d+$/.test(t)) seconds = Number(t);
  else if ((m = /^(\d+):([0-5]\d)$/.exec(t))) seconds = Number(m[1]) * 60 + Number(m[2]);
  else if ((m = /^(\d+):([0-5]\d):([0-5]\d)$/.exec(t))) {
    seconds = Number(m[1]) * HOUR_S + Number(m[2]) * 60 + Number(m[3]);
  } else seconds = unitSeconds(t);
  if (seconds === null) return { ok: false, why: "format" };
  if (!Number.isSafeInteger(seconds) || seconds < range.min || seconds > range.max) {
    return { ok: false, why: "range" };
  }
  return { ok: true, seconds };
}

// "1h 30m" and the like: each unit at most once, largest first, nothing else.
function unitSeconds(t) {
  UNIT_RUN_RE.lastIndex = 0;
  let total = 0;
  let last = Infinity;
  let m;
  while (UNIT_RUN_RE.lastIndex < t.length && (m = UNIT_RUN_RE.exec(t))) {
    const unit = DURATION_UNITS.get(m[2]);
    if (!unit || unit >= last) return null;
    last = unit;
    total += Number(m[1]) * unit;
  }
  return t.length > 0 && UNIT_RUN_RE.lastIndex === t.length && last !== Infinity ? total : null;
}

/** What the duration field understood, in words ("= 10 minutes"), or why it cannot. */
export function durationEcho(text, strings) {
  if (String(text ?? "").trim() === "") return "";
  const parsed = parseDuration(text);
  return parsed.ok ? strings.understood(clockWords(parsed.seconds, strings)) : strings.badDuration;
}

/** Characters the server refuses in a finishedLabel: C0 controls and DEL. */
const CONTROL_RE = /[\u0000-\u001f\u007f]/;

/**
 * The finish-text field to the `finishedLabel` a start carries: null when
 * empty (each viewer then shows the default in its own language), the text
 * with its ends trimmed when the server takes it (1 to the contract's
 * maximum of code points, no control characters).
 * @returns {{ok: true, label: string|null} | {ok: false, why: "long"|"control"}}
 */
export function parseFinishText(text) {
  const label = String(text ?? "").trim();
  if (label === "") return { ok: true, label: null };
  if (CONTROL_RE.test(label)) return { ok: false, why: "control" };
  if ([...label].length > CONTRACT.finishedLabelMaxLength) return { ok: false, why: "long" };
  return { ok: true, label };
}

// ---- Waiting (the spinner ended from outside) ------------------------------------

/** The phase of a session that waits for a `done` or `fail` from outside. */
export const WAITING_PHASE = "waiting";

/** The outcome of a countdown that ran out: shown as before, without a badge. */
export const COUNTDOWN_OUTCOME = "elapsed";

function isWaiting(state) {
  return state?.phase === WAITING_PHASE;
}

/** Whether `v` is an epoch ms the server could have sent (the contract's range). */
function isEpochMs(v) {
  return Number.isSafeInteger(v) && v >= CONTRACT.epochMs.min && v <= CONTRACT.epochMs.max;
}

/**
 * Whole seconds since the wait began, or null when not waiting (or the
 * server sent no usable startedAt). Drawn afresh from startedAt and the
 * server's time on every frame, never counted up, so a late timer or a
 * sleeping tab never leaves it behind. Never below 0 (the offset estimate
 * may put the start a hair ahead) and never past the timeout (the server's
 * finish patch ends the wait, not the page).
 */
export function elapsedSeconds(state, serverNow) {
  if (!isWaiting(state) || !isEpochMs(state.startedAt) || !Number.isFinite(serverNow)) return null;
  let ms = serverNow - state.startedAt;
  if (isEpochMs(state.timeoutAt) && state.timeoutAt >= state.startedAt) ms = Math.min(ms, state.timeoutAt - state.startedAt);
  return Math.max(0, Math.floor(ms / 1000));
}

/** Milliseconds until the elapsed time next changes (just past the boundary), or null. */
function msUntilNextElapsed(state, serverNow) {
  if (elapsedSeconds(state, serverNow) === null) return null;
  if (isEpochMs(state.timeoutAt) && serverNow >= state.timeoutAt) return null; // the finish patch is due
  const ms = serverNow - state.startedAt;
  if (ms < 0) return Math.ceil(-ms) + 1;
  return 1000 - (ms % 1000) + 1;
}

/**
 * The time elapsed as a clock that counts up: m:ss from the first second
 * ("0:05", "12:34"), then h:mm:ss and "Nd hh:mm:ss" as formatClock.
 */
export function formatElapsed(seconds) {
  const s = Math.max(0, Math.floor(Number(seconds) || 0));
  return s < 60 ? `0:${pad2(s)}` : formatClock(s);
}

/** The line under the label while waiting: the time elapsed, or null. */
export function elapsedText(state, serverNow) {
  const secs = elapsedSeconds(state, serverNow);
  return secs === null ? null : formatElapsed(secs);
}

// ---- Overtime (a run that keeps counting past zero) ------------------------------

/** The phase of a run that reached zero with `"overtime": true`, counting up. */
export const OVERTIME_PHASE = "overtime";

/** The outcome of a run ended by `stop`: the finish text, and the time over. */
export const STOPPED_OUTCOME = "stopped";

function isOvertime(state) {
  return state?.phase === OVERTIME_PHASE && isEpochMs(state.overSince);
}

/**
 * Whole seconds past the deadline in overtime, or null in any other phase
 * (or without a usable overSince). Drawn from overSince and the server's
 * time on every frame, as the countdown is drawn from endsAt, so it turns
 * on the same boundaries as the server's ticks (overSince + k s). Never
 * below 0 (the offset estimate may put the deadline a hair ahead) and never
 * past the contract's cap, where the server stops the run itself.
 */
export function overSeconds(state, serverNow) {
  if (!isOvertime(state) || !Number.isFinite(serverNow)) return null;
  const ms = Math.min(Math.max(serverNow - state.overSince, 0), CONTRACT.maxOvertimeSeconds * 1000);
  return Math.floor(ms / 1000);
}

/** Milliseconds until the time over next changes (just past the boundary), or null. */
function msUntilNextOver(state, serverNow) {
  if (overSeconds(state, serverNow) === null) return null;
  const ms = serverNow - state.overSince;
  if (ms >= CONTRACT.maxOvertimeSeconds * 1000) return null; // the server's finish is due
  if (ms < 0) return Math.ceil(-ms) + 1;
  return 1000 - (ms % 1000) + 1;
}

/**
 * The time over as the label shows it: "+" and the clock ("+0", "+59",
 * "+1:00", "+1:00:00"), as the server's own overtime label reads.
 */
export function formatOver(seconds) {
  return `+${formatClock(seconds)}`;
}

const OVER_LABEL_RE = /^\+(?:(\d{1,2})d (\d{2}):(\d{2}):(\d{2})|(\d{1,2}):(\d{2}):(\d{2})|(\d{1,2}):(\d{2})|(\d{1,2}))$/;

/**
 * The whole seconds over that an overtime label says ("+0", "+1:23",
 * "+1:00:00"), or null for any other text and any time past the contract's
 * cap. The server sends each overtime tick's label at overSince plus that
 * many seconds, so the label anchors the clock as `remaining` does while
 * running (see overtimeAnchor).
 */
export function overFromLabel(label) {
  const m = OVER_LABEL_RE.exec(typeof label === "string" ? label : "");
  if (!m) return null;
  const n = m.slice(1).map((x) => (x === undefined ? null : Number(x)));
  let secs;
  if (n[0] !== null) secs = ((n[0] * 24 + n[1]) * 60 + n[2]) * 60 + n[3];
  else if (n[4] !== null) secs = (n[4] * 60 + n[5]) * 60 + n[6];
  else if (n[7] !== null) secs = n[7] * 60 + n[8];
  else secs = n[9];
  // Only the text formatOver writes for that number: "+0:59" or "+60" is not one.
  if (secs > CONTRACT.maxOvertimeSeconds || formatOver(secs) !== label) return null;
  return secs;
}

/**
 * The anchor (see effectiveOffset) of an overtime state, from its label: the
 * time over is a countdown to overSince read backwards (floor((now −
 * overSince) / 1000) is −ceil((overSince − now) / 1000)), so {endsAt:
 * overSince, remaining: −over} is checked and corrected by the very rule the
 * countdown's ticks are, and a tick's patch is taken as sent at overSince +
 * over s. Null when the state gives nothing to anchor to.
 */
export function overtimeAnchor(state, at, sentAt = null) {
  if (!isOvertime(state) || !Number.isFinite(at)) return null;
  const over = overFromLabel(state.label);
  return over === null ? null : { endsAt: state.overSince, remaining: -over, at, sentAt };
}

/** Whole seconds over in a stopped finish's `overMs`, or null when it has none usable. */
export function stoppedOverSeconds(state) {
  if (outcomeOf(state) !== STOPPED_OUTCOME) return null;
  const ms = state.overMs;
  if (!Number.isSafeInteger(ms) || ms < 0 || ms > CONTRACT.maxOvertimeSeconds * 1000) return null;
  return Math.floor(ms / 1000);
}

// The badge of a stop: how far over it was ("+1:23 over"), or that it was stopped before zero.
function stoppedWords(state, strings) {
  const over = stoppedOverSeconds(state);
  return over !== null && state.overMs > 0 ? strings.overBy(formatOver(over)) : strings.outcomes[STOPPED_OUTCOME];
}

/**
 * How a finished session ended when something other than its own countdown
 * ended it: "done", "failed", "timeout" or "stopped"; null for a countdown that ran out,
 * any other phase, and any value the contract does not name.
 */
export function outcomeOf(state) {
  if (state?.phase !== "finished") return null;
  const o = state.outcome;
  return typeof o === "string" && o !== COUNTDOWN_OUTCOME && CONTRACT.outcomes.includes(o) ? o : null;
}

/**
 * The outcome in words under the label once finished from outside:
 * {outcome, words, shown}. `outcome` names the colour (the page sets it as
 * data-outcome); `words` is the outcome in the page's language, which a
 * screen reader hears whatever the label says; `shown` is whether the badge
 * is drawn: not when the label already is those words (the server's default
 * text, translated), so the page never says "Done" twice. Null without one.
 */
export function outcomeBadge(state, serverNow, strings) {
  const outcome = outcomeOf(state);
  if (!outcome) return null;
  const words = outcome === STOPPED_OUTCOME ? stoppedWords(state, strings) : strings.outcomes[outcome];
  return { outcome, words, shown: labelText(state, serverNow, strings) !== words };
}

/**
 * What "Yes" in the question before an ending sends, and the STRINGS keys
 * of its words: Done and Fail say which outcome everyone will see; Cancel
 * and −1 min end the run ("End for everyone?").
 */
export function confirmWords(op) {
  if (op === "done") return { ask: "confirmDone", yes: "confirmDoneYes" };
  if (op === "stop") return { ask: "confirmStop", yes: "confirmStopYes" };
  if (op === "fail") return { ask: "confirmFail", yes: "confirmFailYes" };
  return { ask: "confirmEnd", yes: "confirmYes" };
}

/** Whether the question before `op` still means something in `phase` (else it closes). */
export function confirmHolds(op, phase) {
  if (op === "done" || op === "fail") return phase === WAITING_PHASE;
  const counting = phase === "running" || phase === "paused";
  if (op === "cancel") return counting || phase === WAITING_PHASE || phase === OVERTIME_PHASE;
  if (op === "stop") return counting || phase === OVERTIME_PHASE;
  return counting;
}

/** Preset durations offered beside the field, in minutes. */
export const PRESET_MINUTES = [1, 5, 10, 15];

/** The localStorage key under which a session's last start values are kept. */
export function rememberKey(session) {
  return `countdown.last.${session}`;
}

/**
 * Last start values read back from storage: {mode, duration, finish, overtime,
 * warn, danger}, each a string but overtime a boolean, or null for anything
 * else (another version's data, a hand edit).
 */
export function readRemembered(json) {
  let v;
  try {
    v = JSON.parse(json);
  } catch {
    return null;
  }
  if (!isPlainObject(v)) return null;
  const str = (x, max) => (typeof x === "string" && x.length <= max ? x : "");
  return {
    mode: v.mode === "until" ? "until" : "seconds",
    duration: str(v.duration, 64),
    finish: str(v.finish, 4 * CONTRACT.finishedLabelMaxLength),
    overtime: v.overtime === true,
    warn: str(v.warn, 64),
    danger: str(v.danger, 64),
  };
}

/**
 * The tab's title: the time left and the session while running or paused
 * ("4:59 · team-a"), the text and the time elapsed while waiting
 * ("Deploying 1:05 · team-a"), the outcome once finished, the page's name
 * otherwise.
 */
export function titleText(state, serverNow, session, strings) {
  const where = session ? ` · ${session}` : "";
  const secs = state ? shownSeconds(state, serverNow) : null;
  if (secs !== null) {
    const clock = formatClock(secs);
    return state.phase === "paused" ? `${strings.pausedTitle(clock)}${where}` : `${clock}${where}`;
  }
  const over = overSeconds(state, serverNow);
  if (over !== null) return `${formatOver(over)}${where}`;
  if (state?.phase === "finished") return `${labelText(state, serverNow, strings)}${where}`;
  if (isWaiting(state)) {
    const elapsed = elapsedSeconds(state, serverNow);
    const clock = elapsed === null ? "" : ` ${formatElapsed(elapsed)}`;
    return `${labelText(state, serverNow, strings)}${clock}${where}`;
  }
  return `${strings.title}${where}`;
}

/**
 * Whether −1 min (`seconds` < 0) would end the run at once: it leaves no
 * whole second, so the server finishes it for everyone.
 */
export function adjustEnds(state, seconds, serverNow) {
  if (!(seconds < 0)) return false;
  const left = shownSeconds(state, serverNow);
  return left !== null && left + seconds <= 0;
}

/**
 * The printed width of a clock label in character cells (1 to 11, "Nd
 * hh:mm:ss"), so CSS can size it to fill the width; null for words.
 */
export function clockWidth(state, serverNow) {
  const secs = state ? shownSeconds(state, serverNow) : null;
  const over = state ? overSeconds(state, serverNow) : null;
  const text = secs !== null ? formatClock(secs) : over !== null ? formatOver(over) : null;
  return text === null ? null : Math.min(text.length, 12);
}

/**
 * A local date and time from <input type="datetime-local"> ("2026-12-01T09:30"
 * or with ":ss") to the epoch ms that `start` carries as `until`, checked
 * against the contract's range ahead of `serverNow` (the server judges with
 * its own clock, so the page does too). The time is read in the browser's
 * time zone, as the user picked it.
 * @returns {{ok: true, until: number} | {ok: false, why: "format"|"near"|"far"}}
 */
export function parseUntil(value, serverNow) {
  const m = /^(\d{4,})-(\d{2})-(\d{2})T(\d{2}):(\d{2})(?::(\d{2})(?:\.(\d{1,3}))?)?$/.exec(String(value ?? "").trim());
  if (!m) return { ok: false, why: "format" };
  const [y, mo, d, h, mi, s = "0", ms = "0"] = m.slice(1);
  const date = new Date(Number(y), Number(mo) - 1, Number(d), Number(h), Number(mi), Number(s), Number(ms.padEnd(3, "0")));
  // Date rolls 31 February over into March; a date that moved was not a date.
  if (date.getMonth() !== Number(mo) - 1 || date.getDate() !== Number(d) || date.getHours() !== Number(h)) {
    return { ok: false, why: "format" };
  }
  const until = date.getTime();
  const ahead = until - serverNow;
  if (!(ahead >= CONTRACT.untilAheadMs.min)) return { ok: false, why: "near" };
  if (ahead > CONTRACT.untilAheadMs.max) return { ok: false, why: "far" };
  return { ok: true, until };
}

/** An epoch ms as a datetime-local value ("2026-12-01T09:30:00") in the browser's time zone. */
export function localDateTime(ms) {
  const d = new Date(ms);
  return `${d.getFullYear()}-${pad2(d.getMonth() + 1)}-${pad2(d.getDate())}T${pad2(d.getHours())}:${pad2(d.getMinutes())}:${pad2(d.getSeconds())}`;
}

/** Whether `seconds` is an adjust the server takes: a non-zero integer in the contract's range. */
export function isAdjust(seconds) {
  const { min, max } = CONTRACT.adjustSeconds;
  return Number.isInteger(seconds) && seconds !== 0 && seconds >= min && seconds <= max;
}

/**
 * The big button and its neighbours, from the state, this page's role and
 * its commands in flight:
 * - op: what pressing the button sends ("start", or "resume" while paused);
 * - text: the STRINGS key of its words ("start", "resume", or "paused" for a
 *   viewer, whose button never sends anything);
 * - busy: the spinner (the server's, or this page's own wait for the answer
 *   to its press); waiting: the spinner is only that wait;
 * - disabled: whether it can be pressed now;
 * - run: whether the run's controls show: Pause (`pause`) while running,
 *   −1 min and +1 min (`adjust`) while running, paused or in overtime, Stop
 *   (`stop`) in those three too, Done and Fail (`settle`) while waiting, and
 *   Cancel in all four.
 * `pending` is the set of ops in flight; `live` whether the link is up.
 */
export function buttonView(state, { role = null, live = false, pending = new Set() } = {}) {
  const phase = state?.phase;
  const viewer = role === "viewer";
  const paused = phase === "paused";
  const op = paused ? "resume" : "start";
  const waiting = pending.has(op);
  const busy = Boolean(state?.spinner) || waiting;
  const counting = phase === "running" || paused || phase === OVERTIME_PHASE;
  const controls = !viewer && (counting || phase === WAITING_PHASE);
  return {
    // A viewer of a session nobody is running sees words, not a dead button.
    hostWait: viewer && (phase === "idle" || phase === "finished"),
    op,
    text: paused && viewer ? "paused" : op,
    busy,
    waiting: waiting && !state?.spinner,
    disabled: viewer || busy || !state?.enabled || !live,
    run: controls,
    pause: controls && phase === "running",
    adjust: controls && counting,
    settle: controls && phase === WAITING_PHASE,
    stop: controls && counting,
  };
}

/**
 * Size class for the label ("xs" | "s" | "m" | "l") from its rough printed
 * width, so CSS can pick a font size that fits a phone: wide (CJK, fullwidth)
 * characters count double. xs fits "59", s "86400", m a word or "倒計時結束",
 * l anything longer.
 */
export function labelSize(text) {
  let units = 0;
  for (const ch of String(text ?? "")) units += isWide(ch) ? 2 : 1;
  return units <= 2 ? "xs" : units <= 5 ? "s" : units <= 10 ? "m" : "l";
}

function isWide(ch) {
  const c = ch.codePointAt(0);
  return (
    (c >= 0x1100 && c <= 0x115f) || // Hangul Jamo
    (c >= 0x2e80 && c <= 0xa4cf) || // CJK radicals .. Yi
    (c >= 0xac00 && c <= 0xd7a3) || // Hangul syllables
    (c >= 0xf900 && c <= 0xfaff) || // CJK compatibility ideographs
    (c >= 0xfe30 && c <= 0xfe4f) || // CJK compatibility forms
    (c >= 0xff00 && c <= 0xff60) || // fullwidth forms
    (c >= 0xffe0 && c <= 0xffe6) ||
    (c >= 0x1f300 && c <= 0x1faff) || // emoji
    (c >= 0x20000 && c <= 0x3fffd) // CJK extensions
  );
}

/**
 * "3 viewers"; tolerates a missing or odd count rather than showing "NaN".
 * With `live` false the count is one this page can no longer vouch for, and
 * says so.
 */
export function viewersText(viewers, strings, live = true) {
  const n = Number.isFinite(viewers) && viewers >= 0 ? Math.floor(viewers) : 0;
  return live ? strings.viewers(n) : strings.viewersLastKnown(n);
}

/** Words for a server error message, localised for the codes the protocol defines. */
export function errorText(msg, strings) {
  const known = strings.errors[msg?.code];
  if (known) return known;
  return strings.serverError(msg?.message || msg?.code || "unknown");
}
