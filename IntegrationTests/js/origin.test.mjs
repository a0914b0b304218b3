// The page's origin check (Public/origin.js): what a refused page says, and that it asks once.
import { test } from "node:test";
import assert from "node:assert/strict";
import { i18n, loadPublic } from "./load-public.mjs";

const { refusalText, whyRefused } = await loadPublic("origin.js");

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
  for (const [lang, words] of Object.entries(i18n.STRINGS)) {
    assert.match(words.originRefused, /--allow-origin \{origin\}/, lang);
    assert.equal(refusalText({ allowed: false, origin: "http://o" }, lang, "http://p"), words.originRefused.replaceAll("{origin}", "http://o"));
  }
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
