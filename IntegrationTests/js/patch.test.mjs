// RFC 7396 merge patches, and how snapshots, patches and epochs update what the page holds.
import { test } from "node:test";
import assert from "node:assert/strict";
import { logic } from "./load-public.mjs";

const { applyMergePatch, normalizeState, reduceMessage } = logic;

test("RFC 7396 appendix A examples", () => {
  const cases = [
    [{ a: "b" }, { a: "c" }, { a: "c" }],
    [{ a: "b" }, { b: "c" }, { a: "b", b: "c" }],
    [{ a: "b" }, { a: null }, {}],
    [{ a: "b", b: "c" }, { a: null }, { b: "c" }],
    [{ a: ["b"] }, { a: "c" }, { a: "c" }],
    [{ a: "c" }, { a: ["b"] }, { a: ["b"] }],
    [{ a: { b: "c" } }, { a: { b: "d", c: null } }, { a: { b: "d" } }],
    [{ a: [{ b: "c" }] }, { a: [1] }, { a: [1] }],
    [["a", "b"], ["c", "d"], ["c", "d"]],
    [{ a: "b" }, ["c"], ["c"]],
    [{ a: "foo" }, null, null],
    [{ a: "foo" }, "bar", "bar"],
    [{ e: null }, { a: 1 }, { e: null, a: 1 }],
    [[1, 2], { a: "b", c: null }, { a: "b" }],
    [{}, { a: { bb: { ccc: null } } }, { a: { bb: {} } }],
  ];
  for (const [target, patch, want] of cases) {
    assert.deepEqual(applyMergePatch(target, patch), want, JSON.stringify({ target, patch }));
  }
});

test("applyMergePatch mutates neither argument", () => {
  const target = { a: { b: 1 }, keep: [1, 2] };
  const patch = { a: { c: 2 }, keep: [3] };
  const out = applyMergePatch(target, patch);
  assert.deepEqual(target, { a: { b: 1 }, keep: [1, 2] });
  assert.deepEqual(patch, { a: { c: 2 }, keep: [3] });
  out.keep.push(9);
  assert.deepEqual(patch.keep, [3]);
});

test("endsAt: null in a patch removes it; normalizeState reads absent as null", () => {
  const running = { phase: "running", endsAt: 123, remaining: 1 };
  const finished = normalizeState(applyMergePatch(running, { phase: "finished", endsAt: null, remaining: 0 }));
  assert.equal(finished.endsAt, null);
  assert.equal(finished.phase, "finished");
});

test("remainingMs: null in a resume patch removes it; normalizeState reads absent as null", () => {
  const paused = { phase: "paused", endsAt: null, remainingMs: 61500, remaining: 62, label: "62" };
  const resumed = normalizeState(applyMergePatch(paused, { phase: "running", endsAt: 70000, remainingMs: null }));
  assert.equal(resumed.remainingMs, null);
  assert.equal(resumed.endsAt, 70000);
  assert.equal(normalizeState({ phase: "idle" }).remainingMs, null);
});

const snap = (seq, state, epoch = "aaaaaaaaaaaaaaaa") => ({
  type: "snapshot",
  session: "s",
  epoch,
  seq,
  serverTime: 1,
  state,
});
// Snapshots spell out every field, the nulls too.
const idle = { phase: "idle", spinner: false, enabled: true, label: "Ready", remaining: 0, duration: 0, endsAt: null, remainingMs: null, viewers: 1 };
const empty = { epoch: null, seq: -Infinity, state: null };

test("snapshot then patches in order give the server's state", () => {
  let held = reduceMessage(empty, snap(4, idle), false);
  assert.equal(held.restarted, false);
  const start = { phase: "running", spinner: true, enabled: false, label: "3", remaining: 3, duration: 3, endsAt: 9000 };
  held = reduceMessage(held, { type: "patch", seq: 5, patch: start }, true);
  held = reduceMessage(held, { type: "patch", seq: 6, patch: { label: "2", remaining: 2 } }, true);
  held = reduceMessage(held, { type: "patch", seq: 7, patch: { viewers: 3 } }, true);
  assert.equal(held.seq, 7);
  assert.deepEqual(held.state, { ...idle, ...start, label: "2", remaining: 2, viewers: 3 });
});

test("a merged patch may jump seq; stale or repeated patches are ignored", () => {
  const held = reduceMessage(empty, snap(4, idle), false);
  const jumped = reduceMessage(held, { type: "patch", seq: 9, patch: { viewers: 2 } }, true);
  assert.equal(jumped.seq, 9);
  assert.equal(reduceMessage(jumped, { type: "patch", seq: 9, patch: { viewers: 5 } }, true), null);
  assert.equal(reduceMessage(jumped, { type: "patch", seq: 3, patch: { viewers: 5 } }, true), null);
});

test("a patch before this connection's snapshot is ignored (old state is not patched)", () => {
  const held = reduceMessage(empty, snap(4, idle), false);
  assert.equal(reduceMessage(held, { type: "patch", seq: 5, patch: { viewers: 2 } }, false), null);
  assert.equal(reduceMessage(empty, { type: "patch", seq: 5, patch: { viewers: 2 } }, true), null);
});

test("a later snapshot replaces state wholesale, even with a lower seq", () => {
  let held = reduceMessage(empty, snap(40, { ...idle, label: "x", extra: 1 }), false);
  held = reduceMessage(held, snap(2, idle), true);
  assert.equal(held.seq, 2);
  assert.deepEqual(held.state, idle);
  assert.equal(held.restarted, false); // same epoch
});

test("a new epoch marks a restart and nothing of the old state survives", () => {
  const running = { ...idle, phase: "running", spinner: true, enabled: false, label: "7", remaining: 7, duration: 9, endsAt: 5000 };
  let held = reduceMessage(empty, snap(50, running, "1111111111111111"), false);
  held = reduceMessage(held, snap(1, idle, "2222222222222222"), false);
  assert.equal(held.restarted, true);
  assert.equal(held.epoch, "2222222222222222");
  assert.equal(held.seq, 1);
  assert.deepEqual(held.state, idle);
  // The new server's patches (low seqs) apply; the old seq 50 does not block them.
  held = reduceMessage(held, { type: "patch", seq: 2, patch: { viewers: 2 } }, true);
  assert.equal(held.state.viewers, 2);
});

test("malformed messages are ignored", () => {
  const held = reduceMessage(empty, snap(1, idle), false);
  assert.equal(reduceMessage(held, { type: "snapshot", seq: 2, state: "nope" }, true), null);
  assert.equal(reduceMessage(held, { type: "patch", seq: 2, patch: [1] }, true), null);
  assert.equal(reduceMessage(held, { type: "pong" }, true), null);
  assert.equal(reduceMessage(held, null, true), null);
});
