// The waiting phase on the page (issue 18): the spinner held until something
// outside says "done" or "fail", the time elapsed counting up under the label,
// the controls a host gets meanwhile, and how a finished wait reads, in words
// and in a colour, in both languages. Pure logic from Public/logic.js, in the
// words of Public/i18n.js.
import { test } from "node:test";
import assert from "node:assert/strict";
import { CONTRACT, i18n, logic } from "./load-public.mjs";

const {
  WAITING_PHASE, COUNTDOWN_OUTCOME, SERVER_WAITING_LABEL, elapsedSeconds, elapsedText, formatElapsed,
  msUntilNextChange, labelText, labelWords, titleText, outcomeOf, outcomeBadge, buttonView, confirmWords,
  confirmHolds, clockWidth, normalizeState, applyMergePatch,
} = logic;
const { STRINGS } = i18n;
const en = STRINGS.en;
const zh = STRINGS["zh-Hant"];

const START = 1_764_590_400_000; // an epoch ms in the contract's range
const waiting = (fields = {}) => ({
  phase: "waiting", spinner: true, enabled: false, label: "Deploying", remaining: 0, duration: 0, endsAt: null,
  startedAt: START, timeoutAt: null, outcome: null, ...fields,
});
const finished = (outcome, label) => ({
  phase: "finished", spinner: false, enabled: true, label, remaining: 0, duration: 0, endsAt: null, outcome,
});

test("the contract names what the page draws: the phase, the outcomes and the default texts", () => {
  assert.ok(CONTRACT.phases.includes(WAITING_PHASE));
  assert.ok(CONTRACT.outcomes.includes(COUNTDOWN_OUTCOME));
  assert.equal(SERVER_WAITING_LABEL, CONTRACT.labels.waiting);
  for (const o of CONTRACT.outcomes.filter((o) => o !== COUNTDOWN_OUTCOME)) {
    assert.equal(typeof CONTRACT.labels[o], "string", `a default text for ${o}`);
  }
  assert.ok(CONTRACT.ops.includes("done") && CONTRACT.ops.includes("fail") && CONTRACT.ops.includes("cancel"));
});

test("elapsed: m:ss from 0:00, counting up, then h:mm:ss and days", () => {
  const cases = [
    [0, "0:00"], [999, "0:00"], [1000, "0:01"], [59_999, "0:59"], [60_000, "1:00"], [65_000, "1:05"],
    [3_599_999, "59:59"], [3_600_000, "1:00:00"], [3_725_000, "1:02:05"], [90_061_000, "1d 01:01:01"],
  ];
  for (const [ms, want] of cases) assert.equal(elapsedText(waiting(), START + ms), want, String(ms));
  assert.equal(formatElapsed(-3), "0:00");
  assert.equal(formatElapsed(Number.NaN), "0:00");
  // The page's clock estimate may put the start a hair in the future: never "-0:01".
  assert.equal(elapsedSeconds(waiting(), START - 1500), 0);
  assert.equal(clockWidth(waiting(), START + 65_000), null, "the label itself is words, not a clock");
});

test("elapsed never passes the timeout: the server's finish patch ends the wait, not the page", () => {
  const w = waiting({ timeoutAt: START + 90_000 });
  assert.equal(elapsedText(w, START + 89_999), "1:29");
  assert.equal(elapsedText(w, START + 90_000), "1:30");
  assert.equal(elapsedText(w, START + 600_000), "1:30");
  assert.equal(msUntilNextChange(w, START + 90_000), null, "no more redraws until the patch comes");
  assert.equal(msUntilNextChange(w, START + 89_500), 501);
});

