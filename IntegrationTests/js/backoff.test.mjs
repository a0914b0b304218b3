// Reconnect backoff (capped exponential, full jitter) and when not to reconnect.
import { test } from "node:test";
import assert from "node:assert/strict";
import { i18n, logic } from "./load-public.mjs";

const { backoffDelay, closeOutcome, shouldReconnect, NO_RETRY_REASON } = logic;
const { STRINGS } = i18n;

test("backoff ceiling doubles per attempt from the base", () => {
  const top = (n) => backoffDelay(n, { base: 500, cap: 10_000, random: () => 1 - Number.EPSILON });
  assert.deepEqual([0, 1, 2, 3, 4].map(top), [499, 999, 1999, 3999, 7999]);
});

test("backoff is capped, even for huge attempt numbers (no Infinity, no NaN)", () => {
  const top = (n) => backoffDelay(n, { base: 500, cap: 10_000, random: () => 0.999999 });
  assert.ok(top(5) < 10_000 && top(5) >= 9_999);
  assert.ok(top(60) < 10_000);
  assert.ok(top(5000) < 10_000);
  assert.ok(Number.isFinite(top(1e9)));
});

test("full jitter: the delay is uniform from 0 up to the ceiling", () => {
  assert.equal(backoffDelay(3, { random: () => 0 }), 0);
  assert.equal(backoffDelay(3, { base: 500, random: () => 0.5 }), 2000);
  // With real randomness, many clients spread over the whole range.
  const delays = Array.from({ length: 2000 }, () => backoffDelay(4, { base: 500, cap: 10_000 }));
  assert.ok(delays.every((d) => d >= 0 && d < 8000));
  assert.ok(Math.min(...delays) < 800, "some clients retry early");
  assert.ok(Math.max(...delays) > 7200, "some retry late");
});

test("backoff tolerates odd inputs: negative or fractional attempts, a bad random()", () => {
  assert.equal(backoffDelay(-3, { base: 500, random: () => 0.5 }), 250);
  assert.equal(backoffDelay(1.7, { base: 500, random: () => 0.5 }), 500);
  assert.equal(backoffDelay(Number.NaN, { base: 500, random: () => 0.5 }), 250);
  assert.equal(backoffDelay(2, { random: () => Number.NaN }), 0);
  assert.ok(backoffDelay(2, { base: 500, random: () => 7 }) < 2000);
});

test(`no retry after a clean close whose reason is "${NO_RETRY_REASON}", whatever the code`, () => {
  assert.equal(shouldReconnect(1000, "no-retry", true), false);
  assert.equal(shouldReconnect(1000, " No-Retry ", true), false);
  assert.equal(shouldReconnect(1008, "no-retry", true), false);
  assert.deepEqual(closeOutcome(1000, "no-retry", true), { retry: false, why: "ended" });
});

test("a 1008 is the flood close, not a refusal: retried, and the page says why", () => {
  // The server's flood close: its reason is not "no-retry".
  assert.deepEqual(closeOutcome(1008, "too many commands", true), { retry: true, why: "flooded" });
  assert.equal(shouldReconnect(1008, "", true), true);
});

test("a 1013 after too_many_sessions is retried, and the page says the server is full", () => {
  assert.deepEqual(closeOutcome(1013, "try again later", true), { retry: true, why: "full" });
});

test("retry after everything else: crashes, restarts, plain 1000, unclean closes", () => {
  assert.equal(shouldReconnect(1006, "", false), true); // server died / network gone
  assert.equal(shouldReconnect(1001, "going away", true), true); // restart
  assert.equal(shouldReconnect(1000, "", true), true); // plain normal closure
  assert.equal(shouldReconnect(1000, "bye", true), true);
  assert.equal(shouldReconnect(1011, "", true), true);
  assert.equal(shouldReconnect(1009, "too big", true), true);
  assert.deepEqual(closeOutcome(1001, "going away", true), { retry: true, why: null });
  // A close that did not come in a clean close frame is not the server's word.
  assert.equal(shouldReconnect(1000, "no-retry", false), true);
  assert.deepEqual(closeOutcome(1008, "", false), { retry: true, why: null });
});

test("every reason closeOutcome names has words in every language", () => {
  for (const [code, reason] of [[1000, "no-retry"], [1008, ""], [1013, ""]]) {
    const { why } = closeOutcome(code, reason, true);
    for (const [lang, strings] of Object.entries(STRINGS)) assert.equal(typeof strings[why], "string", `${lang}.${why}`);
  }
});
