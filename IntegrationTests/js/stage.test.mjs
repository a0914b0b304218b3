// The page on a stage (issue 20): overtime counting up from overSince, the
// level predicted from the seconds shown (and said once per change), a stop's
// finish with the time over, the presenter message, the blackout, and the
// start's overtime and warning and danger options. Pure logic from
// Public/logic.js and Public/stage.js, in the words of Public/i18n.js.
import { test } from "node:test";
import assert from "node:assert/strict";
import { CONTRACT, i18n, loadPublic, logic, pageScripts, source } from "./load-public.mjs";

const stage = await loadPublic("stage.js");
const views = await loadPublic("views.js");
const {
  OVERTIME_PHASE, STOPPED_OUTCOME, overSeconds, formatOver, msUntilNextChange, labelText, labelWords, titleText,
  clockWidth, outcomeBadge, buttonView, confirmHolds, confirmWords, normalizeState, applyMergePatch,
} = logic;
const { levelOf, levelCue, parseMessage, messageLength, shownMessage, blackoutView, parseLevelTimes, startOptions } =
  stage;
const { STRINGS } = i18n;
const en = STRINGS.en;
const zh = STRINGS["zh-Hant"];

const DEADLINE = 1_764_590_400_000; // an epoch ms in the contract's range
const EDGES = [2 ** 63, -(2 ** 63), 2 ** 64, 1e308, Infinity, -Infinity, NaN, -0.5, 1.5, "120", null, true, {}, []];
const running = (endsAt, fields = {}) => ({
  phase: "running", spinner: true, enabled: false, label: "", remaining: 0, duration: 600, endsAt, level: "normal",
  overtime: false, warnAtSeconds: null, dangerAtSeconds: null, message: null, blackout: false, ...fields,
});
const overtime = (overSince, fields = {}) => ({
  phase: OVERTIME_PHASE, spinner: true, enabled: false, label: "+0", remaining: 0, duration: 600, endsAt: null,
  level: "over", overSince, overMs: null, overtime: true, warnAtSeconds: 120, dangerAtSeconds: 30, ...fields,
});
const stopped = (overMs, label = CONTRACT.labels.stopped) => ({
  phase: "finished", spinner: false, enabled: true, label, remaining: 0, duration: 0, endsAt: null,
  outcome: STOPPED_OUTCOME, level: "normal", overSince: null, overMs,
});

test("the contract names what the page draws: the phase, the outcome, the ops, the levels and the ranges", () => {
  assert.ok(CONTRACT.phases.includes(OVERTIME_PHASE));
  assert.ok(CONTRACT.outcomes.includes(STOPPED_OUTCOME));
  for (const op of ["stop", "message", "blackout"]) assert.ok(CONTRACT.ops.includes(op), op);
  assert.deepEqual(stage.LEVELS, CONTRACT.levels);
  assert.deepEqual(CONTRACT.levels, ["normal", "warning", "danger", "over"]);
  assert.ok(Number.isSafeInteger(CONTRACT.messageMaxLength) && CONTRACT.messageMaxLength >= 1);
  assert.ok(CONTRACT.levelSeconds.min >= 1 && CONTRACT.levelSeconds.min < CONTRACT.levelSeconds.max);
  assert.ok(Number.isSafeInteger(CONTRACT.epochMs.max + CONTRACT.maxOvertimeSeconds * 1000));
});

test("the time over reads +0 … +59, then +1:00 … +59:59, then +1:00:00, as the server's label", () => {
  const cases = [[0, "+0"], [1, "+1"], [45, "+45"], [59, "+59"], [60, "+1:00"], [83, "+1:23"], [3599, "+59:59"],
    [3600, "+1:00:00"], [3661, "+1:01:01"]];
  for (const [secs, text] of cases) assert.equal(formatOver(secs), text, String(secs));
});

