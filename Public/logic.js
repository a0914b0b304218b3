// Pure logic for the countdown page: no DOM, no sockets, no timers, no globals.
// Everything here takes its inputs as arguments (including randomness), so it
// can be unit-tested with `node --test` and reused by app.js unchanged.

/** Session ids accepted by the server (wire contract). */
export const SESSION_RE = /^[A-Za-z0-9_-]{1,64}$/;

export const DEFAULT_SESSION = "default";
export const DEFAULT_SECONDS = 5;
export const MIN_SECONDS = 1;
export const MAX_SECONDS = 86400;

/** WebSocket subprotocol spoken by the page. */
export const SUBPROTOCOL = "countdown.v1";

/**
 * Reads the session id from a query string ("?session=team-a" or a
 * URLSearchParams). An absent or empty value means the default session.
 * @returns {{ok: true, session: string} | {ok: false, raw: string}}
 */
export function parseSession(search) {
  const params = search instanceof URLSearchParams ? search : new URLSearchParams(search ?? "");
  const raw = params.get("session");
  if (raw === null || raw === "") return { ok: true, session: DEFAULT_SESSION };
  return SESSION_RE.test(raw) ? { ok: true, session: raw } : { ok: false, raw };
}

/** ws:// or wss:// URL of a session on the page's own host. */
export function sessionUrl(location, session) {
  const scheme = location.protocol === "https:" ? "wss:" : "ws:";
  // The id is already restricted to URL-safe characters; encoding is belt and braces.
  return `${scheme}//${location.host}/ws/${encodeURIComponent(session)}`;
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
  if (!isPlainObject(patch)) return structuredCloneJson(patch);
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

// JSON values only (no Dates, Maps...), so a JSON round-trip-equivalent copy
// is enough and avoids depending on structuredClone in older runtimes.
function structuredCloneJson(v) {
  if (Array.isArray(v)) return v.map(structuredCloneJson);
  if (isPlainObject(v)) {
    const out = {};
    for (const [k, x] of Object.entries(v)) out[k] = structuredCloneJson(x);
    return out;
  }
  return v;
}

/**
 * Fills in what a merge patch may legitimately leave out. A patch carrying
 * "endsAt": null *removes* the member (RFC 7396), so absent means null.
 */
export function normalizeState(state) {
  const s = isPlainObject(state) ? { ...state } : {};
  if (s.endsAt === undefined) s.endsAt = null;
  return s;
}

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
  return Math.floor(random() * ceiling);
}

/**
 * Whether to reconnect after a close. 1008 (policy violation) is what the
 * server sends for a session id it refuses: retrying cannot help.
 */
export function shouldReconnect(closeCode) {
  return closeCode !== 1008;
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

// ---- Strings and formatting ------------------------------------------------

export const STRINGS = {
  en: {
    title: "Countdown",
    start: "Start",
    cancel: "Cancel",
    seconds: "Seconds",
    busy: "Counting down",
    session: "Session",
    viewers: (n) => (n === 1 ? "1 viewer" : `${n} viewers`),
    connecting: "Connecting…",
    live: "Live",
    lost: "Connection lost. Reconnecting…",
    refused: "The server refused this session.",
    badSession: (raw) =>
      `“${raw}” is not a valid session name. Use 1–64 letters, digits, “-” or “_”.`,
    badSeconds: `Enter a whole number of seconds from ${MIN_SECONDS} to ${MAX_SECONDS}.`,
    notConnected: "Not connected; try again in a moment.",
    finished: "Countdown finished",
    errors: {
      busy: "A countdown is already running.",
      not_running: "No countdown is running.",
    },
    serverError: (msg) => `Server error: ${msg}`,
  },
  "zh-Hant": {
    title: "倒計時",
    start: "開始",
    cancel: "取消",
    seconds: "秒數",
    busy: "倒計時中",
    session: "場次",
    viewers: (n) => `${n} 位觀看者`,
    connecting: "連線中…",
    live: "已連線",
    lost: "連線中斷，正在重新連線…",
    refused: "伺服器拒絕了這個場次。",
    badSession: (raw) => `「${raw}」不是有效的場次名稱。請使用 1–64 個英文字母、數字、「-」或「_」。`,
    badSeconds: `請輸入 ${MIN_SECONDS} 到 ${MAX_SECONDS} 之間的整數秒數。`,
    notConnected: "尚未連線，請稍後再試。",
    finished: "倒計時結束",
    errors: {
      busy: "倒計時已在進行中。",
      not_running: "目前沒有進行中的倒計時。",
    },
    serverError: (msg) => `伺服器錯誤：${msg}`,
  },
};

/**
 * Picks the UI language: ?lang= wins, then the browser's preferences, then
 * English. Traditional Chinese covers zh-Hant, zh-TW, zh-HK, zh-MO and bare zh.
 */
export function pickLang(search, navigatorLanguages = []) {
  const params = search instanceof URLSearchParams ? search : new URLSearchParams(search ?? "");
  const candidates = [params.get("lang"), ...navigatorLanguages].filter(Boolean);
  for (const tag of candidates) {
    const lang = matchLang(tag);
    if (lang) return lang;
  }
  return "en";
}

function matchLang(tag) {
  const t = String(tag).toLowerCase();
  if (t === "en" || t.startsWith("en-")) return "en";
  if (t === "zh" || t.startsWith("zh-hant") || /^zh-(tw|hk|mo)\b/.test(t)) return "zh-Hant";
  return null;
}

/**
 * Text for the big label. The server always sends the label it wants shown
 * (numbers while running, the finished text, "Ready" when idle), so this is
 * the one place to change if the page ever draws the label itself (e.g. from
 * endsAt and a clock offset).
 */
export function labelText(state) {
  const label = state?.label;
  return typeof label === "string" ? label : label == null ? "" : String(label);
}

/**
 * Size class for the label ("s" | "m" | "l") from its rough printed width, so
 * CSS can pick a font size that fits a phone: wide (CJK, fullwidth) characters
 * count double. s fits "86400", m a word or "倒計時結束", l anything longer.
 */
export function labelSize(text) {
  let units = 0;
  for (const ch of String(text ?? "")) units += isWide(ch) ? 2 : 1;
  return units <= 5 ? "s" : units <= 10 ? "m" : "l";
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

/** "3 viewers"; tolerates a missing or odd count rather than showing "NaN". */
export function viewersText(viewers, strings) {
  const n = Number.isFinite(viewers) && viewers >= 0 ? Math.floor(viewers) : 0;
  return strings.viewers(n);
}

/** Words for a server error message, localised for the codes users cause. */
export function errorText(msg, strings) {
  const known = strings.errors[msg?.code];
  if (known) return known;
  return strings.serverError(msg?.message || msg?.code || "unknown");
}
