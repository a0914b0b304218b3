// The page's connection (Public/socket.js) on its own, against a scripted
// WebSocket and mocked timers: no DOM, no server. What the page draws from it
// is checked in the browser tests; here, what it holds and what it tells.
import { test } from "node:test";
import assert from "node:assert/strict";
import { CONTRACT, loadPublic, source } from "./load-public.mjs";

const { SessionSocket } = await loadPublic("socket.js");

/** A WebSocket the test speaks for: it records what the page sends. */
class ScriptedSocket extends EventTarget {
  static OPEN = 1;
  constructor(url, protocol) {
    super();
    Object.assign(this, { url, protocol, readyState: 0, sent: [], closedWith: null });
    ScriptedSocket.made.push(this);
  }
  send(text) {
    this.sent.push(JSON.parse(text));
  }
  close(code, reason) {
    this.closedWith = [code, reason];
  }
  open() {
    this.readyState = 1;
    this.dispatchEvent(new Event("open"));
  }
  receive(msg) {
    this.dispatchEvent(Object.assign(new Event("message"), { data: JSON.stringify(msg) }));
  }
  end(code, reason = "", wasClean = true) {
    this.readyState = 3;
    this.dispatchEvent(Object.assign(new Event("close"), { code, reason, wasClean }));
  }
}

const KEY = "0123456789abcdef0123456789abcdef";
const running = (endsAt) => ({ phase: "running", endsAt, remaining: 5, duration: 5, enabled: false, spinner: true });

/** A SessionSocket on scripted sockets, with every call of its handlers recorded. */
function harness(t, { key = null } = {}) {
  t.mock.timers.enable({ apis: ["setTimeout"] });
  ScriptedSocket.made = [];
  const calls = [];
  let clock = 1_000_000;
  const link = new SessionSocket({
    url: (since) => `ws://h/ws/a${since === null ? "" : `?since=${since}`}`,
    WebSocket: ScriptedSocket,
    now: () => clock,
    on: {
      open: () => calls.push(["open", link.authenticate(key)]),
      conn: (conn, before, why) => calls.push(["conn", conn, before, why]),
      message: (msg, info) => calls.push(["message", msg.type, info.lostRun]),
      timeout: (id, op) => calls.push(["timeout", id, op]),
      lost: () => calls.push(["lost"]),
      close: () => calls.push(["close"]),
    },
  });
  const sock = () => ScriptedSocket.made.at(-1);
  return { link, calls, sock, tick: (ms) => ((clock += ms), t.mock.timers.tick(ms)) };
}

test("a socket opens with the subprotocol, presents the key first, and is live from its snapshot on", (t) => {
  const { link, calls, sock } = harness(t, { key: KEY });
  link.connect();
  assert.equal(sock().url, "ws://h/ws/a");
  assert.equal(sock().protocol, CONTRACT.subprotocol);
  sock().open();
  assert.deepEqual(sock().sent, [{ op: "auth", key: KEY, id: 1 }], "the key goes in the first message");
  assert.equal(link.conn, "connecting");
  assert.deepEqual(link.pendingOps(), new Set(["auth"]));
  sock().receive({ type: "snapshot", epoch: "e1", seq: 3, serverTime: 1_000_000, state: running(1_005_000) });
  assert.equal(link.conn, "live");
  assert.deepEqual(calls.slice(1), [["conn", "live", "connecting", null], ["message", "snapshot", false]]);
  assert.equal(link.state.phase, "running");
  assert.equal(link.seq, 3);
  assert.equal(sock().sent[1].op, "ping", "a live link starts measuring the clock");
  sock().receive({ type: "ack", id: 1 });
  assert.deepEqual(link.pendingOps(), new Set(), "the ack ends the auth's wait");
  assert.deepEqual(calls.at(-1), ["message", "ack", false]);
});