test("overtime counts whole seconds from overSince, on the server's boundaries, never below 0 nor past the cap", () => {
  const s = overtime(DEADLINE);
  assert.equal(overSeconds(s, DEADLINE), 0);
  assert.equal(overSeconds(s, DEADLINE + 999), 0);
  assert.equal(overSeconds(s, DEADLINE + 1000), 1);
  assert.equal(overSeconds(s, DEADLINE + 45_500), 45);
  assert.equal(overSeconds(s, DEADLINE - 300), 0); // the offset estimate a hair ahead of the deadline
  const cap = CONTRACT.maxOvertimeSeconds;
  assert.equal(overSeconds(s, DEADLINE + cap * 1000 + 5000), cap);
  // Drawn from overSince on every frame: the next redraw is just past the next boundary.
  assert.equal(msUntilNextChange(s, DEADLINE), 1001);
  assert.equal(msUntilNextChange(s, DEADLINE + 999), 2);
  assert.equal(msUntilNextChange(s, DEADLINE + 1000), 1001);
  assert.equal(msUntilNextChange(s, DEADLINE - 300), 301);
  assert.equal(msUntilNextChange(s, DEADLINE + cap * 1000), null); // the server's own finish is due
  assert.equal(labelText(s, DEADLINE + 45_200, en), "+45");
  assert.equal(labelText(s, DEADLINE + 83_000, en), "+1:23");
  assert.equal(labelWords(s, DEADLINE + 83_000, en), "1 minute, 23 seconds over");
  assert.equal(labelWords(s, DEADLINE + 5000, zh), "超時 5 秒");
  assert.equal(titleText(s, DEADLINE + 83_000, "talk", en), "+1:23 · talk");
  assert.equal(clockWidth(s, DEADLINE + 83_000), "+1:23".length);
  assert.equal(overSeconds(running(DEADLINE), DEADLINE + 5000), null, "not in overtime");
});

test("an overtime state without a usable overSince shows the server's label and schedules nothing", () => {
  for (const bad of [...EDGES, -1, CONTRACT.epochMs.max + 1]) {
    const s = overtime(bad, { label: "+7" });
    assert.equal(overSeconds(s, DEADLINE), null, String(bad));
    assert.equal(labelText(s, DEADLINE, en), "+7", String(bad));
    assert.equal(msUntilNextChange(s, DEADLINE), null, String(bad));
  }
  const s = normalizeState(applyMergePatch(overtime(DEADLINE), { overSince: null, label: "+3" }));
  assert.equal(labelText(s, DEADLINE + 9000, en), "+3");
});

test("a stop shows the finish text and, under it, the time over; stopped before zero it says Stopped", () => {
  const over = stopped(83_400);
  assert.equal(labelText(over, 0, en), en.finished);
  assert.equal(labelText(over, 0, zh), zh.finished);
  assert.deepEqual(outcomeBadge(over, 0, en), { outcome: STOPPED_OUTCOME, words: "+1:23 over", shown: true });
  assert.equal(outcomeBadge(over, 0, zh).words, "超時 +1:23");
  assert.equal(labelWords(over, 0, en), "1 minute, 23 seconds over: Countdown finished");
  assert.deepEqual(outcomeBadge(stopped(0), 0, en), { outcome: STOPPED_OUTCOME, words: en.outcomes.stopped, shown: true });
  assert.equal(labelWords(stopped(0), 0, en), "Stopped: Countdown finished");
  // The run's own finish text wins, as for any finish.
  assert.equal(labelText(stopped(5000, "Thank you!"), 0, en), "Thank you!");
  assert.equal(titleText(over, 0, "talk", en), "Countdown finished · talk");
  // An overMs the contract does not allow is no time over at all.
  for (const bad of [...EDGES, -1, CONTRACT.maxOvertimeSeconds * 1000 + 1]) {
    assert.equal(outcomeBadge(stopped(bad), 0, en).words, en.outcomes.stopped, String(bad));
  }
});