test("elapsed takes startedAt and timeoutAt as input: anything out of the contract's range is none", () => {
  const bad = [undefined, null, "1764590400000", Number.NaN, Infinity, -Infinity, 1e308, 2 ** 63, -(2 ** 63), 2 ** 64,
    -1, 1.5, CONTRACT.epochMs.max + 1, {}, [START]];
  for (const startedAt of bad) {
    assert.equal(elapsedSeconds(waiting({ startedAt }), START), null, String(startedAt));
    assert.equal(msUntilNextChange(waiting({ startedAt }), START), null, String(startedAt));
  }
  assert.equal(elapsedSeconds(waiting({ startedAt: -0 }), 5000), 5, "-0 is the epoch itself");
  // A nonsense timeoutAt is ignored, not trusted to cap the clock.
  for (const timeoutAt of [1e308, -1, "x", START - 1]) {
    assert.equal(elapsedText(waiting({ timeoutAt }), START + 65_000), "1:05", String(timeoutAt));
  }
  assert.equal(elapsedSeconds(waiting(), Number.NaN), null);
  // Only the waiting phase counts up, whatever fields linger.
  for (const phase of ["idle", "running", "paused", "finished"]) {
    assert.equal(elapsedSeconds({ ...waiting(), phase }, START + 5000), null, phase);
  }
});

test("elapsed is drawn from startedAt and the clock every frame, never counted: late timers and a new offset cannot make it drift", () => {
  // A page whose timers fire late by up to 900 ms (a busy or background tab),
  // and whose offset estimate changes halfway (a better ping came back).
  const w = waiting();
  let local = START - 3000 + 123; // the page's own clock
  let offset = 3000; // server minus page
  let random = 7;
  const lateness = () => ((random = (random * 1103515245 + 12345) % 2 ** 31) % 900);
  let frames = 0;
  while (local + offset < START + 600_000) {
    const serverNow = local + offset;
    assert.equal(elapsedSeconds(w, serverNow), Math.floor((serverNow - START) / 1000), `frame ${frames}`);
    const delay = msUntilNextChange(w, serverNow);
    assert.ok(delay >= 1 && delay <= 1001, `delay ${delay}`);
    // The redraw lands just past the boundary: the value shown has moved on.
    assert.equal(elapsedSeconds(w, serverNow + delay), elapsedSeconds(w, serverNow) + 1);
    local += delay + lateness();
    frames += 1;
    if (frames === 200) offset += 2500;
  }
  assert.ok(frames > 300 && frames < 600, `${frames} frames`);
  assert.equal(elapsedText(w, local + offset), formatElapsed(Math.floor((local + offset - START) / 1000)));
});

test("msUntilNextChange while waiting lands just past the next whole second after startedAt", () => {
  assert.equal(msUntilNextChange(waiting(), START), 1001);
  assert.equal(msUntilNextChange(waiting(), START + 400), 601);
  assert.equal(msUntilNextChange(waiting(), START + 999), 2);
  assert.equal(msUntilNextChange(waiting(), START - 500), 501, "before the start: at the start");
});

test("while waiting the label is the text, translated when it is the server's default, and the clock goes under it", () => {
  assert.equal(labelText(waiting(), START, en), "Deploying");
  assert.equal(labelText(waiting(), START, zh), "Deploying", "a text someone chose is shown as is");
  assert.equal(labelText(waiting({ label: CONTRACT.labels.waiting }), START, en), "Waiting");
  assert.equal(labelText(waiting({ label: CONTRACT.labels.waiting }), START, zh), "等待中");
  assert.equal(labelWords(waiting(), START + 65_000, en), "Deploying, 1 minute, 5 seconds elapsed");
  assert.equal(labelWords(waiting({ label: CONTRACT.labels.waiting }), START + 3_725_000, zh), "等待中，已過 1 小時 2 分 5 秒");
  assert.equal(labelWords(waiting(), START, en), "Deploying, 0 seconds elapsed");
  assert.equal(titleText(waiting(), START + 65_000, "ci", en), "Deploying 1:05 · ci");
  assert.equal(titleText(waiting({ label: CONTRACT.labels.waiting }), START + 5000, "ci", zh), "等待中 0:05 · ci");
  assert.equal(titleText(waiting({ startedAt: null }), START, "ci", en), "Deploying · ci");
});

