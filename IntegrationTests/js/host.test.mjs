// The host's page (issue 21): quick time entry, the finish text, remembered
// values, the tab title, when −1 min ends a run, the clock's width class, and
// the viewer count while disconnected. Pure logic from Public/logic.js, in the words of Public/i18n.js.
import { test } from "node:test";
import assert from "node:assert/strict";
import { CONTRACT, i18n, logic } from "./load-public.mjs";

const {
  parseDuration, durationEcho, parseFinishText, readRemembered, rememberKey, titleText,
  adjustEnds, clockWidth, viewersText, buttonView, PRESET_MINUTES,
} = logic;
const { STRINGS } = i18n;
const en = STRINGS.en;
const zh = STRINGS["zh-Hant"];

test("parseDuration: seconds, m:ss, h:mm:ss and units, alone or largest first", () => {
  const ok = (text, seconds) => assert.deepEqual(parseDuration(text), { ok: true, seconds }, text);
  ok("600", 600);
  ok(" 5 ", 5);
  ok("10:00", 600);
  ok("0:30", 30);
  ok("1:30:00", 5400);
  ok("90s", 90);
  ok("10m", 600);
  ok("1h", 3600);
  ok("1h 30m", 5400);
  ok("1h30m15s", 5415);
  ok("2 min", 120);
  ok("5 minutes", 300);
  ok("10分", 600);
  ok("1小時", 3600);
  ok("45秒", 45);
  ok("10M", 600);
  ok("24h", CONTRACT.seconds.max);
});

test("parseDuration: anything else is a format error, never a guess", () => {
  for (const text of ["", " ", "abc", "1:60", "1:2", "1:00:60", "::", "1.5m", "-5", "+5", "5x", "m", "1m1h",
    "1s 1s", "1m 1h", "10:00:00:00", "1e3", "0x10", "NaN", "Infinity", "５", "1\u00002", "10m!", null, undefined]) {
    assert.deepEqual(parseDuration(text), { ok: false, why: "format" }, String(text));
  }
});

test("parseDuration: out of the contract's range, at the edges and far past them", () => {
  for (const text of ["0", "0s", "0:00", "00", String(CONTRACT.seconds.max + 1), "24:00:01", "25h",
    "9223372036854775808", "18446744073709551616", "9".repeat(400), "1" + "0".repeat(308) + "s"]) {
    assert.deepEqual(parseDuration(text), { ok: false, why: "range" }, text.slice(0, 30));
  }
  assert.deepEqual(parseDuration("1"), { ok: true, seconds: CONTRACT.seconds.min });
  assert.deepEqual(parseDuration("x".repeat(4096)), { ok: false, why: "format" });
});

test("durationEcho: what the field understood, in words, in both languages", () => {
  assert.equal(durationEcho("10m", en), "= 10 minutes");
  assert.equal(durationEcho("1:30:00", en), "= 1 hour, 30 minutes");
  assert.equal(durationEcho("90s", zh), "＝ 1 分 30 秒");
  assert.equal(durationEcho("", en), "");
  assert.equal(durationEcho("soon", en), en.badDuration);
  assert.equal(durationEcho("0", zh), zh.badDuration);
});

test("parseFinishText: empty is the default, ends are trimmed, the server's rules mirrored", () => {
  assert.deepEqual(parseFinishText(""), { ok: true, label: null });
  assert.deepEqual(parseFinishText("   "), { ok: true, label: null });
  assert.deepEqual(parseFinishText("  Lunch  "), { ok: true, label: "Lunch" });
  const max = CONTRACT.finishedLabelMaxLength;
  assert.deepEqual(parseFinishText("x".repeat(max)), { ok: true, label: "x".repeat(max) });
  assert.deepEqual(parseFinishText("x".repeat(max + 1)), { ok: false, why: "long" });
  // Counted in code points, as the server counts Unicode scalars: 64 emoji fit.
  assert.deepEqual(parseFinishText("🎉".repeat(max)), { ok: true, label: "🎉".repeat(max) });
  assert.deepEqual(parseFinishText("🎉".repeat(max + 1)), { ok: false, why: "long" });
  assert.deepEqual(parseFinishText("x".repeat(4096)), { ok: false, why: "long" });
  for (const c of ["\u0000", "\u0001", "\t", "\n", "\r", "\u001f", "\u007f"]) {
    assert.deepEqual(parseFinishText(`a${c}b`), { ok: false, why: "control" }, JSON.stringify(c));
  }
  // Not control characters by the server's rule: kept.
  assert.deepEqual(parseFinishText("a\u0080b\u00a0c"), { ok: true, label: "a\u0080b\u00a0c" });
  for (const lang of [en, zh]) assert.ok(lang.badFinish.long.includes(String(max)));
});