test("a patch applies only on its own snapshot and only when newer; replies to nothing asked are dropped", (t) => {
  const { link, calls, sock } = harness(t);
  link.connect();
  sock().open();
  sock().receive({ type: "patch", seq: 9, patch: { phase: "idle" } });
  assert.equal(link.state, null, "no patch before the snapshot");
  sock().receive({ type: "snapshot", epoch: "e1", seq: 3, state: { phase: "idle", label: "Ready" } });
  sock().receive({ type: "patch", seq: 3, patch: { label: "old" } });
  sock().receive({ type: "patch", seq: 5, patch: { label: "new" } });
  assert.equal(link.state.label, "new");
  const before = calls.length;
  sock().receive({ type: "ack", id: 77 });
  sock().receive({ type: "error", id: 77, code: "busy" });
  sock().receive({ type: "surprise" });
  sock().receive("not json{");
  assert.equal(calls.length, before, "none of those reaches the page");
  sock().receive({ type: "error", code: "rate_limited" });
  assert.deepEqual(calls.at(-1), ["message", "error", false], "an error of the connection itself does");
});

test("send: refused until live; a command unanswered in time is given up and said so", (t) => {
  const { link, calls, sock, tick } = harness(t);
  assert.equal(link.send("start", { seconds: 5 }), null, "no socket");
  link.connect();
  sock().open();
  assert.equal(link.send("start", { seconds: 5 }), null, "open but no snapshot yet");
  sock().receive({ type: "snapshot", epoch: "e1", seq: 1, state: { phase: "idle" } });
  sock().receive({ type: "pong", t: sock().sent.at(-1).t, serverTime: 1_000_000 });
  const id = link.send("start", { seconds: 5 });
  assert.deepEqual(sock().sent.at(-1), { op: "start", seconds: 5, id });
  assert.deepEqual(link.pendingOps(), new Set(["start"]));
  tick(8000);
  assert.ok(calls.some((c) => c[0] === "timeout" && c[1] === id && c[2] === "start"), JSON.stringify(calls));
  assert.deepEqual(link.pendingOps(), new Set());
});

test("a lost socket is retried with backoff and resumes from its seq; no-retry stops for good", (t) => {
  const { link, calls, sock, tick } = harness(t);
  link.connect();
  sock().open();
  sock().receive({ type: "snapshot", epoch: "e1", seq: 4, state: { phase: "idle" } });
  sock().end(1006, "", false);
  assert.equal(link.conn, "reconnecting");
  assert.deepEqual(calls.slice(-3), [["close"], ["lost"], ["conn", "reconnecting", "live", null]]);
  tick(500); // the first retry waits less than the backoff's base
  assert.equal(ScriptedSocket.made.length, 2);
  assert.equal(sock().url, "ws://h/ws/a?since=4");
  sock().end(CONTRACT.closeCodes.tryAgainLater, "", true);
  assert.deepEqual(calls.at(-1), ["conn", "reconnecting", "reconnecting", "full"]);
  tick(1000);
  sock().end(1000, CONTRACT.noRetryReason, true);
  assert.equal(link.conn, "closed");
  assert.deepEqual(calls.at(-1), ["conn", "closed", "reconnecting", "ended"]);
  const made = ScriptedSocket.made.length;
  tick(60_000);
  link.connect();
  link.reconnectNow();
  assert.equal(ScriptedSocket.made.length, made, "closed stays closed");
});

test("a socket that never sends its snapshot, or a ping never answered, is dropped and retried", (t) => {
  const { link, sock, tick } = harness(t);
  link.connect();
  sock().open();
  tick(10_000);
  assert.deepEqual(ScriptedSocket.made[0].closedWith, [4000, "client gave up"]);
  assert.equal(link.conn, "reconnecting");
  tick(1000);
  sock().open();
  sock().receive({ type: "snapshot", epoch: "e1", seq: 1, state: { phase: "idle" } });
  tick(5000); // the first ping's pong never comes
  assert.deepEqual(ScriptedSocket.made[1].closedWith, [4000, "client gave up"]);
  assert.equal(link.conn, "reconnecting");
});

test("a ping refused for the rate keeps the link, and is asked again once the bucket refills", (t) => {
  const { link, sock, tick } = harness(t);
  link.connect();
  sock().open();
  sock().receive({ type: "snapshot", epoch: "e1", seq: 1, state: { phase: "idle" } });
  const pings = () => sock().sent.filter((m) => m.op === "ping");
  assert.equal(pings().length, 1);
  sock().receive({ type: "error", code: "rate_limited" }); // a flood: the ping may be what was refused
  tick(999);
  assert.equal(pings().length, 1, "not asked again into a bucket still empty");
  tick(1);
  assert.equal(pings().length, 2, "asked again");
  tick(4999);
  sock().receive({ type: "error", code: "rate_limited" });
  tick(1000);
  assert.equal(sock().closedWith, null, "a link that answers, if only with rate_limited, is not dropped");
  assert.equal(link.conn, "live");
  assert.equal(pings().length, 3);
  sock().receive({ type: "pong", t: pings().at(-1).t, serverTime: 1_000_000 });
  assert.equal(link.samples.length, 1, "the asked-again ping's pong is a clock sample");
  tick(150);
  assert.equal(pings().length, 4, "and the burst goes on");
  tick(5000); // silence still means a dead link
  assert.deepEqual(sock().closedWith, [4000, "client gave up"]);
});