test("outcomeOf: done, failed and timeout, only once finished; a countdown's own end and unknown words are none", () => {
  for (const o of ["done", "failed", "timeout"]) assert.equal(outcomeOf(finished(o, "x")), o);
  assert.equal(outcomeOf(finished(COUNTDOWN_OUTCOME, "Countdown finished")), null);
  for (const o of [undefined, null, "", "DONE", "success", 1, true, {}, ["done"], "done\u0000", "x".repeat(4096)]) {
    assert.equal(outcomeOf(finished(o, "x")), null, String(o));
  }
  for (const phase of ["idle", "running", "paused", "waiting"]) assert.equal(outcomeOf({ phase, outcome: "done" }), null, phase);
  assert.equal(outcomeOf(null), null);
});

test("a finished wait reads in the page's language: the default texts are translated, a chosen text is kept", () => {
  const defaults = { done: ["Done", "完成"], failed: ["Failed", "失敗"], timeout: ["Timed out", "逾時"] };
  for (const [outcome, [enWords, zhWords]] of Object.entries(defaults)) {
    const s = finished(outcome, CONTRACT.labels[outcome]);
    assert.equal(labelText(s, 0, en), enWords);
    assert.equal(labelText(s, 0, zh), zhWords);
    // The label already says it: no second "Done" under it, and a screen reader hears it once.
    assert.deepEqual(outcomeBadge(s, 0, zh), { outcome, words: zhWords, shown: false });
    assert.equal(labelWords(s, 0, zh), zhWords);
    assert.equal(titleText(s, 0, "ci", zh), `${zhWords} · ci`);
  }
  const custom = finished("failed", "Deploy failed");
  assert.equal(labelText(custom, 0, zh), "Deploy failed");
  assert.deepEqual(outcomeBadge(custom, 0, en), { outcome: "failed", words: "Failed", shown: true });
  assert.deepEqual(outcomeBadge(custom, 0, zh), { outcome: "failed", words: "失敗", shown: true });
  assert.equal(labelWords(custom, 0, en), "Failed: Deploy failed");
  assert.equal(labelWords(custom, 0, zh), "失敗：Deploy failed");
  // Another outcome's default text is a chosen text here: kept, and the badge says what happened.
  const odd = finished("failed", CONTRACT.labels.done);
  assert.equal(labelText(odd, 0, zh), CONTRACT.labels.done);
  assert.equal(outcomeBadge(odd, 0, zh).shown, true);
  // A countdown that ran out reads as it always has.
  assert.equal(labelText(finished(COUNTDOWN_OUTCOME, CONTRACT.labels.finished), 0, zh), "倒計時結束");
  assert.equal(outcomeBadge(finished(COUNTDOWN_OUTCOME, CONTRACT.labels.finished), 0, zh), null);
  assert.equal(labelText({ phase: "finished", label: CONTRACT.labels.finished, endsAt: null }, 0, zh), "倒計時結束", "no outcome: an older server");
});

test("the big button spins while waiting and takes no press; a host gets Done, Fail and Cancel, a viewer nothing", () => {
  const host = buttonView(waiting(), { role: "controller", live: true });
  assert.deepEqual(host, {
    hostWait: false, op: "start", text: "start", busy: true, waiting: false, disabled: true,
    run: true, pause: false, adjust: false, settle: true, stop: false,
  });
  assert.deepEqual(buttonView(waiting(), { role: "open", live: true }), host);
  const viewer = buttonView(waiting(), { role: "viewer", live: true });
  assert.deepEqual(viewer, {
    hostWait: false, op: "start", text: "start", busy: true, waiting: false, disabled: true,
    run: false, pause: false, adjust: false, settle: false, stop: false,
  });
  // Done and Fail are the waiting phase's own: never beside a countdown.
  for (const phase of ["idle", "running", "paused", "finished"]) {
    assert.equal(buttonView({ ...waiting(), phase, spinner: phase === "running" }, { role: "open", live: true }).settle, false, phase);
  }
  assert.equal(buttonView(waiting(), { role: "open", live: false }).run, true, "the controls stay while the link is down (inert)");
});

