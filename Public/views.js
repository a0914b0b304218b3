// The page's views, chosen by the URL, and the rules of the moment a countdown
// reaches zero. Pure: no DOM, no clock of its own.
//
//   (none)          the full page: label, button, controls, footer
//   ?view=overlay   the label alone on a transparent background, for OBS's
//                   browser source; &size= and &weight= set its type
//   ?view=presenter the label filling the screen and the time of day, for a
//                   confidence monitor
//
// Neither view has controls: they only watch, over the same socket.

import { COUNTDOWN_OUTCOME, OVERTIME_PHASE } from "./logic.js";

export const VIEWS = ["full", "overlay", "presenter"];

/**
 * The overlay's type: `size` is the label's height in percent of the view's
 * height (OBS sizes the view to the source), `weight` a CSS font weight.
 */
export const OVERLAY_SIZE = Object.freeze({ min: 5, max: 100, fallback: 60 });
export const OVERLAY_WEIGHT = Object.freeze({ min: 100, max: 900, step: 100, fallback: 700 });

/**
 * A whole number written as plain decimal digits (no sign, point, exponent,
 * space or leading zero) within [min, max], else `fallback`. "1e2", "-0",
 * "50.5", " 50" and a 4 KB string of digits all fall back.
 */
function wholeIn(text, { min, max, step = 1, fallback }) {
  if (typeof text !== "string" || !/^[1-9][0-9]{0,5}$/.test(text)) return fallback;
  const n = Number(text);
  return n >= min && n <= max && n % step === 0 ? n : fallback;
}

/**
 * The view a query string asks for: {view, size, weight}. An unknown view is
 * the full page; a bad size or weight is the default.
 */
export function parseView(search) {
  const params = search instanceof URLSearchParams ? search : new URLSearchParams(search ?? "");
  const asked = params.get("view");
  const view = VIEWS.includes(asked) ? asked : "full";
  return {
    view,
    size: wholeIn(params.get("size"), OVERLAY_SIZE),
    weight: wholeIn(params.get("weight"), OVERLAY_WEIGHT),
  };
}

/**
 * Whether the change from phase `before` to `state` is a countdown reaching
 * zero: a running (or paused, adjusted to nothing) countdown that finished by
 * running out, or went on into overtime. A snapshot of a session finished
 * long ago (`before` null), a cancel, a stop and a wait's done, fail or
 * timeout are not.
 */
export function reachedZero(before, state) {
  if (before !== "running" && before !== "paused") return false;
  if (state?.phase === OVERTIME_PHASE) return true;
  return state?.phase === "finished" && (state.outcome ?? COUNTDOWN_OUTCOME) === COUNTDOWN_OUTCOME;
}

/** The time of day at epoch ms `ms` in the page's language, to the minute ("14:05"). */
export function timeOfDay(ms, lang) {
  if (!Number.isFinite(ms)) return "";
  return new Intl.DateTimeFormat(lang, { hour: "2-digit", minute: "2-digit", hourCycle: "h23" }).format(ms);
}

/** Milliseconds from `ms` to just past the next minute, when the time of day next changes. */
export function msUntilNextMinute(ms) {
  return 60_000 - (((ms % 60_000) + 60_000) % 60_000) + 1;
}

/** The localStorage key of the chime's switch, and whether a stored value means on. */
export const CHIME_KEY = "countdown.chime";
export function chimeOn(stored) {
  return stored === "on";
}