test("a new epoch drops the old server's state and clock, and says when it took a run with it", (t) => {
  const { link, calls, sock, tick } = harness(t);
  link.connect();
  sock().open();
  sock().receive({ type: "snapshot", epoch: "e1", seq: 7, serverTime: 1_000_000, state: running(1_005_000) });
  assert.equal(link.samples.length, 1);
  sock().end(1001, "", true);
  tick(1000);
  sock().open();
  sock().receive({ type: "snapshot", epoch: "e2", seq: 1, serverTime: 1_001_000, state: { phase: "idle" } });
  assert.deepEqual(calls.at(-1), ["message", "snapshot", true]);
  assert.equal(link.epoch, "e2");
  assert.equal(link.samples.length, 1, "only the new server's sample is left");
  assert.equal(link.anchor, null);
});

test("socket.js knows nothing of the page: no DOM, no address bar, no storage, no words", () => {
  const code = source("socket.js").replace(/\/\*[\s\S]*?\*\//g, "").replace(/\/\/.*$/gm, "");
  for (const name of ["document", "window", "location", "navigator", "sessionStorage", "localStorage", "STRINGS"]) {
    assert.doesNotMatch(code, new RegExp(`\\b${name}\\b`), name);
  }
  assert.deepEqual([...code.matchAll(/from\s*"\.\/([\w.]+)"/g)].map((m) => m[1]), ["logic.js"]);
});

test("while waiting the clock is the offset estimate alone, and a restart that took the wait says so", (t) => {
  const { link, calls, sock, tick } = harness(t);
  link.connect();
  sock().open();
  // This server's clock runs 7 s ahead of the page's (and the snapshot left at once).
  const waiting = { phase: "waiting", spinner: true, enabled: false, label: "Deploying", startedAt: 1_000_000, timeoutAt: null };
  sock().receive({ type: "snapshot", epoch: "e1", seq: 2, serverTime: 1_007_000, state: waiting });
  assert.equal(link.anchor, null, "no countdown, no anchor: nothing but the estimate moves the clock");
  assert.equal(link.serverNow(), 1_007_000);
  tick(65_000);
  assert.equal(link.serverNow(), 1_072_000);
  sock().end(1001, "", true);
  tick(1000);
  sock().open();
  sock().receive({ type: "snapshot", epoch: "e2", seq: 1, serverTime: 1_073_000, state: { phase: "idle" } });
  assert.deepEqual(calls.at(-1), ["message", "snapshot", true]);
});

test("in overtime each tick's label anchors the clock, and a patch without one keeps the anchor", (t) => {
  const { link, sock, tick } = harness(t);
  link.connect();
  sock().open();
  const overSince = 1_000_000;
  // The page's clock is 2 s behind the server's; its first sample (the snapshot) is all it has.
  sock().receive({ type: "snapshot", epoch: "e1", seq: 3, serverTime: overSince + 2000,
    state: { phase: "overtime", spinner: true, enabled: false, label: "+2", remaining: 0, overSince } });
  assert.deepEqual(link.anchor, { endsAt: overSince, remaining: -2, at: 1_000_000, sentAt: overSince + 2000 });
  tick(1000);
  sock().receive({ type: "patch", seq: 4, patch: { label: "+3" } });
  assert.equal(link.anchor.remaining, -3);
  assert.equal(Math.floor((link.serverNow() - overSince) / 1000), 3);
  sock().receive({ type: "patch", seq: 5, patch: { message: "Wrap up" } });
  assert.equal(link.anchor.remaining, -3, "a message is no tick");
  sock().receive({ type: "patch", seq: 6, patch: { phase: "finished", label: "Countdown finished", overSince: null } });
  assert.equal(link.anchor, null);
});