test("Stop is offered while running, paused and in overtime, to a host only, and asks first", () => {
  const host = { role: "controller", live: true };
  assert.equal(buttonView(running(DEADLINE), host).stop, true);
  assert.equal(buttonView({ ...running(DEADLINE), phase: "paused", remaining: 5 }, host).stop, true);
  const inOvertime = buttonView(overtime(DEADLINE), host);
  assert.deepEqual([inOvertime.stop, inOvertime.adjust, inOvertime.pause, inOvertime.busy], [true, true, false, true]);
  assert.equal(buttonView(overtime(DEADLINE), { role: "viewer", live: true }).stop, false);
  for (const phase of ["idle", "finished", "waiting"]) assert.equal(buttonView({ phase }, host).stop, false, phase);
  assert.deepEqual(confirmWords("stop"), { ask: "confirmStop", yes: "confirmStopYes" });
  for (const phase of ["running", "paused", OVERTIME_PHASE]) {
    assert.equal(confirmHolds("stop", phase), true, phase);
    assert.equal(confirmHolds("cancel", phase), true, phase);
  }
  for (const phase of ["idle", "finished", "waiting"]) assert.equal(confirmHolds("stop", phase), false, phase);
});

test("reaching zero into overtime is the zero (the chime and the flash), a stop is not", () => {
  assert.equal(views.reachedZero("running", overtime(DEADLINE)), true);
  assert.equal(views.reachedZero("paused", overtime(DEADLINE)), true);
  assert.equal(views.reachedZero(null, overtime(DEADLINE)), false); // joined in overtime
  assert.equal(views.reachedZero(OVERTIME_PHASE, overtime(DEADLINE)), false);
  assert.equal(views.reachedZero(OVERTIME_PHASE, stopped(5000)), false);
  assert.equal(views.reachedZero("running", stopped(0)), false);
});

test("the level turns with the digit: warning in the frame that shows warnAtSeconds, danger at dangerAtSeconds", () => {
  const s = running(DEADLINE, { warnAtSeconds: 120, dangerAtSeconds: 30 });
  assert.equal(levelOf(s, DEADLINE - 120_001), "normal"); // shows 121
  assert.equal(levelOf(s, DEADLINE - 120_000), "warning"); // shows 120: the tick's boundary
  assert.equal(levelOf(s, DEADLINE - 30_001), "warning");
  assert.equal(levelOf(s, DEADLINE - 30_000), "danger");
  assert.equal(levelOf(s, DEADLINE - 1), "danger");
  // Paused: the frozen number decides.
  const paused = (remaining) => ({ ...s, phase: "paused", endsAt: null, remaining });
  assert.deepEqual([121, 120, 31, 30].map((r) => levelOf(paused(r), 0)), ["normal", "warning", "warning", "danger"]);
  // Only one of the two set; danger alone, from the start.
  assert.equal(levelOf(running(DEADLINE, { dangerAtSeconds: 30 }), DEADLINE - 100_000), "normal");
  assert.equal(levelOf(running(DEADLINE, { dangerAtSeconds: 30 }), DEADLINE - 20_000), "danger");
  assert.equal(levelOf(running(DEADLINE, { warnAtSeconds: 900 }), DEADLINE - 600_000), "warning");
  assert.equal(levelOf(overtime(DEADLINE), DEADLINE + 5000), "over");
});

test("without a number to judge by the level is the server's; a time or level out of the contract counts as none", () => {
  assert.equal(levelOf(null, 0), "normal");
  for (const level of CONTRACT.levels) assert.equal(levelOf({ phase: "idle", level }, 0), level);
  for (const bad of ["WARNING", "", "__proto__", 5, null, undefined]) {
    assert.equal(levelOf({ phase: "finished", level: bad }, 0), "normal", String(bad));
  }
  const { min, max } = CONTRACT.levelSeconds;
  for (const bad of [...EDGES, min - 1, max + 1, -0]) {
    assert.equal(levelOf(running(DEADLINE, { warnAtSeconds: bad, dangerAtSeconds: bad }), DEADLINE - 1000), "normal",
      String(bad));
  }
  assert.equal(levelOf(running(DEADLINE + max * 1000, { warnAtSeconds: max }), DEADLINE), "warning");
});

