// Countdown page: connects to one session and renders it.
//
// The server is the only source of truth. The button, spinner and label come
// from the snapshot plus the merge patches that follow it, never from what
// this page thinks should happen. The one thing drawn locally is *when* the
// number changes: the label is computed from the server's `endsAt` and an
// NTP-style estimate of the clock offset, so it turns on the second boundary
// even when a patch is late, and every patch that arrives is obeyed at once
// (see effectiveOffset in logic.js). Pure helpers live in logic.js, the
// words in i18n.js.

import {
  ADJUST_STEP,
  CONTRACT,
  SUBPROTOCOL,
  PRESET_MINUTES,
  SESSION_RE,
  addClockSample,
  authMessage,
  adjustEnds,
  backoffDelay,
  bestOffset,
  buttonView,
  clockSample,
  clockWidth,
  closeOutcome,
  controlOf,
  controlView,
  durationEcho,
  effectiveOffset,
  errorText,
  isAdjust,
  labelSize,
  labelText,
  labelWords,
  localDateTime,
  msUntilNextChange,
  parseDuration,
  parseFinishText,
  parseKey,
  parseKeyFragment,
  keyAddresses,
  keyStorageName,
  roleDuringAuth,
  parseSession,
  parseUntil,
  readRemembered,
  reduceMessage,
  rememberKey,
  sessionUrl,
  shareLinks,
  titleText,
  viewersText,
} from "./logic.js";
import { STRINGS, pickLang } from "./i18n.js";
import { whyRefused } from "./origin.js";

// connecting: the first attempt; live: this connection has its snapshot;
// reconnecting: lost, retrying with backoff; closed: the server said not to retry.
const CONN_STATES = ["connecting", "live", "reconnecting", "closed"];

const PRESS_TIMEOUT_MS = 8000; // a press with no ack/error by then is given up
const SNAPSHOT_TIMEOUT_MS = 10_000; // an open socket with no snapshot by then is dropped
const PONG_TIMEOUT_MS = 5000; // an unanswered ping means the link is dead
const PING_BURST = 5; // pings per burst on each new connection
const PING_GAP_MS = 150; // between the pings of a burst
const RESYNC_MS = 60_000; // a short burst this often keeps the offset fresh and the link checked
const COPIED_MS = 2000; // how long a Copy button says "Copied"
const UNTIL_SUGGEST_MS = 5 * 60_000; // "Until a time" starts out this far ahead, on a whole minute

const el = {
  root: document.documentElement,
  form: document.getElementById("controls"),
  start: document.getElementById("start"),
  startText: document.getElementById("start-text"),
  spinnerText: document.getElementById("spinner-text"),
  options: document.getElementById("options"),
  startFields: document.getElementById("start-fields"),
  mode: document.getElementById("mode"),
  runControls: document.getElementById("run-controls"),
  pause: document.getElementById("pause"),
  minus: document.getElementById("minus"),
  plus: document.getElementById("plus"),
  cancel: document.getElementById("cancel"),
  hostWait: document.getElementById("host-wait"),
  understood: document.getElementById("understood"),
  presets: document.getElementById("presets"),
  finishText: document.getElementById("finish-text"),
  confirm: document.getElementById("confirm"),
  confirmYes: document.getElementById("confirm-yes"),
  confirmNo: document.getElementById("confirm-no"),
  openSession: document.getElementById("open-session"),
  sessionName: document.getElementById("session-name"),
  shareController: document.getElementById("share-controller"),
  viewerQr: document.getElementById("viewer-qr"),
  controllerQr: document.getElementById("controller-qr"),
  rotate: document.getElementById("rotate"),
  rotateKey: document.getElementById("rotate-key"),
  rotateConfirm: document.getElementById("rotate-confirm"),
  rotateYes: document.getElementById("rotate-yes"),
  rotateNo: document.getElementById("rotate-no"),
  label: document.getElementById("label"),
  labelWords: document.getElementById("label-words"),
  seconds: document.getElementById("seconds"),
  until: document.getElementById("until"),
  session: document.getElementById("session"),
  viewers: document.getElementById("viewers"),
  status: document.getElementById("status"),
  viewOnly: document.getElementById("view-only"),
  viewOnlyDetail: document.getElementById("view-only-detail"),
  share: document.getElementById("share"),
  viewerLink: document.getElementById("viewer-link"),
  controllerLink: document.getElementById("controller-link"),
  shareStatus: document.getElementById("share-status"),
};

const lang = pickLang(location.search, navigator.languages?.length ? navigator.languages : [navigator.language]);
const t = STRINGS[lang];

/** The page's clock. Wall time, so it matches the server's epoch ms up to the offset. */
const now = () => Date.now();