test("the question before Done, Fail or Cancel says what Yes does, and closes once it means nothing", () => {
  assert.deepEqual(confirmWords("done"), { ask: "confirmDone", yes: "confirmDoneYes" });
  assert.deepEqual(confirmWords("fail"), { ask: "confirmFail", yes: "confirmFailYes" });
  assert.deepEqual(confirmWords("cancel"), { ask: "confirmEnd", yes: "confirmYes" });
  assert.deepEqual(confirmWords("adjust"), { ask: "confirmEnd", yes: "confirmYes" });
  assert.deepEqual(confirmWords(undefined), { ask: "confirmEnd", yes: "confirmYes" });
  for (const op of ["done", "fail"]) {
    assert.equal(confirmHolds(op, "waiting"), true);
    for (const phase of ["idle", "running", "paused", "finished", undefined]) assert.equal(confirmHolds(op, phase), false, `${op} ${phase}`);
  }
  for (const phase of ["running", "paused", "waiting"]) assert.equal(confirmHolds("cancel", phase), true, phase);
  for (const phase of ["idle", "finished"]) assert.equal(confirmHolds("cancel", phase), false, phase);
  assert.equal(confirmHolds("adjust", "waiting"), false);
  assert.equal(confirmHolds("adjust", "running"), true);
});

test("every word of the waiting phase exists in both languages, and the outcomes are the contract's", () => {
  const outcomes = CONTRACT.outcomes.filter((o) => o !== COUNTDOWN_OUTCOME).sort();
  for (const [lang, strings] of Object.entries(STRINGS)) {
    for (const key of ["waitLabel", "waitBusy", "done", "fail", "confirmDone", "confirmDoneYes", "confirmFail",
      "confirmFailYes", "waitControls"]) {
      assert.ok(typeof strings[key] === "string" && strings[key].length > 0, `${lang}.${key}`);
    }
    for (const key of ["elapsedWords", "outcomeWords"]) assert.equal(typeof strings[key], "function", `${lang}.${key}`);
    assert.deepEqual(Object.keys(strings.outcomes).sort(), outcomes, lang);
    for (const o of outcomes) assert.ok(strings.outcomes[o].length > 0, `${lang}.outcomes.${o}`);
    for (const { ask, yes } of ["done", "fail", "cancel"].map(confirmWords)) {
      assert.equal(typeof strings[ask], "string", `${lang}.${ask}`);
      assert.equal(typeof strings[yes], "string", `${lang}.${yes}`);
    }
  }
  // Each outcome reads differently: words, not only colour, tell them apart.
  for (const strings of Object.values(STRINGS)) assert.equal(new Set(Object.values(strings.outcomes)).size, outcomes.length);
  assert.equal(zh.outcomes.timeout, "逾時");
});

test("a finish patch that removes startedAt stops the clock, and its outcome is read", () => {
  const s = normalizeState(waiting());
  const patched = normalizeState(applyMergePatch(s, {
    phase: "finished", spinner: false, enabled: true, label: CONTRACT.labels.timeout, startedAt: null, timeoutAt: null, outcome: "timeout",
  }));
  assert.equal("startedAt" in patched, false);
  assert.equal(elapsedSeconds(patched, START + 5000), null);
  assert.equal(outcomeOf(patched), "timeout");
  assert.equal(labelText(patched, 0, zh), "逾時");
  const back = normalizeState(applyMergePatch(patched, { phase: "idle", label: CONTRACT.labels.idle, outcome: null }));
  assert.equal(outcomeOf(back), null);
});