test("each level change is said once, in words, in both languages, and chimes at warning and danger", () => {
  const s = running(DEADLINE, { warnAtSeconds: 120, dangerAtSeconds: 30 });
  const cues = [];
  let held = null;
  // Every quarter second from 2:05 left to the deadline, as the page redraws (more often than it must).
  for (let now = DEADLINE - 125_000; now < DEADLINE; now += 250) {
    const level = levelOf(s, now);
    const cue = levelCue(held, level, s, now, en);
    if (cue.announce || cue.chime) cues.push({ now, ...cue });
    held = level;
  }
  const over = overtime(DEADLINE);
  const atZero = levelCue(held, levelOf(over, DEADLINE), over, DEADLINE, en);
  assert.deepEqual(cues, [
    { now: DEADLINE - 120_000, announce: "Warning: 2 minutes left", chime: true },
    { now: DEADLINE - 30_000, announce: "Danger: 30 seconds left", chime: true },
  ]);
  assert.deepEqual(atZero, { announce: "Overtime", chime: false }); // the zero chimes on its own
  assert.deepEqual(levelCue("normal", "warning", s, DEADLINE - 120_000, zh), { announce: "警告：剩下 2 分", chime: true });
  assert.equal(levelCue("danger", "over", over, DEADLINE, zh).announce, "已超時");
});

test("no cue when the page first sees a run, nor for a level that stays; back to normal only while counting", () => {
  const s = running(DEADLINE, { warnAtSeconds: 120 });
  assert.deepEqual(levelCue(null, "warning", s, DEADLINE - 60_000, en), { announce: null, chime: false });
  assert.deepEqual(levelCue("warning", "warning", s, DEADLINE - 60_000, en), { announce: null, chime: false });
  // +1 min takes a run back above the warning time: said, not chimed.
  assert.deepEqual(levelCue("warning", "normal", s, DEADLINE - 150_000, en), { announce: en.levelNormal, chime: false });
  // A run that ends goes back to normal: the label says it ended, the cue nothing.
  assert.deepEqual(levelCue("over", "normal", stopped(5000), 0, en), { announce: null, chime: false });
  assert.deepEqual(levelCue("danger", "normal", { phase: "idle" }, 0, en), { announce: null, chime: false });
});

test("a message is 1 to the contract's maximum of characters, trimmed, with no control characters", () => {
  const max = CONTRACT.messageMaxLength;
  assert.deepEqual(parseMessage("Wrap up"), { ok: true, text: "Wrap up" });
  assert.deepEqual(parseMessage("  Take questions \u00a0"), { ok: true, text: "Take questions" });
  assert.deepEqual(parseMessage("請總結"), { ok: true, text: "請總結" });
  assert.deepEqual(parseMessage("x".repeat(max)), { ok: true, text: "x".repeat(max) });
  // Counted in Unicode scalars, as the server counts: 140 emoji are 280 UTF-16 units, and fine.
  const emoji = "🎤".repeat(max);
  assert.deepEqual(parseMessage(emoji), { ok: true, text: emoji });
  assert.equal(messageLength(emoji), max);
  assert.deepEqual(parseMessage("🎤".repeat(max + 1)), { ok: false, why: "long" });
  assert.deepEqual(parseMessage("x".repeat(max + 1)), { ok: false, why: "long" });
  assert.deepEqual(parseMessage("x".repeat(4096)), { ok: false, why: "long" });
  for (const blank of ["", "   ", "\u00a0", null, undefined]) assert.deepEqual(parseMessage(blank), { ok: false, why: "empty" });
  for (const bad of ["a\u0000b", "wrap\nup", "a\tb", "a\u007fb", "a\u001fb", "\u0000".repeat(4096)]) {
    assert.deepEqual(parseMessage(bad), { ok: false, why: "control" }, JSON.stringify(bad.slice(0, 8)));
  }
  assert.equal(messageLength("  ab  "), 2);
});

test("the message shown is the state's string; anything else is none", () => {
  assert.equal(shownMessage({ message: "Wrap up" }), "Wrap up");
  for (const bad of [null, undefined, "", 5, true, {}, ["x"]]) assert.equal(shownMessage({ message: bad }), null);
  assert.equal(shownMessage(null), null);
  const cleared = normalizeState(applyMergePatch({ phase: "idle", message: "Wrap up" }, { message: null }));
  assert.equal(shownMessage(cleared), null);
});

