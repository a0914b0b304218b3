// Pause, resume and adjust on the page: the clock-style label, its words for
// screen readers, counting down to a picked time, and the big button's states.
import { test } from "node:test";
import assert from "node:assert/strict";
import { CONTRACT, i18n, logic } from "./load-public.mjs";

const { formatClock, clockWords, labelText, labelWords, labelSize, shownSeconds, parseUntil, localDateTime, buttonView } = logic;
const { STRINGS } = i18n;

test("clock labels: plain seconds under a minute, then m:ss, h:mm:ss and Nd hh:mm:ss", () => {
  const cases = [
    [5, "5"], [1, "1"], [59, "59"], [0, "0"],
    [60, "1:00"], [61, "1:01"], [599, "9:59"], [3599, "59:59"],
    [3600, "1:00:00"], [3725, "1:02:05"], [86399, "23:59:59"],
    [86400, "1d 00:00:00"], [90061, "1d 01:01:01"], [2592000, "30d 00:00:00"],
  ];
  for (const [secs, want] of cases) assert.equal(formatClock(secs), want, String(secs));
  assert.equal(formatClock(-3), "0");
  assert.equal(formatClock(Number.NaN), "0");
});

test("the same value in words, in both languages", () => {
  assert.equal(clockWords(3725, STRINGS.en), "1 hour, 2 minutes, 5 seconds");
  assert.equal(clockWords(1, STRINGS.en), "1 second");
  assert.equal(clockWords(60, STRINGS.en), "1 minute");
  assert.equal(clockWords(90061, STRINGS.en), "1 day, 1 hour, 1 minute, 1 second");
  assert.equal(clockWords(0, STRINGS.en), "0 seconds");
  assert.equal(clockWords(3725, STRINGS["zh-Hant"]), "1 小時 2 分 5 秒");
  assert.equal(clockWords(172800, STRINGS["zh-Hant"]), "2 天");
});

const running = (endsAt, duration) => ({ phase: "running", spinner: true, enabled: false, label: String(duration), remaining: duration, duration, endsAt, remainingMs: null });
const paused = (remainingMs) => ({ phase: "paused", spinner: false, enabled: true, label: String(Math.ceil(remainingMs / 1000)), remaining: Math.ceil(remainingMs / 1000), duration: 3725, endsAt: null, remainingMs });

test("running: a 3725 s run reads 1:02:05 at its start and a 5 s run reads 5", () => {
  assert.equal(labelText(running(3_725_000, 3725), 0, STRINGS.en), "1:02:05");
  assert.equal(labelText(running(3_725_000, 3725), 1, STRINGS.en), "1:02:05");
  assert.equal(labelText(running(3_725_000, 3725), 1000, STRINGS.en), "1:02:04");
  assert.equal(labelText(running(5000, 5), 0, STRINGS.en), "5");
  assert.equal(labelWords(running(3_725_000, 3725), 0, STRINGS.en), "1 hour, 2 minutes, 5 seconds");
  assert.equal(labelSize(labelText(running(3_725_000, 3725), 0, STRINGS.en)), "m");
});

test("paused: the frozen value, whatever the clock says", () => {
  const p = paused(61_500);
  assert.equal(shownSeconds(p, 0), 62);
  assert.equal(labelText(p, 0, STRINGS.en), "1:02");
  assert.equal(labelText(p, 10 ** 13, STRINGS.en), "1:02", "time passing does not move a paused label");
  assert.equal(labelWords(p, 0, STRINGS["zh-Hant"]), "1 分 2 秒");
  // remaining is what the server rounded; without it, remainingMs rounded up the same way.
  assert.equal(shownSeconds({ phase: "paused", remainingMs: 4001, endsAt: null }, 0), 5);
  assert.equal(shownSeconds({ phase: "idle", remaining: 0, endsAt: null }, 0), null);
  assert.equal(labelWords({ phase: "idle", label: "Ready", endsAt: null }, 0, STRINGS["zh-Hant"]), "準備就緒");
});

