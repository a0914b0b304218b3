// The contract (Public/constants.js) is the page's one source for every rule it
// shares with the server: the page's rules follow it, and no copy of it is left
// in the page's own files to drift.
import { test } from "node:test";
import assert from "node:assert/strict";
import { CONTRACT, i18n, logic, pageScripts, source } from "./load-public.mjs";

const { SESSION_RE, SUBPROTOCOL, MIN_SECONDS, MAX_SECONDS, NO_RETRY_REASON, SERVER_READY_LABEL, SERVER_FINISHED_LABEL, parseSession, parseSeconds, isAdjust, closeOutcome, errorText } = logic;
const { STRINGS } = i18n;
const constantsSource = source("constants.js");

test("constants.js holds strict JSON from Object.freeze( to its last } (what the server's tests parse)", () => {
  const from = constantsSource.indexOf("{", constantsSource.indexOf("CONTRACT = Object.freeze("));
  const json = constantsSource.slice(from, constantsSource.lastIndexOf("}") + 1);
  assert.deepEqual(JSON.parse(json), CONTRACT);
});

test("the page's rules are the contract's", () => {
  assert.equal(logic.CONTRACT, CONTRACT, "logic.js re-exports the very object it imports");
  assert.equal(SESSION_RE.source, CONTRACT.sessionIdPattern);
  assert.equal(SUBPROTOCOL, CONTRACT.subprotocol);
  assert.equal(MIN_SECONDS, CONTRACT.seconds.min);
  assert.equal(MAX_SECONDS, CONTRACT.seconds.max);
  assert.equal(NO_RETRY_REASON, CONTRACT.noRetryReason);
  assert.equal(SERVER_READY_LABEL, CONTRACT.labels.idle);
  assert.equal(SERVER_FINISHED_LABEL, CONTRACT.labels.finished);
});

test("the edges of each range are where the contract puts them", () => {
  const id = "x".repeat(CONTRACT.sessionIdMaxLength);
  assert.deepEqual(parseSession(`?session=${id}`), { ok: true, session: id });
  assert.equal(parseSession(`?session=${id}x`).ok, false);
  assert.equal(parseSeconds(String(CONTRACT.seconds.min)), CONTRACT.seconds.min);
  assert.equal(parseSeconds(String(CONTRACT.seconds.min - 1)), null);
  assert.equal(parseSeconds(String(CONTRACT.seconds.max)), CONTRACT.seconds.max);
  assert.equal(parseSeconds(String(CONTRACT.seconds.max + 1)), null);
  assert.ok(isAdjust(CONTRACT.adjustSeconds.min) && isAdjust(CONTRACT.adjustSeconds.max));
  assert.ok(!isAdjust(CONTRACT.adjustSeconds.min - 1) && !isAdjust(CONTRACT.adjustSeconds.max + 1));
  assert.ok(!isAdjust(0) && !isAdjust(1.5) && !isAdjust("60"));
  assert.equal(closeOutcome(CONTRACT.closeCodes.policyViolation, "", true).why, "flooded");
  assert.equal(closeOutcome(CONTRACT.closeCodes.tryAgainLater, "", true).why, "full");
});

test("every error code of the contract has its own words in every language, and no others are made up", () => {
  for (const [lang, strings] of Object.entries(STRINGS)) {
    assert.deepEqual(Object.keys(strings.errors).sort(), [...CONTRACT.errorCodes].sort(), lang);
    for (const code of CONTRACT.errorCodes) {
      const text = errorText({ type: "error", id: 1, code, message: "raw server text" }, strings);
      assert.ok(typeof text === "string" && text.length > 0, `${lang} ${code}`);
      assert.notEqual(text, strings.serverError("raw server text"), `${lang} has no words for ${code}`);
    }
  }
});