// Everything render() reads.
const model = {
  conn: "connecting",
  session: "",
  epoch: null, // the server's epoch from the last snapshot
  seq: -Infinity,
  state: null, // exactly what the server has told us; null until the first snapshot
  anchor: null, // the last authoritative `remaining` while running (see effectiveOffset)
  samples: [], // recent clock samples (clockSample in logic.js)
  message: null, // {text, kind: "error"|"info"} shown in #status instead of the connection text
  closedText: null, // why we stopped retrying, when conn is "closed"
  // Who may press Start (see controlOf in logic.js). The key is a secret: it
  // goes into the first WebSocket message, this tab's sessionStorage and the
  // Share area's controller link, and nowhere else: never a URL the browser
  // sends, the address bar once read, or any log.
  role: null, // "open" | "controller" | "viewer" as shown; null until the first snapshot
  snapshotRole: null, // the role the last snapshot gave, shown once no auth is pending
  key: null, // the controller key this page holds: from #key= (or ?key=), storage, or the server
  offered: null, // the key the current socket presented in its auth
  authId: null, // the id of that auth while its answer is pending
  rotate: null, // "New controller link": {id} once sent, {} while it asks
  // What "End for everyone?" would send, while it asks: {op, fields, opener,
  // id}; `id` is set once Yes sent it.
  confirm: null,
};

// The control focus is owed to when it cannot take it yet (see placeFocus).
let focusGoal = null;
let lastPhase = null; // the phase the last render drew

let ws = null;
let snapshotted = false; // whether the current socket has delivered its snapshot
let connectStartedAt = 0;
let attempt = 0;
let retryTimer = 0;
let snapshotTimer = 0;
let tickTimer = 0;
let resyncTimer = 0;
let nextId = 1; // never reset, so a late reply from an old socket cannot match a new command

// Commands in flight: id -> {op, timer}. A pending start shows the spinner on
// this page until its ack or error, because pressing is a wait for the network.
const pending = new Map();

// The ping in flight (one at a time, so pongs never queue behind each other):
// {t, timer} or null, plus how many more the current burst wants.
let ping = null;
let pingsLeft = 0;
let pingGapTimer = 0;

// ---- Connection ------------------------------------------------------------

function setConn(conn) {
  if (model.conn !== conn) model.message = null; // old messages are stale once the link changes
  model.conn = conn;
  for (const c of CONN_STATES) el.root.classList.toggle(`state-${c}`, c === conn);
}

function connect() {
  if (ws || model.conn === "closed") return;
  clearTimeout(retryTimer);
  // Tell the server what we have. It may answer with only the missed patches;
  // today it always sends a fresh snapshot, which replaces everything anyway.
  const since = model.state && Number.isSafeInteger(model.seq) ? model.seq : null;
  let sock;
  try {
    sock = new WebSocket(sessionUrl(location, model.session, since), SUBPROTOCOL);
  } catch {
    scheduleReconnect();
    return;
  }
  ws = sock;
  snapshotted = false;
  connectStartedAt = now();
  // Handlers check `ws === sock` so a socket we have given up on cannot touch the model.
  sock.addEventListener("open", () => {
    if (ws !== sock) return;
    presentKey(sock);
    clearTimeout(snapshotTimer);
    snapshotTimer = setTimeout(() => {
      if (ws === sock && !snapshotted) dropSocket();
    }, SNAPSHOT_TIMEOUT_MS);
  });
  sock.addEventListener("message", (ev) => {
    if (ws === sock) onMessage(ev.data);
  });
  sock.addEventListener("close", (ev) => {
    if (ws === sock) onClose(ev);
  });
  // "error" is always followed by "close", which does the work.
}

/**
 * The key goes in the connection's first message, not its URL. Until the
 * answer, a "viewer" snapshot (the join's) does not change what is shown
 * (roleDuringAuth), so a controller's page never flickers to "View only".
 */
function presentKey(sock) {
  model.offered = model.key;
  const id = nextId++;
  const msg = authMessage(model.key, id);
  model.authId = msg ? id : null;
  if (!msg) return;
  sock.send(msg);
  const timer = setTimeout(() => {
    if (!settle(id)) return;
    authAnswered();
    render();
  }, PRESS_TIMEOUT_MS);
  pending.set(id, { op: "auth", timer });
}

/** The auth was answered (or given up on): show the role the server gave. */
function authAnswered() {
  model.authId = null;
  model.role = model.snapshotRole ?? model.role;
}

/** Keeps the key for this tab: a reload presents it again, the address bar never shows it. */
function keepKey(key) {
  model.key = key;
  try {
    sessionStorage.setItem(keyStorageName(model.session), key);
  } catch {
    // No storage: control lasts until a reload.
  }
}

/**
 * The key this page was opened with: a link's #key= (or an old link's
 * ?key=, moved to the fragment at once), else the one this tab kept. The
 * address bar then loses it (history.replaceState), so a projected window
 * does not show it.
 */
