// Labels, languages, URLs and inputs.
import { test } from "node:test";
import assert from "node:assert/strict";
import { i18n, logic } from "./load-public.mjs";

const { labelText, labelSize, sessionUrl, parseSession, parseSeconds, errorText, viewersText } = logic;
const { pickLang, STRINGS } = i18n;

const finished = (label) => ({ phase: "finished", spinner: false, enabled: true, label, remaining: 0, duration: 5, endsAt: null });

test("finish text: the server's default is translated, a custom finishedLabel wins", () => {
  assert.equal(labelText(finished("Countdown finished"), 0, STRINGS["zh-Hant"]), "倒計時結束");
  assert.equal(labelText(finished("Countdown finished"), 0, STRINGS.en), "Countdown finished");
  assert.equal(labelText(finished("Lunch!"), 0, STRINGS["zh-Hant"]), "Lunch!");
  assert.equal(labelText(finished("倒計時結束"), 0, STRINGS.en), "倒計時結束");
});

test("idle text is translated; no state yet shows a dash", () => {
  const idle = { phase: "idle", label: "Ready", endsAt: null };
  assert.equal(labelText(idle, 0, STRINGS["zh-Hant"]), "準備就緒");
  assert.equal(labelText(idle, 0, STRINGS.en), "Ready");
  assert.equal(labelText(null, 0, STRINGS.en), "—");
});

test("running without endsAt falls back to the server's label", () => {
  assert.equal(labelText({ phase: "running", label: "4", endsAt: null }, 0, STRINGS.en), "4");
});

test("pickLang: ?lang= overrides the browser; zh-TW/HK/Hant map to zh-Hant; default en", () => {
  assert.equal(pickLang("?lang=zh-Hant", ["en-US"]), "zh-Hant");
  assert.equal(pickLang("?lang=en", ["zh-TW"]), "en");
  assert.equal(pickLang("", ["zh-TW", "en"]), "zh-Hant");
  assert.equal(pickLang("", ["zh-HK"]), "zh-Hant");
  assert.equal(pickLang("", ["fr-FR", "de"]), "en");
  assert.equal(pickLang("?lang=klingon", ["zh-Hant-TW"]), "zh-Hant");
});

test("every language has every string the English page has", () => {
  for (const [lang, strings] of Object.entries(STRINGS)) {
    for (const key of Object.keys(STRINGS.en)) assert.ok(key in strings, `${lang} lacks ${key}`);
    for (const code of Object.keys(STRINGS.en.errors)) assert.ok(code in strings.errors, `${lang} lacks error ${code}`);
  }
});

test("errors are shown in words, localised; unknown codes still say something", () => {
  assert.equal(errorText({ code: "busy" }, STRINGS.en), "This session is already counting down or waiting.");
  assert.equal(errorText({ code: "busy" }, STRINGS["zh-Hant"]), "這個場次已在倒計時或等待中。");
  assert.equal(errorText({ code: "weird", message: "oops" }, STRINGS.en), "Server error: oops");
  assert.equal(errorText({}, STRINGS.en), "Server error: unknown");
});

test("sessionUrl: ws/wss from the page's scheme, since=<seq> only for a real seq", () => {
  const http = { protocol: "http:", host: "h:8080" };
  const https = { protocol: "https:", host: "h" };
  assert.equal(sessionUrl(http, "team-a"), "ws://h:8080/ws/team-a");
  assert.equal(sessionUrl(https, "team-a", 12), "wss://h/ws/team-a?since=12");
  assert.equal(sessionUrl(http, "a", 0), "ws://h:8080/ws/a?since=0");
  assert.equal(sessionUrl(http, "a", -Infinity), "ws://h:8080/ws/a");
  assert.equal(sessionUrl(http, "a", 1.5), "ws://h:8080/ws/a");
});

test("parseSession and parseSeconds", () => {
  assert.deepEqual(parseSession(""), { ok: true, session: "default" });
  assert.deepEqual(parseSession("?session=team_a-1"), { ok: true, session: "team_a-1" });
  assert.deepEqual(parseSession("?session=a/b"), { ok: false, raw: "a/b" });
  assert.equal(parseSeconds(" 5 "), 5);
  assert.equal(parseSeconds("86400"), 86400);
  for (const bad of ["0", "86401", "5.0", "-1", "", "1e3", null]) assert.equal(parseSeconds(bad), null, String(bad));
});

test("labelSize: short numbers get the biggest type; CJK counts double", () => {
  assert.equal(labelSize("5"), "xs");
  assert.equal(labelSize("59"), "xs");
  assert.equal(labelSize("86400"), "s");
  assert.equal(labelSize("Ready"), "s");
  assert.equal(labelSize("倒計時結束"), "m");
  assert.equal(labelSize("Countdown finished"), "l");
});

test("viewersText tolerates odd counts", () => {
  assert.equal(viewersText(1, STRINGS.en), "1 viewer");
  assert.equal(viewersText(undefined, STRINGS.en), "0 viewers");
  assert.equal(viewersText(3, STRINGS["zh-Hant"]), "3 位觀看者");
});