test("until: a picked local time becomes epoch ms, checked against the contract's range", () => {
  const now = new Date(2026, 11, 1, 9, 0, 0).getTime();
  assert.deepEqual(parseUntil("2026-12-01T10:02:05", now), { ok: true, until: now + 3_725_000 });
  assert.deepEqual(parseUntil("2026-12-01T09:30", now), { ok: true, until: now + 1_800_000 });
  assert.deepEqual(parseUntil(localDateTime(now + 90_000), now), { ok: true, until: now + 90_000 });
  assert.deepEqual(parseUntil("2026-12-01T09:00:00", now), { ok: false, why: "near" });
  assert.deepEqual(parseUntil("2026-12-01T08:59", now), { ok: false, why: "near" });
  const edge = now + CONTRACT.untilAheadMs.max;
  assert.deepEqual(parseUntil(localDateTime(edge), now), { ok: true, until: edge });
  assert.deepEqual(parseUntil(localDateTime(edge + 1000), now), { ok: false, why: "far" });
  assert.deepEqual(parseUntil(localDateTime(now + CONTRACT.untilAheadMs.min), now), { ok: true, until: now + CONTRACT.untilAheadMs.min });
  for (const bad of ["", null, "tomorrow", "2026-02-31T10:00", "2026-12-01 10:00", "2026-12-01T25:00"]) {
    assert.deepEqual(parseUntil(bad, now), { ok: false, why: "format" }, String(bad));
  }
});

test("every reason parseUntil gives has words in every language", () => {
  for (const why of ["format", "near", "far"]) {
    for (const [lang, strings] of Object.entries(STRINGS)) assert.equal(typeof strings.badUntil[why], "string", `${lang} ${why}`);
  }
  assert.match(STRINGS.en.badUntil.far, /30 days/);
});

const idle = { phase: "idle", spinner: false, enabled: true, label: "Ready", endsAt: null };
const live = (role = "open", pending = []) => ({ role, live: true, pending: new Set(pending) });

test("the big button: Start, spinner while running, Resume (no spinner) while paused", () => {
  assert.deepEqual(buttonView(idle, live()), { hostWait: false, op: "start", text: "start", busy: false, waiting: false, disabled: false, run: false, pause: false, adjust: false, settle: false, stop: false });
  assert.deepEqual(buttonView(running(5000, 5), live()), { hostWait: false, op: "start", text: "start", busy: true, waiting: false, disabled: true, run: true, pause: true, adjust: true, settle: false, stop: true });
  assert.deepEqual(buttonView(paused(3000), live()), { hostWait: false, op: "resume", text: "resume", busy: false, waiting: false, disabled: false, run: true, pause: false, adjust: true, settle: false, stop: true });
});

test("a press is a wait: Start or Resume in flight spins and disables the button", () => {
  assert.deepEqual(buttonView(idle, live("open", ["start"])).busy, true);
  assert.deepEqual(buttonView(idle, live("open", ["start"])).waiting, true);
  const resuming = buttonView(paused(3000), live("open", ["resume"]));
  assert.ok(resuming.busy && resuming.waiting && resuming.disabled);
  // Another op in flight does not make the big button wait.
  assert.equal(buttonView(paused(3000), live("open", ["adjust"])).busy, false);
  assert.equal(buttonView(idle, { role: "open", live: false }).disabled, true, "no link, no press");
});

test("a viewer sees the seed's button, disabled, spinning while running, and no run controls", () => {
  assert.deepEqual(buttonView(running(5000, 5), live("viewer")), { hostWait: false, op: "start", text: "start", busy: true, waiting: false, disabled: true, run: false, pause: false, adjust: false, settle: false, stop: false });
  assert.deepEqual(buttonView(paused(3000), live("viewer")), { hostWait: false, op: "resume", text: "paused", busy: false, waiting: false, disabled: true, run: false, pause: false, adjust: false, settle: false, stop: false });
  assert.equal(buttonView(idle, live("viewer")).disabled, true);
  // Nothing running: the viewer sees "Waiting for the host" in the button's place.
  assert.equal(buttonView(idle, live("viewer")).hostWait, true);
  assert.equal(buttonView({ ...idle, phase: "finished" }, live("viewer")).hostWait, true);
  assert.equal(buttonView(idle, live("open")).hostWait, false, "only a viewer waits for the host");
  for (const [lang, strings] of Object.entries(STRINGS)) {
    for (const key of ["start", "resume", "paused", "pause", "minusMinute", "plusMinute"]) assert.equal(typeof strings[key], "string", `${lang}.${key}`);
  }
  assert.equal(STRINGS["zh-Hant"].resume, "繼續");
  assert.equal(STRINGS["zh-Hant"].pause, "暫停");
});