test("the blackout blanks every screen that only watches and marks the controller's own", () => {
  const on = { phase: "running", blackout: true };
  assert.equal(blackoutView(on, "viewer", "full"), "blank");
  assert.equal(blackoutView(on, "controller", "full"), "indicator");
  assert.equal(blackoutView(on, "open", "full"), "indicator"); // --control open: everyone controls
  for (const role of ["viewer", "controller", "open", null]) {
    assert.equal(blackoutView(on, role, "overlay"), "blank", role);
    assert.equal(blackoutView(on, role, "presenter"), "blank", role);
  }
  for (const off of [false, null, undefined, "true", 1]) {
    assert.equal(blackoutView({ blackout: off }, "viewer", "overlay"), "off", String(off));
  }
  assert.equal(blackoutView(null, "viewer", "full"), "off");
});

test("warning and danger times take the duration field's formats, in the contract's range, danger below warning", () => {
  assert.deepEqual(parseLevelTimes("2m", "30s"), { ok: true, warnAtSeconds: 120, dangerAtSeconds: 30 });
  assert.deepEqual(parseLevelTimes("2:00", "30"), { ok: true, warnAtSeconds: 120, dangerAtSeconds: 30 });
  assert.deepEqual(parseLevelTimes("", ""), { ok: true, warnAtSeconds: null, dangerAtSeconds: null });
  assert.deepEqual(parseLevelTimes(" ", "1m"), { ok: true, warnAtSeconds: null, dangerAtSeconds: 60 });
  assert.deepEqual(parseLevelTimes("5m", ""), { ok: true, warnAtSeconds: 300, dangerAtSeconds: null });
  const { min, max } = CONTRACT.levelSeconds;
  assert.deepEqual(parseLevelTimes(String(max), String(min)), { ok: true, warnAtSeconds: max, dangerAtSeconds: min });
  assert.deepEqual(parseLevelTimes("30", "30"), { ok: false, field: "danger", why: "order" });
  assert.deepEqual(parseLevelTimes("30", "2m"), { ok: false, field: "danger", why: "order" });
  assert.deepEqual(parseLevelTimes(String(min - 1), ""), { ok: false, field: "warn", why: "range" });
  assert.deepEqual(parseLevelTimes(String(max + 1), ""), { ok: false, field: "warn", why: "range" });
  assert.deepEqual(parseLevelTimes("", "25h"), { ok: false, field: "danger", why: "range" });
  assert.deepEqual(parseLevelTimes("9223372036854775808", ""), { ok: false, field: "warn", why: "range" });
  for (const bad of ["-0", "-5", "1e400", "1e308", "1.5", "2 m x", "\u0000", "x".repeat(4096), "Infinity"]) {
    assert.deepEqual(parseLevelTimes(bad, ""), { ok: false, field: "warn", why: "format" }, bad.slice(0, 10));
    assert.deepEqual(parseLevelTimes("", bad), { ok: false, field: "danger", why: "format" }, bad.slice(0, 10));
  }
});

test("a start carries only the options set, so a plain start is the start it always was", () => {
  const none = { warnAtSeconds: null, dangerAtSeconds: null };
  assert.deepEqual(startOptions(false, none), {});
  assert.deepEqual(startOptions(true, none), { overtime: true });
  assert.deepEqual(startOptions(true, { warnAtSeconds: 120, dangerAtSeconds: 30 }),
    { overtime: true, warnAtSeconds: 120, dangerAtSeconds: 30 });
  assert.deepEqual(startOptions("on", { warnAtSeconds: 120, dangerAtSeconds: null }), { warnAtSeconds: 120 });
});