function takeKey() {
  const fromLink = parseKeyFragment(location.hash) ?? parseKey(location.search);
  const { moved, clean } = keyAddresses(location.href);
  try {
    if (moved) history.replaceState(history.state, "", moved);
    if (clean) history.replaceState(history.state, "", clean);
  } catch {
    // An address the browser will not take: the key stays visible, and works.
  }
  if (fromLink) {
    keepKey(fromLink);
    return;
  }
  try {
    model.key = parseKey(new URLSearchParams({ key: sessionStorage.getItem(keyStorageName(model.session)) ?? "" }));
  } catch {
    model.key = null;
  }
}

/** Forgets everything tied to the current socket: commands in flight, pings. */
function forgetSocket() {
  ws = null;
  model.authId = null; // the next socket presents the key again
  snapshotted = false;
  clearTimeout(snapshotTimer);
  clearTimeout(resyncTimer);
  clearTimeout(pingGapTimer);
  if (ping) clearTimeout(ping.timer);
  ping = null;
  pingsLeft = 0;
  // No reply can come on a new socket, so the spinner a press showed must go now.
  for (const p of pending.values()) clearTimeout(p.timer);
  pending.clear();
  if (model.confirm?.id != null) model.confirm = null; // its answer cannot come now
  if (model.rotate?.id != null) model.rotate = null;
}

/** Lets go of the current socket, closing it with `code` and `reason`. */
function closeSocket(code, reason) {
  const sock = ws;
  forgetSocket();
  try {
    sock?.close(code, reason);
  } catch {
    // already closing
  }
}

/** Gives up on a socket that looks dead (no snapshot, no pong, offline) and retries. */
function dropSocket() {
  closeSocket(4000, "client gave up");
  scheduleReconnect();
}

function onClose(ev) {
  // Only a page that was never live can be refused for its origin.
  if (!model.state) whyRefused(lang).then((text) => text && showRefusal(text));
  forgetSocket();
  const { retry, why } = closeOutcome(ev.code, ev.reason, ev.wasClean);
  if (!retry) {
    model.closedText = t[why];
    setConn("closed");
    render();
    return;
  }
  scheduleReconnect(why ? { kind: "error", text: t[why] } : null);
}

/** The server refuses this page's origin: say so until the link is live. */
function showRefusal(text) {
  if (model.conn === "live") return;
  model.message = { kind: "error", text };
  render();
}

// Stays "reconnecting" while retrying (rather than flickering back to
// "connecting" on each attempt) until a snapshot proves the link is live again.
// `message` says why the server let go, when it said so.
function scheduleReconnect(message = null) {
  setConn("reconnecting");
  if (message) model.message = message;
  render();
  clearTimeout(retryTimer);
  retryTimer = setTimeout(connect, backoffDelay(attempt++));
}

// A backoff timer can be seconds long; when the tab comes back to the front
// or the network returns, the user is looking now, so try now.
function reconnectNow() {
  if (ws || model.conn !== "reconnecting") return;
  attempt = 0;
  connect();
}

// ---- Messages ------------------------------------------------------------------

function onMessage(data) {
  let msg;
  try {
    msg = JSON.parse(data);
  } catch {
    return; // the server only sends JSON; ignore rather than die on a stray frame
  }
  const at = now();
  switch (msg?.type) {
    case "snapshot":
    case "patch":
      if (!onState(msg, at)) return;
      break;
    case "pong":
      onPong(msg, at);
      break;
    case "ack":
      if (!settle(msg.id)) return;
      if (msg.id === model.authId) authAnswered();
      else if (msg.id === model.rotate?.id) rotated(msg);
      break;
    case "error": {
      // Replies to this page's own commands are shown, and so are errors
      // about this connection itself, which carry no id (rate_limited, and
      // too_many_sessions just before a 1013 close). An id we no longer wait
      // for is not the user's business.
      if (msg.id != null && !settle(msg.id)) return;
      if (msg.id != null && msg.id === model.authId) {
        // The key was not accepted: the view-only note says so; not an error of a press.
        authAnswered();
        break;
      }
      if (msg.id != null && msg.id === model.rotate?.id) model.rotate = null;
      model.message = { kind: "error", text: errorText(msg, t) };
      break;
    }
    default:
      return; // unknown types are for newer pages; ignore
  }
  render();
}

