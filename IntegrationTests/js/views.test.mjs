// The views chosen by the URL, the overlay's range-checked type, the moment a
// countdown reaches zero, the presenter's time of day, and the chime's sound file.
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { loadPublic } from "./load-public.mjs";

const views = await loadPublic("views.js");
const { parseView, reachedZero, timeOfDay, msUntilNextMinute, chimeOn, OVERLAY_SIZE, OVERLAY_WEIGHT } = views;

test("?view= picks overlay or presenter; anything else is the full page", () => {
  assert.equal(parseView("").view, "full");
  assert.equal(parseView("?view=overlay").view, "overlay");
  assert.equal(parseView("?session=a&view=presenter").view, "presenter");
  assert.equal(parseView(new URLSearchParams("view=overlay")).view, "overlay");
  for (const bad of ["OVERLAY", "overlay ", "over", "", "presenter\0", "x".repeat(4096), "__proto__", "toString"]) {
    assert.equal(parseView(`?view=${encodeURIComponent(bad)}`).view, "full", bad.slice(0, 20));
  }
  // The first of several wins, as URLSearchParams.get reads it.
  assert.equal(parseView("?view=presenter&view=overlay").view, "presenter");
});

test("&size= is a whole percent of the view's height within its range, else the default", () => {
  const size = (v) => parseView(`?view=overlay&size=${encodeURIComponent(v)}`).size;
  assert.equal(parseView("?view=overlay").size, OVERLAY_SIZE.fallback);
  assert.equal(size(String(OVERLAY_SIZE.min)), OVERLAY_SIZE.min);
  assert.equal(size(String(OVERLAY_SIZE.max)), OVERLAY_SIZE.max);
  assert.equal(size("42"), 42);
  for (const bad of [
    String(OVERLAY_SIZE.min - 1), String(OVERLAY_SIZE.max + 1), "0", "-0", "-5", "+50", "50.5", "5e1", "1e308", "1e400",
    "9223372036854775808", "-9223372036854775808", "18446744073709551616", "Infinity", "NaN", "0x20", "050", " 50",
    "50 ", "50px", "50%", "", "\0", "5\u0000", "٥٠", "9".repeat(4096),
  ]) {
    assert.equal(size(bad), OVERLAY_SIZE.fallback, JSON.stringify(bad.slice(0, 20)));
  }
});

test("&weight= is a CSS weight from 100 to 900 in hundreds, else the default", () => {
  const weight = (v) => parseView(`?view=overlay&weight=${encodeURIComponent(v)}`).weight;
  assert.equal(parseView("?view=overlay").weight, OVERLAY_WEIGHT.fallback);
  assert.equal(weight("100"), 100);
  assert.equal(weight("900"), 900);
  assert.equal(weight("400"), 400);
  for (const bad of ["0", "50", "450", "1000", "-100", "bold", "4e2", "400.0", "1e400", "\0", "9".repeat(4096)]) {
    assert.equal(weight(bad), OVERLAY_WEIGHT.fallback, bad.slice(0, 20));
  }
});

test("zero is a running (or paused) countdown finishing by running out, seen as it happens", () => {
  const finished = (outcome) => ({ phase: "finished", outcome });
  assert.equal(reachedZero("running", finished("elapsed")), true);
  assert.equal(reachedZero("paused", finished("elapsed")), true); // adjusted to nothing
  assert.equal(reachedZero("running", { phase: "finished" }), true); // no outcome: a countdown's finish
  assert.equal(reachedZero(null, finished("elapsed")), false); // a session finished before this page came
  assert.equal(reachedZero("finished", finished("elapsed")), false);
  assert.equal(reachedZero("waiting", finished("done")), false);
  assert.equal(reachedZero("waiting", finished("timeout")), false);
  assert.equal(reachedZero("running", finished("failed")), false);
  assert.equal(reachedZero("running", { phase: "idle" }), false); // cancel
  assert.equal(reachedZero("running", { phase: "running" }), false);
  assert.equal(reachedZero("running", null), false);
});

test("the time of day is to the minute, 24-hour, in the page's language; the next redraw is just past the minute", () => {
  const at = Date.UTC(2026, 0, 2, 9, 5, 59, 500);
  const local = new Date(at);
  const hh = String(local.getHours()).padStart(2, "0");
  const mm = String(local.getMinutes()).padStart(2, "0");
  assert.equal(timeOfDay(at, "en"), `${hh}:${mm}`);
  assert.match(timeOfDay(at, "zh-Hant"), new RegExp(`${hh}:${mm}`));
  assert.equal(timeOfDay(NaN, "en"), "");
  assert.equal(msUntilNextMinute(at), 501);
  assert.equal(msUntilNextMinute(Date.UTC(2026, 0, 2, 9, 6, 0, 0)), 60_001);
  assert.equal(msUntilNextMinute(-1), 2);
});

test("the chime is on only when the stored switch says on", () => {
  assert.equal(chimeOn("on"), true);
  for (const v of [null, "", "off", "ON", "true", "1", " on"]) assert.equal(chimeOn(v), false, String(v));
});

test("Public/chime.wav is what scripts/make-chime writes: a short mono PCM WAV", () => {
  const shipped = readFileSync(new URL("../../Public/chime.wav", import.meta.url));
  const out = join(mkdtempSync(join(tmpdir(), "chime-")), "chime.wav");
  execFileSync("python3", [new URL("../../scripts/make-chime", import.meta.url).pathname, out]);
  assert.ok(readFileSync(out).equals(shipped), "Public/chime.wav differs from scripts/make-chime's output: run it");
  assert.equal(shipped.toString("ascii", 0, 4), "RIFF");
  assert.equal(shipped.toString("ascii", 8, 12), "WAVE");
  const rate = shipped.readUInt32LE(24);
  const dataBytes = shipped.readUInt32LE(40);
  const seconds = dataBytes / (rate * 2);
  assert.ok(seconds > 0.2 && seconds <= 1.5, `${seconds} s is not a short chime`);
});
