// Who may press Start (`--control key`): keys in URLs, roles, the Share links.
import { test } from "node:test";
import assert from "node:assert/strict";
import { i18n, logic, pageScripts, source } from "./load-public.mjs";

const {
  parseKey, parseKeyFragment, keyAddresses, keyStorageName, authMessage, roleDuringAuth,
  sessionUrl, controlOf, controlView, shareLinks, errorText,
} = logic;
const { STRINGS } = i18n;

const KEY = "0123456789abcdef0123456789abcdef";
const http = { protocol: "http:", host: "h:8080", origin: "http://h:8080", pathname: "/" };

test("parseKey: the key from ?key=, or null for none, empty or anything not URL-safe", () => {
  assert.equal(parseKey(`?session=a&key=${KEY}`), KEY);
  assert.equal(parseKey(new URLSearchParams({ key: KEY })), KEY);
  assert.equal(parseKey("?session=a"), null);
  assert.equal(parseKey("?key="), null);
  assert.equal(parseKey(""), null);
  assert.equal(parseKey(undefined), null);
  for (const bad of ["a b", "a&since=1", "ключ", "x".repeat(129), "<script>"]) {
    assert.equal(parseKey(new URLSearchParams({ key: bad })), null, bad);
  }
  assert.equal(parseKey(`?key=${"x".repeat(128)}`), "x".repeat(128));
});

test("sessionUrl: the key never goes into the WebSocket URL; authMessage carries it instead", () => {
  // sessionUrl takes no key at all: an extra argument changes nothing.
  assert.equal(sessionUrl(http, "a", null, KEY), "ws://h:8080/ws/a");
  assert.equal(sessionUrl(http, "a", 12, KEY), "ws://h:8080/ws/a?since=12");
  assert.equal(sessionUrl({ protocol: "https:", host: "h" }, "a", 3, KEY), "wss://h/ws/a?since=3");
  assert.deepEqual(JSON.parse(authMessage(KEY, 7)), { op: "auth", key: KEY, id: 7 });
  for (const bad of [null, "", "a b", "a&b=c", "x".repeat(129), 42]) assert.equal(authMessage(bad, 1), null, String(bad));
});

test("parseKeyFragment: the key from #key=, or null", () => {
  assert.equal(parseKeyFragment(`#key=${KEY}`), KEY);
  assert.equal(parseKeyFragment(`#x=1&key=${KEY}`), KEY);
  assert.equal(parseKeyFragment(`key=${KEY}`), KEY);
  for (const bad of ["", "#", "#key=", "#key=a%20b", "#k=1", undefined]) assert.equal(parseKeyFragment(bad), null, String(bad));
});

test("keyAddresses: ?key= moves to the fragment, then the address loses the key, the rest kept", () => {
  // An old link: the key leaves the query for the fragment, then the address bar.
  assert.deepEqual(keyAddresses(`http://h/?session=a&key=${KEY}&lang=zh-Hant`), {
    moved: `/?session=a&lang=zh-Hant#key=${KEY}`,
    clean: "/?session=a&lang=zh-Hant",
  });
  // A link of today: nothing to move, the fragment's key goes.
  assert.deepEqual(keyAddresses(`http://h/?session=a#key=${KEY}`), { moved: null, clean: "/?session=a" });
  assert.deepEqual(keyAddresses(`http://h/?session=a#x=1&key=${KEY}`), { moved: null, clean: "/?session=a#x=1" });
  // Both: the fragment's key wins, the query's is dropped all the same.
  assert.deepEqual(keyAddresses(`http://h/?key=old&session=a#key=${KEY}`), {
    moved: `/?session=a#key=${KEY}`,
    clean: "/?session=a",
  });
  // A bad ?key= is still taken out of the address, and never moved.
  assert.deepEqual(keyAddresses("http://h/?session=a&key=a%20b"), { moved: "/?session=a", clean: "/?session=a" });
  assert.deepEqual(keyAddresses("http://h/?session=a"), { moved: null, clean: null });
  assert.equal(keyStorageName("team-a"), "countdown.key.team-a");
});