function onState(msg, at) {
  const held = { epoch: model.epoch, seq: model.seq, state: model.state };
  const next = reduceMessage(held, msg, snapshotted);
  if (!next) return false;
  const first = msg.type === "snapshot" && !snapshotted;
  const lostRun = next.restarted && ["running", "paused"].includes(model.state?.phase);
  if (next.restarted) {
    // A new epoch: the sessions we knew are gone. Drop every trace of the old
    // server (its clock samples too) so nothing old is ever drawn again.
    model.samples = [];
    model.anchor = null;
  }
  model.epoch = next.epoch;
  model.seq = next.seq;
  model.state = next.state;
  if (msg.type === "snapshot") {
    applyControl(msg);
    // The server read its clock between our connect and this arrival: a
    // coarse clock sample, soon beaten by the pings' shorter round trips.
    if (first) model.samples = addClockSample(model.samples, clockSample(connectStartedAt, at, msg.serverTime));
    setAnchor(at, msg.serverTime);
  } else if (msg.patch && "remaining" in msg.patch) {
    setAnchor(at, null);
  } else if (model.state.phase !== "running") {
    model.anchor = null;
  }
  if (first) {
    snapshotted = true;
    attempt = 0; // reset only now: a server that accepts and drops must still back off
    clearTimeout(snapshotTimer);
    setConn("live");
    startPings(PING_BURST);
  }
  // Say so when the restart took a countdown with it; otherwise there is nothing to tell.
  if (lostRun) model.message = { kind: "info", text: t.restarted };
  el.root.dataset.epoch = model.epoch ?? "";
  el.root.dataset.phase = model.state.phase ?? "";
  return true;
}

/** Takes this connection's role (and the key, for a controller) from its snapshot. */
function applyControl(snapshot) {
  const { role, key } = controlOf(snapshot);
  model.snapshotRole = role;
  model.role = roleDuringAuth(model.role, role, model.authId !== null);
  // The first joiner gets a key it did not ask for (or a forgotten session
  // is begun anew with a new one): keep it so a reload keeps control.
  if (role === "controller" && key && key !== model.key) keepKey(key);
}

// ---- "New controller link" (rotate_key) ---------------------------------------
// Cuts off everyone else who holds the controller link, so it asks first,
// with No focused, like ending a run.

function askToRotate() {
  model.rotate = {};
  render();
  el.rotateNo.focus();
}

function onRotateYes() {
  if (!model.rotate || model.rotate.id != null) return;
  const id = send("rotate_key");
  model.rotate = id === null ? null : { id };
  render();
}

function closeRotate() {
  model.rotate = null;
  render();
  el.rotateKey.focus();
}

function rotated(ack) {
  const focusWasIn = el.rotate.contains(document.activeElement);
  model.rotate = null;
  if (typeof ack.key === "string" && parseKey(new URLSearchParams({ key: ack.key }))) {
    keepKey(ack.key);
    model.offered = ack.key; // this connection holds the new key now
    el.shareStatus.textContent = "";
    setText(el.shareStatus, t.newKeyDone);
  }
  render();
  if (focusWasIn) el.rotateKey.focus();
}

function setAnchor(at, sentAt) {
  const s = model.state;
  model.anchor =
    s.phase === "running" && Number.isFinite(s.endsAt) && Number.isFinite(s.remaining)
      ? { endsAt: s.endsAt, remaining: s.remaining, at, sentAt }
      : null;
}

/** Ends the wait for command `id`; returns whether this page was waiting for it. */
function settle(id) {
  const p = pending.get(id);
  if (!p) return false;
  clearTimeout(p.timer);
  pending.delete(id);
  // "End for everyone?" was answered: close it (a run that ended closes it anyway).
  if (model.confirm?.id === id) model.confirm = null;
  return true;
}

/** Sends a command with a fresh id; returns the id, or null if not connected. */
function send(op, fields = {}) {
  if (!ws || ws.readyState !== WebSocket.OPEN || model.conn !== "live") {
    model.message = { kind: "error", text: t.notConnected };
    return null;
  }
  const id = nextId++;
  ws.send(JSON.stringify({ op, ...fields, id }));
  const timer = setTimeout(() => {
    if (!settle(id)) return;
    model.message = { kind: "error", text: t.noAnswer };
    render();
  }, PRESS_TIMEOUT_MS);
  pending.set(id, { op, timer });
  return id;
}

// ---- Clock offset -----------------------------------------------------------------

function startPings(count) {
  pingsLeft = Math.max(pingsLeft, count);
  if (!ping) sendPing();
  clearTimeout(resyncTimer);
  resyncTimer = setTimeout(() => startPings(3), RESYNC_MS);
}

function sendPing() {
  clearTimeout(pingGapTimer);
  if (!ws || ws.readyState !== WebSocket.OPEN || pingsLeft <= 0) return;
  pingsLeft -= 1;
  const t0 = now();
  ws.send(JSON.stringify({ op: "ping", t: t0 }));
  // The server answers pings at once; silence means a dead link that TCP has
  // not noticed yet (a sleeping laptop, a dropped Wi-Fi).
  ping = { t: t0, timer: setTimeout(dropSocket, PONG_TIMEOUT_MS) };
}

function onPong(msg, at) {
  if (!ping || msg.t !== ping.t) return;
  clearTimeout(ping.timer);
  ping = null;
  model.samples = addClockSample(model.samples, clockSample(msg.t, at, msg.serverTime));
  if (pingsLeft > 0) pingGapTimer = setTimeout(sendPing, PING_GAP_MS);
}