test("every word of the stage exists in both languages, and each level reads differently", () => {
  const words = ["stop", "confirmStop", "confirmStopYes", "levelOver", "levelNormal", "stage", "nextStart", "overtime",
    "warnAt", "dangerAt", "levelHint", "message", "messageSend", "messageClear", "blackout", "blackoutOn",
    "blankedNote"];
  const makers = ["overWords", "overBy", "levelWarning", "levelDanger", "messageCount", "messageSaid"];
  for (const [lang, strings] of Object.entries(STRINGS)) {
    for (const key of words) assert.ok(typeof strings[key] === "string" && strings[key].length > 0, `${lang}.${key}`);
    for (const key of makers) assert.equal(typeof strings[key], "function", `${lang}.${key}`);
    for (const why of ["format", "range", "order"]) assert.ok(strings.badLevel[why], `${lang}.badLevel.${why}`);
    for (const why of ["empty", "long", "control"]) assert.ok(strings.badMessage[why], `${lang}.badMessage.${why}`);
    assert.ok(strings.badMessage.long.includes(String(CONTRACT.messageMaxLength)), lang);
    assert.equal(strings.messageCount(3), `3/${CONTRACT.messageMaxLength}`);
    const said = new Set([strings.levelWarning("x"), strings.levelDanger("x"), strings.levelOver, strings.levelNormal]);
    assert.equal(said.size, 4, lang);
  }
});

test("no copy of the stage's contract values is left in the page's code", () => {
  const code = (text) => text.replace(/\/\*[\s\S]*?\*\//g, "").replace(/(^|\s)\/\/.*$/gm, "$1");
  for (const name of pageScripts.filter((n) => n !== "constants.js")) {
    const text = code(source(name));
    for (const lit of [String(CONTRACT.messageMaxLength), String(CONTRACT.maxOvertimeSeconds)]) {
      assert.ok(!new RegExp(`\\b${lit}\\b`).test(text), `${name} has its own copy of ${lit}`);
    }
  }
  assert.ok(!source("index.html").includes(`maxlength="${CONTRACT.messageMaxLength}"`));
});

test("an overtime label gives back its seconds, only in the form the server writes it", () => {
  const { overFromLabel } = logic;
  const cases = [["+0", 0], ["+59", 59], ["+1:00", 60], ["+1:23", 83], ["+59:59", 3599], ["+1:00:00", 3600],
    ["+23:59:59", CONTRACT.maxOvertimeSeconds - 1], [formatOver(CONTRACT.maxOvertimeSeconds), CONTRACT.maxOvertimeSeconds]];
  for (const [text, secs] of cases) assert.equal(overFromLabel(text), secs, text);
  for (const bad of ["+60", "+0:59", "+01", "+1:5", "+1:60", "1:23", "+", "+-1", "+1e3", " +1", "+1 ", "+1\u0000",
    "+9223372036854775808", formatOver(CONTRACT.maxOvertimeSeconds + 1), "+" + "9".repeat(4096), null, 5, undefined]) {
    assert.equal(overFromLabel(bad), null, JSON.stringify(bad));
  }
});

test("an overtime tick anchors the clock as a countdown tick does: a page whose estimate is off draws the server's +N", () => {
  const { overtimeAnchor, effectiveOffset, remainingAt } = logic;
  // The tick "+5" is sent at overSince + 5 s; this page's clock runs 3 s behind the server's and its estimate is 0.
  const s = overtime(DEADLINE, { label: "+5" });
  const at = DEADLINE + 5000 - 3000 + 40; // arrived 40 ms after it was sent
  const anchor = overtimeAnchor(s, at);
  assert.deepEqual(anchor, { endsAt: DEADLINE, remaining: -5, at, sentAt: null });
  const offset = effectiveOffset(0, anchor);
  assert.equal(overSeconds(s, at + offset), 5);
  assert.equal(overSeconds(s, at + 999 + offset), 5);
  assert.equal(overSeconds(s, at + 1000 + offset), 6);
  // An estimate that already shows +5 stands.
  assert.equal(effectiveOffset(3000, anchor), 3000);
  assert.equal(-remainingAt(DEADLINE, DEADLINE + 5500), 5, "floor(over) is −ceil(−over)");
  // Nothing to anchor to: not overtime, no usable overSince, a label the server would not write.
  assert.equal(overtimeAnchor(running(DEADLINE), at), null);
  assert.equal(overtimeAnchor(overtime("x", { label: "+5" }), at), null);
  assert.equal(overtimeAnchor(overtime(DEADLINE, { label: "Overtime" }), at), null);
  assert.equal(overtimeAnchor(s, NaN), null);
});
