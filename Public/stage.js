// What the page makes of a run on a stage: the level (normal, warning, danger,
// over) and its words, the presenter's message, the blackout, and the start's
// options (overtime, warning and danger times). Pure: no DOM, no clock of its
// own; every range comes from CONTRACT.

import { CONTRACT, OVERTIME_PHASE, clockWords, parseDuration, shownSeconds } from "./logic.js";

export const LEVELS = CONTRACT.levels;
export const NORMAL_LEVEL = "normal";

/** A warning or danger time as the server keeps it (whole seconds in range), or null. */
function levelSeconds(v) {
  const { min, max } = CONTRACT.levelSeconds;
  return Number.isSafeInteger(v) && v >= min && v <= max ? v : null;
}

/**
 * The level to draw now. While running or paused it is predicted from the
 * seconds shown and the run's warnAtSeconds and dangerAtSeconds, the rule
 * the server applies (danger first, then warning, each "at or below"), so
 * the colour turns in the very frame the digit does, not when the tick's
 * patch arrives. In overtime it is "over". Otherwise, or when the page has
 * no number to judge by, it is the server's own `level` (a word the
 * contract does not know reads as normal).
 */
export function levelOf(state, serverNow) {
  if (!state) return NORMAL_LEVEL;
  if (state.phase === OVERTIME_PHASE) return "over";
  const secs = shownSeconds(state, serverNow);
  if (secs !== null) {
    const danger = levelSeconds(state.dangerAtSeconds);
    const warn = levelSeconds(state.warnAtSeconds);
    if (danger !== null && secs <= danger) return "danger";
    if (warn !== null && secs <= warn) return "warning";
    return NORMAL_LEVEL;
  }
  return LEVELS.includes(state.level) ? state.level : NORMAL_LEVEL;
}

/**
 * What a change of level from `before` to `after` sets off: `announce`, the
 * words a screen reader hears once (null for none), and `chime`, whether the
 * chime sounds (warning and danger; "over" is the zero, which chimes on its
 * own). Nothing on the page's first state (`before` null: it joined a run,
 * nothing changed) nor when the level stays. Back to normal is said only
 * while a run still counts (a +1 min), not when it ends (the label says so).
 */
export function levelCue(before, after, state, serverNow, strings) {
  if (before === null || before === after) return { announce: null, chime: false };
  const secs = shownSeconds(state, serverNow);
  const left = secs === null ? null : clockWords(secs, strings);
  switch (after) {
    case "warning":
      return { announce: left === null ? null : strings.levelWarning(left), chime: true };
    case "danger":
      return { announce: left === null ? null : strings.levelDanger(left), chime: true };
    case "over":
      return { announce: strings.levelOver, chime: false };
    default:
      return { announce: secs === null ? null : strings.levelNormal, chime: false };
  }
}

/** Characters the server refuses in a message: C0 controls and DEL. */
const CONTROL_RE = /[\u0000-\u001f\u007f]/;

/**
 * The message field to the text `message` carries: its ends trimmed, 1 to
 * the contract's maximum of characters (Unicode scalars, as the server
 * counts them), no control characters.
 * @returns {{ok: true, text: string} | {ok: false, why: "empty"|"long"|"control"}}
 */
export function parseMessage(text) {
  const t = String(text ?? "").trim();
  if (t === "") return { ok: false, why: "empty" };
  if (CONTROL_RE.test(t)) return { ok: false, why: "control" };
  if (messageLength(t) > CONTRACT.messageMaxLength) return { ok: false, why: "long" };
  return { ok: true, text: t };
}

/** The characters a message field's text would send (its ends trimmed), for the counter. */
export function messageLength(text) {
  return [...String(text ?? "").trim()].length;
}

/** The message to show from the state, or null (absent, empty, or not a string). */
export function shownMessage(state) {
  const m = state?.message;
  return typeof m === "string" && m !== "" ? m : null;
}

/**
 * What the blackout does to this screen: "off"; "blank" for a screen that
 * only watches (a viewer, and the overlay and presenter views, which never
 * control), which shows nothing; "indicator" for a controller's own page,
 * which keeps everything and says the blackout is on.
 */
export function blackoutView(state, role, view) {
  if (state?.blackout !== true) return "off";
  if (view !== "full" || role === "viewer") return "blank";
  return "indicator";
}

/**
 * The warning and danger fields (empty for none; the duration field's
 * formats, "2m", "2:00", "120") to the start's warnAtSeconds and
 * dangerAtSeconds, in the contract's range, danger below warning as the
 * server requires.
 * @returns {{ok: true, warnAtSeconds: number|null, dangerAtSeconds: number|null}
 *   | {ok: false, field: "warn"|"danger", why: "format"|"range"|"order"}}
 */
export function parseLevelTimes(warnText, dangerText) {
  const read = (text) => {
    if (String(text ?? "").trim() === "") return { ok: true, seconds: null };
    return parseDuration(text, CONTRACT.levelSeconds);
  };
  const warn = read(warnText);
  if (!warn.ok) return { ok: false, field: "warn", why: warn.why };
  const danger = read(dangerText);
  if (!danger.ok) return { ok: false, field: "danger", why: danger.why };
  if (warn.seconds !== null && danger.seconds !== null && danger.seconds >= warn.seconds) {
    return { ok: false, field: "danger", why: "order" };
  }
  return { ok: true, warnAtSeconds: warn.seconds, dangerAtSeconds: danger.seconds };
}

/** The start's extra fields from the stage options: only those set, so a plain start stays as it was. */
export function startOptions(overtime, times) {
  const fields = {};
  if (overtime === true) fields.overtime = true;
  if (times.warnAtSeconds !== null) fields.warnAtSeconds = times.warnAtSeconds;
  if (times.dangerAtSeconds !== null) fields.dangerAtSeconds = times.dangerAtSeconds;
  return fields;
}