test("no copy of a contract value is left in the page's code or markup", () => {
  const html = source("index.html");
  const literals = [
    CONTRACT.subprotocol,
    CONTRACT.sessionIdPattern,
    CONTRACT.noRetryReason,
    String(CONTRACT.seconds.max),
    String(CONTRACT.untilAheadMs.max),
    ...Object.values(CONTRACT.closeCodes).map(String),
  ];
  // Comments may name a value; code may not. "//" after a blank only, so "ws://" stays.
  const code = (source) => source.replace(/\/\*[\s\S]*?\*\//g, "").replace(/(^|\s)\/\/.*$/gm, "$1");
  const scripts = pageScripts.filter((name) => name !== "constants.js");
  assert.ok(scripts.includes("logic.js") && scripts.includes("app.js") && scripts.includes("i18n.js"), scripts.join());
  for (const name of scripts) {
    const text = code(source(name));
    for (const lit of literals) assert.ok(!text.includes(lit), `${name} has its own copy of ${lit}`);
    for (const code of CONTRACT.errorCodes) {
      // An error code may appear as a key of STRINGS.errors (the words for it), never as a rule.
      const uses = text.match(new RegExp(`["']${code}["']`, "g")) ?? [];
      assert.equal(uses.length, 0, `${name} spells out the code "${code}" as a string`);
    }
  }
  for (const lit of [String(CONTRACT.seconds.max), `min="${CONTRACT.seconds.min}"`]) {
    assert.ok(!html.includes(lit), `index.html has its own copy of ${lit}`);
  }
});

test("what the page can send fits the contract's value ranges, and those ranges are exact in JS", () => {
  // The page's ping t is JSON.stringify of a double: even the longest fits.
  for (const t of [Number.MAX_VALUE, -Number.MAX_VALUE, -Number.MIN_VALUE, Date.now() + 0.123456789, -0]) {
    const literal = JSON.stringify({ t }).slice(5, -1);
    assert.ok(literal.length <= CONTRACT.pingTMaxLength, `t ${literal} is longer than pingTMaxLength`);
  }
  // Any until the picker allows (at most untilAheadMs.max ahead) is a moment the server reads.
  assert.ok(Date.now() + CONTRACT.untilAheadMs.max <= CONTRACT.epochMs.max);
  assert.ok(CONTRACT.epochMs.min <= Date.now());
  for (const bound of [CONTRACT.epochMs.max, CONTRACT.durationSeconds.max * 1000]) {
    assert.ok(Number.isSafeInteger(bound), `${bound} is not exact in a JS number`);
  }
  assert.ok(CONTRACT.idMaxLength.string >= 1);
  assert.ok(CONTRACT.errorEchoMaxLength >= 1);
});

test("the waiting phase's contract: its phase, ops, error, outcomes, ranges and default labels", () => {
  assert.ok(CONTRACT.phases.includes("waiting"));
  for (const op of ["wait", "done", "fail"]) assert.ok(CONTRACT.ops.includes(op), op);
  assert.ok(CONTRACT.errorCodes.includes("not_waiting"));
  assert.deepEqual(CONTRACT.outcomes.slice(0, 4), ["elapsed", "done", "failed", "timeout"]);
  // A countdown's own end reads as "finished"; each other outcome has its own default words.
  for (const outcome of CONTRACT.outcomes.filter((o) => o !== "elapsed")) {
    assert.ok(typeof CONTRACT.labels[outcome] === "string" && CONTRACT.labels[outcome].length > 0, outcome);
  }
  assert.ok(CONTRACT.labels.waiting.length <= CONTRACT.waitLabelMaxLength);
  for (const text of Object.values(CONTRACT.labels)) assert.ok([...text].length <= CONTRACT.waitLabelMaxLength, text);
  const { min, max } = CONTRACT.timeoutSeconds;
  assert.ok(Number.isSafeInteger(min) && Number.isSafeInteger(max) && 1 <= min && min < max);
  // A timeout in ms from any moment a record holds stays exact in a JS number.
  assert.ok(Number.isSafeInteger(CONTRACT.epochMs.max + max * 1000));
});