test("roleDuringAuth: no viewer flash while the key's answer is pending", () => {
  // First connect of a controller: the join's viewer snapshot keeps the controls up.
  assert.equal(roleDuringAuth(null, "viewer", true), null);
  // Reconnect of a controller: it stays a controller until the answer.
  assert.equal(roleDuringAuth("controller", "viewer", true), "controller");
  // A controller snapshot (the key accepted, or the first joiner) is taken at once.
  assert.equal(roleDuringAuth(null, "controller", true), "controller");
  // Once answered (or with no key to present), the snapshot's role is the role.
  assert.equal(roleDuringAuth("controller", "viewer", false), "viewer");
  assert.equal(roleDuringAuth(null, "open", false), "open");
});

test("controlOf: no role means --control open; controller carries its key; anything else only watches", () => {
  const snap = (extra) => ({ type: "snapshot", seq: 1, state: {}, ...extra });
  assert.deepEqual(controlOf(snap({})), { role: "open", key: null });
  assert.deepEqual(controlOf(snap({ role: "controller", key: KEY })), { role: "controller", key: KEY });
  assert.deepEqual(controlOf(snap({ role: "controller" })), { role: "controller", key: null });
  assert.deepEqual(controlOf(snap({ role: "controller", key: 42 })), { role: "controller", key: null });
  assert.deepEqual(controlOf(snap({ role: "viewer" })), { role: "viewer", key: null });
  // A viewer is never handed a key, even if a server sent one.
  assert.deepEqual(controlOf(snap({ role: "viewer", key: KEY })), { role: "viewer", key: null });
  // Unknown roles fail closed: the server decides, the page does not offer controls.
  assert.deepEqual(controlOf(snap({ role: "auditor" })), { role: "viewer", key: null });
  assert.deepEqual(controlOf(snap({ role: null })), { role: "viewer", key: null });
  assert.deepEqual(controlOf(null), { role: "open", key: null });
});

test("controlView: what each role shows", () => {
  // Before the first snapshot: the controls, as the page always showed them.
  assert.deepEqual(controlView(null), { controls: true, viewOnly: false, keyRejected: false, share: false, controllerLink: false });
  // --control open: controls, and the Share area with the viewer link.
  assert.deepEqual(controlView("open", null), { controls: true, viewOnly: false, keyRejected: false, share: true, controllerLink: false });
  // A controller with a key: controls and the Share area.
  assert.deepEqual(controlView("controller", KEY, null), { controls: true, viewOnly: false, keyRejected: false, share: true, controllerLink: true });
  assert.equal(controlView("controller", null).controllerLink, false, "no key, no controller link");
  // A viewer: "View only" instead of the controls; the viewer link only, even with a key held.
  assert.deepEqual(controlView("viewer", null, null), { controls: false, viewOnly: true, keyRejected: false, share: true, controllerLink: false });
  assert.deepEqual(controlView("viewer", KEY, KEY), { controls: false, viewOnly: true, keyRejected: true, share: true, controllerLink: false });
});

test("shareLinks: a viewer link and a controller link (key in the fragment) on the page's origin and path, without ?lang=", () => {
  assert.deepEqual(shareLinks(http, "team-a", KEY), {
    viewer: "http://h:8080/?session=team-a",
    controller: `http://h:8080/?session=team-a#key=${KEY}`,
  });
  const sub = { origin: "https://x.example", pathname: "/countdown/index.html" };
  assert.deepEqual(shareLinks(sub, "default", null), {
    viewer: "https://x.example/countdown/index.html?session=default",
    controller: null,
  });
  assert.equal(shareLinks(http, "a", "no good").controller, null);
});

test("forbidden is told in words in both languages", () => {
  const msg = { type: "error", id: 3, code: "forbidden", message: "only a controller of this session may do that" };
  assert.equal(errorText(msg, STRINGS.en), "Only this session's controllers can control the countdown.");
  assert.equal(errorText(msg, STRINGS["zh-Hant"]), "只有這個場次的主控者可以控制倒計時。");
});

test("the page never writes to the console (so the key cannot end up there)", () => {
  assert.ok(pageScripts.includes("app.js") && pageScripts.includes("logic.js"), pageScripts.join());
  for (const file of pageScripts) {
    assert.doesNotMatch(source(file), /\bconsole\s*\./, `${file} uses the console`);
  }
});