/** The server's time now, as best we know it. */
function serverNow() {
  return now() + effectiveOffset(bestOffset(model.samples), model.anchor);
}

// ---- User actions ------------------------------------------------------------

function onStart(ev) {
  ev.preventDefault(); // the form exists so Enter in a field starts
  if (inert(el.start)) return;
  if (view().op === "resume") {
    command("resume");
    return;
  }
  const byUntil = el.mode.value === "until";
  const input = byUntil ? el.until : el.seconds;
  let fields;
  let problem = null;
  if (byUntil) {
    const parsed = parseUntil(el.until.value, serverNow());
    if (parsed.ok) fields = { until: parsed.until };
    else problem = t.badUntil[parsed.why];
  } else {
    const parsed = parseDuration(el.seconds.value);
    if (parsed.ok) fields = { seconds: parsed.seconds };
    else problem = t.badDuration;
  }
  if (problem) return refuse(input, problem);
  input.removeAttribute("aria-invalid");
  // Without a finish text each viewer shows the default in its own
  // language; one typed here is shown to everyone as is.
  const finish = parseFinishText(el.finishText.value);
  if (!finish.ok) return refuse(el.finishText, t.badFinish[finish.why]);
  el.finishText.removeAttribute("aria-invalid");
  if (finish.label !== null) fields.finishedLabel = finish.label;
  remember();
  command("start", fields);
}

function refuse(input, problem) {
  input.setAttribute("aria-invalid", "true");
  model.message = { kind: "error", text: problem };
  render();
  input.focus();
}

// The last values a host started with, per session, so a reload or the
// next run of the same show starts from them.
function remember() {
  try {
    localStorage.setItem(
      rememberKey(model.session),
      JSON.stringify({ mode: el.mode.value, duration: el.seconds.value, finish: el.finishText.value }),
    );
  } catch {
    // Storage refused (private mode, full): nothing to remember with.
  }
}

function recall() {
  let saved = null;
  try {
    saved = readRemembered(localStorage.getItem(rememberKey(model.session)));
  } catch {
    saved = null;
  }
  if (!saved) return;
  if (saved.duration) el.seconds.value = saved.duration;
  el.finishText.value = saved.finish;
  if (saved.mode === "until") {
    el.mode.value = "until";
    onMode();
  }
}

/** A press: clears the last message, sends, and shows the wait. Returns the command's id. */
function command(op, fields = {}) {
  // A second press while the first awaits its answer is the same wish, not a new one.
  if (op !== "adjust" && pendingOps().has(op)) return null;
  model.message = null;
  const id = send(op, fields);
  render();
  return id;
}

function onAdjust(seconds, opener) {
  if (!isAdjust(seconds)) return;
  if (adjustEnds(model.state, seconds, serverNow())) askToEnd("adjust", { seconds }, opener);
  else command("adjust", { seconds });
}

// ---- "End for everyone?" -------------------------------------------------------
// Cancel, and a −1 min that leaves nothing, end the run for every viewer, so
// they ask first, in the run controls' place, with No focused: a key pressed
// twice, or held, then answers No. (Why not Undo: see the README.)

function askToEnd(op, fields, opener) {
  model.confirm = { op, fields, opener, id: null };
  render();
  el.confirmNo.focus();
}

function onConfirmYes() {
  const c = model.confirm;
  if (!c || c.id !== null) return;
  c.id = command(c.op, c.fields);
  if (c.id === null) closeConfirm(false); // not sent: the message says why
}

/** Closes the question; `back` puts the focus on the control that asked it. */
function closeConfirm(back) {
  const c = model.confirm;
  if (!c) return;
  model.confirm = null;
  render();
  if (back && c.opener && !gone(c.opener)) c.opener.focus();
}

// Presets fill the field; Start (or Enter) still starts, so a preset
// pressed by mistake changes nothing for the viewers.
function buildPresets() {
  for (const minutes of PRESET_MINUTES) {
    const b = document.createElement("button");
    b.type = "button";
    b.className = "small preset";
    b.dataset.minutes = String(minutes);
    b.textContent = t.presetMinutes(minutes);
    b.setAttribute("aria-label", t.presetLabel(minutes));
    b.addEventListener("click", () => {
      if (el.mode.value !== "seconds") {
        el.mode.value = "seconds";
        onMode();
      }
      el.seconds.value = `${minutes}:00`;
      el.seconds.removeAttribute("aria-invalid");
      render();
    });
    el.presets.append(b);
  }
}

function onOpenSession(ev) {
  ev.preventDefault();
  const name = el.sessionName.value.trim();
  if (!SESSION_RE.test(name)) {
    el.sessionName.setAttribute("aria-invalid", "true");
    model.message = { kind: "error", text: t.badSession(name) };
    render();
    return;
  }
  const u = new URL(location.href);
  u.search = "";
  u.hash = "";
  u.searchParams.set("session", name);
  const langParam = new URLSearchParams(location.search).get("lang");
  if (langParam) u.searchParams.set("lang", langParam);
  location.assign(u.href);
}

