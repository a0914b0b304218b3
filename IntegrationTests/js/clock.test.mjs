// Clock offset estimation (NTP-style) and the label drawn from endsAt + offset.
import { test } from "node:test";
import assert from "node:assert/strict";
import { i18n, logic } from "./load-public.mjs";

const {
  clockSample,
  addClockSample,
  bestOffset,
  remainingAt,
  effectiveOffset,
  displaySeconds,
  msUntilNextChange,
  labelText,
} = logic;
const { STRINGS } = i18n;

test("clockSample: offset is serverTime minus the midpoint, rtt is the round trip", () => {
  // Client clock 1000 ms behind the server, 40 ms each way.
  const s = clockSample(10_000, 10_080, 11_040);
  assert.deepEqual(s, { offset: 1000, rtt: 80, at: 10_080 });
});

test("clockSample: an asymmetric path errs by at most rtt/2", () => {
  // True offset 500; request took 10 ms, reply 90 ms: server read its clock at
  // client 10_010 -> server 10_510.
  const s = clockSample(10_000, 10_100, 10_510);
  assert.ok(Math.abs(s.offset - 500) <= s.rtt / 2);
});

test("clockSample rejects nonsense: negative rtt, NaN, missing numbers", () => {
  assert.equal(clockSample(100, 99, 5), null);
  assert.equal(clockSample(Number.NaN, 100, 5), null);
  assert.equal(clockSample(1, 2, undefined), null);
  assert.equal(clockSample(1, 2, "3"), null);
});

test("bestOffset keeps the lowest-RTT sample, not the average or the latest", () => {
  let samples = [];
  samples = addClockSample(samples, clockSample(0, 300, 1150)); // rtt 300, offset 1000
  samples = addClockSample(samples, clockSample(1000, 1010, 2255)); // rtt 10, offset 1250
  samples = addClockSample(samples, clockSample(2000, 2200, 3000)); // rtt 200, offset 900
  assert.equal(bestOffset(samples), 1250);
});

test("bestOffset: a tie goes to the later sample; no samples -> null", () => {
  const a = clockSample(0, 20, 110); // offset 100, rtt 20
  const b = clockSample(100, 120, 310); // offset 200, rtt 20
  assert.equal(bestOffset([a, b]), 200);
  assert.equal(bestOffset([]), null);
});

test("addClockSample keeps at most `max` samples and drops stale ones", () => {
  let samples = [];
  for (let i = 0; i < 20; i++) samples = addClockSample(samples, clockSample(i * 1000, i * 1000 + 5, 0), { max: 8 });
  assert.equal(samples.length, 8);
  assert.equal(samples.at(-1).at, 19_005);
  // A sample far in the future makes every older one stale.
  samples = addClockSample(samples, clockSample(10_000_000, 10_000_050, 0), { maxAge: 60_000 });
  assert.equal(samples.length, 1);
  // A null sample (rejected) changes nothing.
  assert.equal(addClockSample(samples, null), samples);
});

test("remainingAt rounds up, as the server counts", () => {
  const endsAt = 100_000;
  assert.equal(remainingAt(endsAt, endsAt - 5000), 5);
  assert.equal(remainingAt(endsAt, endsAt - 4999), 5);
  assert.equal(remainingAt(endsAt, endsAt - 4000), 4);
  assert.equal(remainingAt(endsAt, endsAt - 1), 1);
  assert.equal(remainingAt(endsAt, endsAt), 0);
});

const running = (endsAt, duration = 5, remaining = 5) => ({
  phase: "running",
  spinner: true,
  enabled: false,
  label: String(remaining),
  remaining,
  duration,
  endsAt,
  viewers: 1,
});

