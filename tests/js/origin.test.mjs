// The page's origin check (Public/origin.js): what a refused page says, and that it asks once.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { logic } from "./load-logic.mjs";

// As a data: URL, like logic.js (see load-logic.mjs): always an ES module.
const source = readFileSync(new URL("../../Public/origin.js", import.meta.url), "utf8");
const { ORIGIN_STRINGS, refusalText, whyRefused } = await import(
  `data:text/javascript;base64,${Buffer.from(source, "utf8").toString("base64")}`
);

test("a refused origin is named twice: what is refused, and the flag that allows it", () => {
  const text = refusalText({ allowed: false, origin: "http://x.example:1", hint: "…" }, "en", "http://y");
  assert.equal(
    text,
    "This server does not accept pages from http://x.example:1. Start it with --allow-origin http://x.example:1",
  );
  const zh = refusalText({ allowed: false, origin: "http://x.example:1" }, "zh-Hant", "http://y");
  assert.match(zh, /--allow-origin http:\/\/x\.example:1/);
  assert.match(zh, /伺服器/);
});

test("an allowed origin, or an answer that is not one, says nothing", () => {
  for (const answer of [{ allowed: true, origin: "http://a" }, null, "no", 7, {}, { allowed: "false" }]) {
    assert.equal(refusalText(answer, "en", "http://a"), null);
  }
});

test("an origin the server could not read is named as the page knows it", () => {
  const text = refusalText({ allowed: false, origin: null }, "en", "http://page.example:8080");
  assert.match(text, /--allow-origin http:\/\/page\.example:8080$/);
});

test("every language of the page has the sentence", () => {
  assert.deepEqual(Object.keys(ORIGIN_STRINGS).sort(), Object.keys(logic.STRINGS).sort());
  for (const words of Object.values(ORIGIN_STRINGS)) assert.match(words.originRefused, /--allow-origin \{origin\}/);
});

test("the check is one POST, asked once; a failed one is asked again", async () => {
  const calls = [];
  const answer = { allowed: false, origin: "http://x.example:1" };
  let down = true;
  const fetcher = async (url, init) => {
    calls.push([url, init.method]);
    if (down) throw new TypeError("network");
    return { ok: true, json: async () => answer };
  };
  assert.equal(await whyRefused("en", fetcher, "http://x.example:1"), null);
  down = false;
  assert.match(await whyRefused("en", fetcher, "http://x.example:1"), /--allow-origin http:\/\/x\.example:1/);
  assert.equal(await whyRefused("en", fetcher, "http://x.example:1"), null);
  assert.deepEqual(calls, [
    ["/origin-check", "POST"],
    ["/origin-check", "POST"],
  ]);
});