// The until field offers a time a few minutes ahead rather than an empty
// box, which a datetime-local input makes slow to fill in.
function onMode() {
  const byUntil = el.mode.value === "until";
  if (byUntil && !el.until.value) {
    const ahead = serverNow() + UNTIL_SUGGEST_MS;
    el.until.value = localDateTime(Math.ceil(ahead / 60_000) * 60_000);
  }
  model.message = null;
  render();
}

// Copy buttons: the Clipboard API where the page may use it (a secure
// context, such as https:// or localhost); otherwise the link is selected and
// copied the old way, or left selected for the user to copy.
const copyTimers = new Map();

async function onCopy(button) {
  const input = document.getElementById(button.dataset.copy);
  const text = input?.value;
  if (!text) return;
  let copied = false;
  if (window.isSecureContext && navigator.clipboard?.writeText) {
    try {
      await navigator.clipboard.writeText(text);
      copied = true;
    } catch {
      // Refused (no permission, document not focused): fall back below.
    }
  }
  if (!copied) {
    input.focus();
    input.select();
    try {
      copied = document.execCommand("copy");
    } catch {
      copied = false;
    }
  }
  showCopied(button, copied);
}

function showCopied(button, copied) {
  clearTimeout(copyTimers.get(button));
  el.shareStatus.textContent = ""; // so the same words are announced again
  if (copied) setText(button, t.copied);
  setText(el.shareStatus, copied ? t.copied : t.copyManually);
  copyTimers.set(
    button,
    setTimeout(() => {
      setText(button, t.copy);
      if (el.shareStatus.textContent === t.copied) setText(el.shareStatus, "");
    }, COPIED_MS),
  );
}

function selectAll(ev) {
  ev.currentTarget.select();
}

// ---- View ----------------------------------------------------------------------

function setText(node, text) {
  // Skip no-op writes: re-setting identical text can make screen readers
  // re-announce a live region.
  if (node.textContent !== text) node.textContent = text;
}

function statusText() {
  if (model.message) return model.message.text;
  if (model.conn === "closed") return model.closedText ?? t.closed;
  // Cluster mode: the server cannot confirm this state with Redis.
  if (model.conn === "live" && model.state?.stale) return t.stale;
  return t[model.conn];
}

function pendingOps() {
  return new Set([...pending.values()].map((p) => p.op));
}

/** The big button and the run's controls (buttonView in logic.js). */
function view() {
  return buttonView(model.state, { role: model.role, live: model.conn === "live", pending: pendingOps() });
}

/** Whether a control takes no presses now (disabled, or aria-disabled while it waits). */
function inert(node) {
  return node.disabled || node.getAttribute("aria-disabled") === "true";
}

function setInert(node, value) {
  if (value) node.setAttribute("aria-disabled", "true");
  else node.removeAttribute("aria-disabled");
}

function gone(node) {
  return node.disabled || node.hidden || Boolean(node.closest("[hidden]"));
}

/**
 * Where the keyboard focus goes when the phase changes under it, or the
 * control holding it goes away. The rule: never onto a control that ends the
 * run (Cancel, −1 min); the big button and Pause, the two that take turns,
 * hand it to each other; while a press awaits its answer nothing moves (the
 * pressed control stays focusable, only aria-disabled).
 */
function focusTarget(phase) {
  if (model.confirm) return el.confirmNo;
  if (phase === "running") return el.pause;
  if (phase === "paused") return el.start;
  return el.mode.value === "until" ? el.until : el.seconds;
}

function placeFocus(focused, before, after) {
  const onBody = !focused || focused === document.body;
  const inForm = !onBody && el.form.contains(focused);
  let target = null;
  const turnTaker = focused === el.start || focused === el.pause || el.startFields.contains(focused);
  if (inForm && before !== after && turnTaker) target = focusTarget(after);
  else if (inForm && gone(focused)) target = focusTarget(after);
  else if (onBody && focusGoal) target = focusGoal;
  if (!target || target === focused) return;
  if (gone(target)) {
    focusGoal = target; // e.g. Resume while the link is down: given once it is back
    return;
  }
  focusGoal = null;
  target.focus();
}