test("label is drawn from endsAt and the offset, not from the last patch's label", () => {
  const endsAt = 1_000_000;
  const state = running(endsAt); // the last patch said "5"
  const offset = 250; // server is 250 ms ahead of this client
  const at = (clientNow) => labelText(state, clientNow + offset, STRINGS.en);
  assert.equal(at(endsAt - 5000 - offset), "5");
  assert.equal(at(endsAt - 4001 - offset), "5");
  // The second boundary passes with no patch: the label moves on by itself.
  assert.equal(at(endsAt - 4000 - offset), "4");
  assert.equal(at(endsAt - 1500 - offset), "2");
  assert.equal(at(endsAt - 1 - offset), "1");
});

test("label never shows 0 or less while running (the finish patch ends a run), nor above the duration", () => {
  const state = running(50_000, 5);
  assert.equal(displaySeconds(state, 50_000), 1);
  assert.equal(displaySeconds(state, 90_000), 1);
  assert.equal(displaySeconds(state, 0), 5); // a wildly wrong clock is clamped
  assert.equal(labelText(state, 60_000, STRINGS.en), "1");
});

test("effectiveOffset: an estimate that agrees with the latest patch stands", () => {
  const endsAt = 100_000;
  // Patch for 3 sent at 97_000, received at client 96_520 (client 500 behind, 20 ms late).
  const anchor = { endsAt, remaining: 3, at: 96_520 };
  assert.equal(effectiveOffset(500, anchor), 500);
  assert.equal(effectiveOffset(900, anchor), 900); // still shows 3 at receipt
});

test("effectiveOffset: a patch that disagrees wins, as if it arrived when sent", () => {
  const endsAt = 100_000;
  const anchor = { endsAt, remaining: 3, at: 96_520 };
  // Estimate too small: at receipt it would show 4. The patch says 3.
  const low = effectiveOffset(0, anchor);
  assert.equal(remainingAt(endsAt, anchor.at + low), 3);
  assert.equal(low, 97_000 - 96_520);
  // Estimate too large (patch over a second late by that clock): would show 2.
  const high = effectiveOffset(2000, anchor);
  assert.equal(remainingAt(endsAt, anchor.at + high), 3);
  // ...and the page then counts on from there on its own.
  assert.equal(remainingAt(endsAt, anchor.at + 999 + high), 3);
  assert.equal(remainingAt(endsAt, anchor.at + 1000 + high), 2);
});

test("effectiveOffset: a snapshot anchor uses the snapshot's serverTime", () => {
  const endsAt = 100_000;
  const anchor = { endsAt, remaining: 4, at: 1000, sentAt: 96_400 }; // 3.6 s left at send
  const off = effectiveOffset(0, anchor); // estimate 0 would show 99 -> clamp; disagrees
  assert.equal(off, 95_400);
  assert.equal(remainingAt(endsAt, 1000 + off), 4);
  assert.equal(remainingAt(endsAt, 1000 + 600 + off), 3); // 0.6 s later: the boundary
});

test("effectiveOffset: no estimate and no anchor means offset 0", () => {
  assert.equal(effectiveOffset(null, null), 0);
  assert.equal(effectiveOffset(undefined, { endsAt: 1 }), 0); // incomplete anchor ignored
});

test("msUntilNextChange lands just past the next whole-second boundary", () => {
  const state = running(10_000);
  assert.equal(msUntilNextChange(state, 5_000), 1001); // 5.000 s left -> 4 at 6_000
  assert.equal(msUntilNextChange(state, 5_600), 401); // 4.4 s left -> 4 shown, 3 at 7_000
  assert.equal(msUntilNextChange(state, 9_999), 2); // 1 ms left: next is the finish patch
  assert.equal(msUntilNextChange(state, 10_000), null);
  assert.equal(msUntilNextChange({ phase: "idle", endsAt: null }, 0), null);
  assert.equal(msUntilNextChange(null, 0), null);
  // After waiting that long the label has changed.
  const d = msUntilNextChange(state, 5_600);
  assert.equal(displaySeconds(state, 5_600), 5);
  assert.equal(displaySeconds(state, 5_600 + d), 4);
});