test("readRemembered: last values back from storage, anything odd refused", () => {
  assert.equal(rememberKey("team-a"), "countdown.last.team-a");
  const none = { overtime: false, warn: "", danger: "" };
  assert.deepEqual(readRemembered(JSON.stringify({ mode: "seconds", duration: "10m", finish: "Go" })),
    { mode: "seconds", duration: "10m", finish: "Go", ...none });
  assert.deepEqual(readRemembered(JSON.stringify({ mode: "until" })), { mode: "until", duration: "", finish: "", ...none });
  assert.deepEqual(readRemembered(JSON.stringify({ mode: "evil", duration: 5, finish: ["x"] })),
    { mode: "seconds", duration: "", finish: "", ...none });
  // The stage's start options: overtime only when stored as true, the times as short strings.
  assert.deepEqual(readRemembered(JSON.stringify({ overtime: true, warn: "2m", danger: "30s" })),
    { mode: "seconds", duration: "", finish: "", overtime: true, warn: "2m", danger: "30s" });
  for (const odd of ["true", 1, null, {}]) assert.equal(readRemembered(JSON.stringify({ overtime: odd })).overtime, false);
  assert.equal(readRemembered(JSON.stringify({ warn: "x".repeat(65), danger: 120 })).warn, "");
  assert.equal(readRemembered(JSON.stringify({ danger: 120 })).danger, "");
  assert.equal(readRemembered(JSON.stringify({ duration: "x".repeat(65) })).duration, "");
  for (const bad of [null, "", "{", "[]", "42", '"x"', "null"]) assert.equal(readRemembered(bad), null, String(bad));
});

const running = (endsAt, duration = 600) => ({ phase: "running", endsAt, remaining: null, duration, label: "" });

test("titleText: time and session while running or paused, the outcome once finished", () => {
  assert.equal(titleText(running(299_500), 0, "team-a", en), "5:00 · team-a");
  assert.equal(titleText(running(299_000), 0, "team-a", en), "4:59 · team-a");
  assert.equal(titleText({ phase: "paused", remaining: 299, endsAt: null }, 0, "team-a", en), "4:59 (paused) · team-a");
  assert.equal(titleText({ phase: "paused", remaining: 5, endsAt: null }, 0, "a", zh), "5（已暫停） · a");
  assert.equal(titleText({ phase: "finished", label: "Countdown finished" }, 0, "a", en), "Countdown finished · a");
  assert.equal(titleText({ phase: "finished", label: "Countdown finished" }, 0, "a", zh), "倒計時結束 · a");
  assert.equal(titleText({ phase: "finished", label: "Doors open" }, 0, "a", zh), "Doors open · a");
  assert.equal(titleText({ phase: "idle", label: "Ready" }, 0, "a", en), "Countdown · a");
  assert.equal(titleText(null, 0, "", en), "Countdown");
});

test("adjustEnds: −1 min asks only when it leaves no whole second", () => {
  assert.equal(adjustEnds(running(60_000), -60, 0), true, "exactly a minute left");
  assert.equal(adjustEnds(running(30_000), -60, 0), true);
  assert.equal(adjustEnds(running(61_000), -60, 0), false, "61 s leave 1 s");
  assert.equal(adjustEnds(running(30_000), 60, 0), false, "+1 min never ends a run");
  assert.equal(adjustEnds({ phase: "paused", remaining: 45 }, -60, 0), true);
  assert.equal(adjustEnds({ phase: "paused", remaining: 90 }, -60, 0), false);
  assert.equal(adjustEnds({ phase: "idle" }, -60, 0), false);
  assert.equal(adjustEnds(null, -60, 0), false);
});

test("clockWidth: the clock's length in characters, up to Nd hh:mm:ss; null for words", () => {
  assert.equal(clockWidth(running(5_000), 0), 1);
  assert.equal(clockWidth(running(299_000), 0), 4);
  assert.equal(clockWidth(running(600_000), 0), 5);
  assert.equal(clockWidth(running(5_400_000, 5400), 0), 7);
  assert.equal(clockWidth(running(86_400_000, 86400), 0), 11);
  assert.equal(clockWidth({ phase: "idle", label: "Ready" }, 0), null);
  assert.equal(clockWidth(null, 0), null);
});

test("viewersText: a count from a link that is down says it is the last known", () => {
  assert.equal(viewersText(3, en), "3 viewers");
  assert.equal(viewersText(3, en, false), "3 viewers (last known)");
  assert.equal(viewersText(1, en, false), "1 viewer (last known)");
  assert.equal(viewersText(2, zh, false), "2 位觀看者（最後已知）");
  assert.equal(viewersText(NaN, en, false), "0 viewers (last known)");
});

test("every new string exists in both languages", () => {
  assert.deepEqual(PRESET_MINUTES, [1, 5, 10, 15]);
  const keys = ["duration", "durationHint", "badDuration", "presets", "finishText", "confirmEnd", "confirmYes",
    "confirmNo", "waitingHost", "qrViewer", "qrController", "showController", "openSession", "sessionName", "open",
    "newKey", "newKeyHint", "confirmNewKey", "confirmNewKeyYes", "newKeyDone"];
  for (const [lang, strings] of Object.entries(STRINGS)) {
    for (const key of keys) assert.equal(typeof strings[key], "string", `${lang}.${key}`);
    for (const key of ["understood", "presetMinutes", "presetLabel", "viewersLastKnown", "pausedTitle"]) {
      assert.equal(typeof strings[key], "function", `${lang}.${key}`);
    }
  }
  assert.equal(zh.waitingHost, "等待主持人");
  assert.equal(en.waitingHost, "Waiting for the host");
});

test("a viewer's button gives way to words only while nothing runs", () => {
  const live = { role: "viewer", live: true };
  assert.equal(buttonView({ phase: "idle", enabled: true }, live).hostWait, true);
  assert.equal(buttonView({ phase: "running", spinner: true }, live).hostWait, false);
  assert.equal(buttonView({ phase: "paused" }, live).hostWait, false);
  assert.equal(buttonView({ phase: "idle", enabled: true }, { role: "controller", live: true }).hostWait, false);
});