function render() {
  const s = model.state;
  const live = model.conn === "live";
  const ops = pendingOps();
  const v = view();
  const focused = document.activeElement;
  const before = lastPhase;
  lastPhase = s?.phase ?? null;
  if (model.confirm && !["running", "paused"].includes(s?.phase)) model.confirm = null; // the run ended anyway

  if (v.busy) el.start.setAttribute("aria-busy", "true");
  else el.start.removeAttribute("aria-busy");
  // A controller's button keeps the focus through its waits: aria-disabled,
  // not disabled. A viewer's never takes presses at all.
  const watcher = model.role === "viewer" || model.role === null;
  el.start.disabled = watcher && v.disabled;
  setInert(el.start, !watcher && v.disabled);
  el.start.hidden = v.hostWait;
  el.hostWait.hidden = !v.hostWait;
  setText(el.startText, t[v.text]);
  setText(el.spinnerText, v.waiting ? t.waiting : t.busy);

  // What to start with and the run's controls take turns in one area.
  const byUntil = el.mode.value === "until";
  el.startFields.hidden = v.run;
  el.seconds.hidden = byUntil;
  el.until.hidden = !byUntil;
  el.understood.hidden = byUntil;
  setText(el.understood, byUntil ? "" : durationEcho(el.seconds.value, t));
  // Read-only rather than disabled while a start waits, so the focus stays.
  for (const input of [el.seconds, el.until, el.finishText]) input.readOnly = v.busy;
  el.runControls.hidden = !v.run || Boolean(model.confirm);
  el.confirm.hidden = !v.run || !model.confirm;
  el.pause.hidden = !v.pause;
  setInert(el.pause, !live || ops.has("pause"));
  for (const b of [el.minus, el.plus]) setInert(b, !live);
  setInert(el.cancel, !live || ops.has("cancel"));
  const asked = model.confirm?.id != null;
  setInert(el.confirmYes, !live || asked);
  setInert(el.confirmNo, asked);

  const sNow = serverNow();
  const label = labelText(s, sNow, t);
  setText(el.label, label);
  setText(el.labelWords, s ? labelWords(s, sNow, t) : label);
  el.label.dataset.size = labelSize(label);
  const width = clockWidth(s, sNow);
  if (width === null) delete el.label.dataset.clock;
  else el.label.dataset.clock = String(width);
  const title = titleText(s, sNow, model.session, t);
  if (document.title !== title) document.title = title;

  setText(el.session, model.session);
  if (el.session.title !== model.session) el.session.title = model.session;
  // A count from a link that is down is one this page cannot vouch for.
  setText(el.viewers, s ? viewersText(s.viewers, t, live) : "");
  el.viewers.classList.toggle("last-known", !live);

  renderControl(v);

  setText(el.status, statusText());
  if (model.message?.kind === "error" || model.conn === "closed" || (model.conn === "live" && s?.stale)) {
    el.status.dataset.kind = "error";
  } else delete el.status.dataset.kind;

  placeFocus(focused, before, lastPhase);

  // Redraw exactly when the number next changes. Timers in a background tab
  // may fire late; visibilitychange redraws at once when it is shown again.
  clearTimeout(tickTimer);
  const delay = msUntilNextChange(s, sNow);
  if (delay !== null) tickTimer = setTimeout(render, delay);
}

/** Controls or "View only", the Share area and the session field, from the role the server gave. */
function renderControl(v) {
  const view = controlView(model.role, model.key, model.offered);
  el.root.dataset.role = model.role ?? "";
  el.options.hidden = !view.controls;
  el.viewOnly.hidden = !view.viewOnly;
  setText(el.viewOnlyDetail, view.keyRejected ? t.keyRejected : t.viewOnlyDetail);
  el.share.hidden = !view.share;
  el.shareController.hidden = !view.controllerLink;
  // The key stays out of the DOM unless this page may hand it out.
  const links = view.share ? shareLinks(location, model.session, view.controllerLink ? model.key : null) : {};
  for (const [input, value] of [[el.viewerLink, links.viewer], [el.controllerLink, links.controller]]) {
    if (input.value !== (value ?? "")) input.value = value ?? "";
  }
  el.rotate.hidden = !view.controllerLink;
  el.rotateKey.hidden = Boolean(model.rotate);
  el.rotateConfirm.hidden = !model.rotate;
  setInert(el.rotateYes, model.rotate?.id != null || model.conn !== "live");
  setInert(el.rotateNo, model.rotate?.id != null);
  // QR codes are fetched only once someone opens what shows them.
  showQr(el.viewerQr, el.share.open ? links.viewer : null);
  showQr(el.controllerQr, el.share.open && el.shareController.open ? links.controller : null);

  // Open mode, nothing running: the session's name becomes a field.
  const picking = model.role === "open" && !v.run;
  el.openSession.hidden = !picking;
  el.session.hidden = picking;
  document.getElementById("session-word").classList.toggle("picking", picking);
  if (picking && document.activeElement !== el.sessionName && !el.sessionName.value) {
    el.sessionName.value = model.session;
  }
}

function showQr(img, link) {
  // A link longer than the server draws (a very long host name) gets no code, not a broken image.
  const drawable = Boolean(link) && new TextEncoder().encode(link).length <= CONTRACT.qrTextMaxBytes;
  img.hidden = !drawable;
  if (!drawable) return;
  const src = `qr.svg?text=${encodeURIComponent(link)}`;
  if (img.getAttribute("src") !== src) img.setAttribute("src", src);
}

function applyStrings() {
  el.root.lang = lang;
  document.title = t.title;
  for (const node of document.querySelectorAll("[data-i18n]")) {
    const text = t[node.dataset.i18n];
    if (typeof text === "string") node.textContent = text;
  }
  for (const [attr, name] of [["i18nLabel", "aria-label"], ["i18nPlaceholder", "placeholder"], ["i18nAlt", "alt"]]) {
    for (const node of document.querySelectorAll(`[data-${attr.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)}]`)) {
      const text = t[node.dataset[attr]];
      if (typeof text === "string") node.setAttribute(name, text);
    }
  }
  // The form checks against the contract, not against numbers of its own.
  el.finishText.maxLength = CONTRACT.finishedLabelMaxLength;
}

// ---- Boot ------------------------------------------------------------------------

function main() {
  applyStrings();
  el.form.addEventListener("submit", onStart);
  const onPress = (node, fn) => node.addEventListener("click", () => inert(node) || fn());
  onPress(el.cancel, () => askToEnd("cancel", {}, el.cancel));
  onPress(el.pause, () => command("pause"));
  onPress(el.minus, () => onAdjust(-ADJUST_STEP, el.minus));
  onPress(el.plus, () => onAdjust(ADJUST_STEP, el.plus));
  onPress(el.confirmYes, onConfirmYes);
  onPress(el.confirmNo, () => closeConfirm(true));
  onPress(el.rotateKey, askToRotate);
  onPress(el.rotateYes, onRotateYes);
  onPress(el.rotateNo, closeRotate);
  el.rotateConfirm.addEventListener("keydown", (ev) => {
    if (ev.key === "Escape" && model.rotate?.id == null) closeRotate();
  });
  el.confirm.addEventListener("keydown", (ev) => {
    if (ev.key === "Escape" && model.confirm?.id === null) closeConfirm(true);
  });
  // A held key repeats: a repeat is never a second press (Space acts on its
  // one keyup anyway; Enter would act on every repeat).
  document.addEventListener(
    "keydown",
    (ev) => {
      if (ev.repeat && (ev.key === "Enter" || ev.key === " ")) ev.preventDefault();
    },
    true,
  );
  document.addEventListener("focusin", (ev) => {
    if (ev.target !== focusGoal) focusGoal = null; // the user chose where to be
  });
  el.mode.addEventListener("change", onMode);
  for (const input of [el.seconds, el.until, el.finishText, el.sessionName]) {
    input.addEventListener("input", () => {
      input.removeAttribute("aria-invalid");
      if (input === el.seconds) setText(el.understood, durationEcho(el.seconds.value, t));
    });
  }
  buildPresets();
  el.openSession.addEventListener("submit", onOpenSession);
  el.shareController.addEventListener("toggle", () => {
    render();
    // It opens at the panel's foot: bring that into view.
    if (!el.shareController.open) return;
    const still = matchMedia("(prefers-reduced-motion: reduce)").matches;
    el.share.scrollIntoView({ block: "end", behavior: still ? "auto" : "smooth" });
  });
  for (const button of el.share.querySelectorAll("button[data-copy]")) {
    button.addEventListener("click", () => onCopy(button));
  }
  // The page fills the screen, so an opened Share area starts below the fold:
  // bring it into view.
  el.share.addEventListener("toggle", () => {
    render(); // the QR codes load when shown
    if (!el.share.open) return;
    const still = matchMedia("(prefers-reduced-motion: reduce)").matches;
    el.share.scrollIntoView({ block: "nearest", behavior: still ? "auto" : "smooth" });
  });
  for (const input of [el.viewerLink, el.controllerLink]) {
    input.addEventListener("focus", selectAll);
    input.addEventListener("click", selectAll);
  }
  document.addEventListener("visibilitychange", () => {
    if (document.visibilityState !== "visible") return;
    render(); // throttled timers may have left the label behind: redraw from endsAt now
    reconnectNow();
    if (model.conn === "live") startPings(3); // the machine may have slept: re-measure
  });
  window.addEventListener("online", reconnectNow);
  // A controller link pasted into a tab already on this session changes only
  // the fragment, which reloads nothing: take its key and present it anew.
  window.addEventListener("hashchange", () => {
    if (!parseKeyFragment(location.hash)) return;
    takeKey();
    closeSocket(1000, "new key");
    connect();
  });
  // The socket may take minutes to notice a dead network; the browser knows now.
  window.addEventListener("offline", () => {
    if (ws) dropSocket();
  });

  const parsed = parseSession(location.search);
  if (!parsed.ok) {
    // The server would refuse it anyway; say why instead of retrying forever.
    model.session = parsed.raw;
    model.closedText = t.badSession(parsed.raw);
    setConn("closed");
    render();
    return;
  }
  model.session = parsed.session;
  takeKey();
  recall();
  render();
  connect();
}

main();
