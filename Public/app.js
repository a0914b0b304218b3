// Countdown page: connects to one session and renders it.
//
// The server is the only source of truth: the button, spinner and label are
// drawn from the snapshot plus the merge patches that follow it, never from
// what this page thinks should happen. Pure helpers live in logic.js.

import {
  SUBPROTOCOL,
  STRINGS,
  applyMergePatch,
  backoffDelay,
  errorText,
  labelSize,
  labelText,
  normalizeState,
  parseSeconds,
  parseSession,
  pickLang,
  sessionUrl,
  shouldReconnect,
  viewersText,
} from "./logic.js";

const CONN_STATES = ["connecting", "live", "lost"];

const el = {
  root: document.documentElement,
  form: document.getElementById("controls"),
  start: document.getElementById("start"),
  cancel: document.getElementById("cancel"),
  label: document.getElementById("label"),
  seconds: document.getElementById("seconds"),
  session: document.getElementById("session"),
  viewers: document.getElementById("viewers"),
  status: document.getElementById("status"),
};

const lang = pickLang(location.search, navigator.languages?.length ? navigator.languages : [navigator.language]);
const t = STRINGS[lang];

// Everything render() reads. `state` is exactly what the server has told us.
const model = {
  conn: "connecting", // connecting (first attempt) | live (have a fresh snapshot) | lost
  session: "",
  state: null, // null until the first snapshot
  seq: -Infinity,
  message: null, // {text, kind} shown in #status instead of the connection text
  refused: false, // no reconnecting: bad session id or the server said 1008
};

let ws = null;
let attempt = 0;
let retryTimer = 0;
let nextId = 1; // never reset, so a late ack from an old socket cannot match a new command
// Command id -> op until its ack or error arrives: the hook for showing a
// "waiting for the server" state on the page that pressed.
const pending = new Map();

// ---- Connection ------------------------------------------------------------

function setConn(conn) {
  if (model.conn !== conn) model.message = null; // old errors are stale once the link changes
  model.conn = conn;
  for (const c of CONN_STATES) el.root.classList.toggle(`state-${c}`, c === conn);
}

function connect() {
  if (ws || model.refused) return;
  clearTimeout(retryTimer);
  let sock;
  try {
    sock = new WebSocket(sessionUrl(location, model.session), SUBPROTOCOL);
  } catch {
    scheduleReconnect();
    return;
  }
  ws = sock;
  // Handlers check `ws === sock` so a socket we have given up on cannot
  // touch the model.
  sock.addEventListener("message", (ev) => {
    if (ws === sock) onMessage(ev.data);
  });
  sock.addEventListener("close", (ev) => {
    if (ws === sock) onClose(ev);
  });
  // "error" is always followed by "close", which does the work.
}

function onClose(ev) {
  ws = null;
  pending.clear();
  if (!shouldReconnect(ev.code)) {
    model.refused = true;
    setConn("lost");
    render();
    return;
  }
  scheduleReconnect();
}

// Stays "lost" while retrying (rather than flickering back to "connecting"
// on each attempt) until a snapshot proves the link is live again.
function scheduleReconnect() {
  setConn("lost");
  render();
  clearTimeout(retryTimer);
  retryTimer = setTimeout(connect, backoffDelay(attempt++));
}

// A backoff timer can be seconds long; when the tab comes back to the front
// or the network returns, the user is looking now, so try now.
function reconnectNow() {
  if (ws || model.refused || model.conn !== "lost") return;
  attempt = 0;
  connect();
}

function onMessage(data) {
  let msg;
  try {
    msg = JSON.parse(data);
  } catch {
    return; // the server only sends JSON; ignore rather than die on a stray frame
  }
  switch (msg?.type) {
    case "snapshot":
      // A snapshot may also arrive mid-connection: it replaces state wholesale.
      model.state = normalizeState(msg.state);
      model.seq = typeof msg.seq === "number" ? msg.seq : -Infinity;
      if (typeof msg.session === "string") model.session = msg.session;
      attempt = 0; // reset only now: a server that accepts and drops must still back off
      setConn("live");
      break;
    case "patch":
      if (!model.state) return;
      // seq may jump (merged patches) but never goes back; drop anything stale.
      if (typeof msg.seq === "number" && msg.seq <= model.seq) return;
      model.state = normalizeState(applyMergePatch(model.state, msg.patch));
      if (typeof msg.seq === "number") model.seq = msg.seq;
      break;
    case "ack":
      pending.delete(msg.id);
      if (model.message?.kind === "error") model.message = null;
      break;
    case "error":
      pending.delete(msg.id);
      model.message = { kind: "error", text: errorText(msg, t) };
      break;
    default:
      return; // unknown types are for newer pages; ignore
  }
  render();
}

/** Sends a command with a fresh id; returns the id, or null if not connected. */
function send(op, fields = {}) {
  if (!ws || ws.readyState !== WebSocket.OPEN || model.conn !== "live") {
    model.message = { kind: "error", text: t.notConnected };
    render();
    return null;
  }
  const id = nextId++;
  ws.send(JSON.stringify({ op, ...fields, id }));
  pending.set(id, op);
  return id;
}

// ---- User actions ------------------------------------------------------------

function onStart(ev) {
  ev.preventDefault(); // the form exists so Enter in the seconds field starts
  if (el.start.disabled) return;
  const seconds = parseSeconds(el.seconds.value);
  if (seconds === null) {
    el.seconds.setAttribute("aria-invalid", "true");
    model.message = { kind: "error", text: t.badSeconds };
    render();
    el.seconds.focus();
    return;
  }
  el.seconds.removeAttribute("aria-invalid");
  model.message = null;
  send("start", { seconds });
  render();
}

function onCancel() {
  model.message = null;
  send("cancel");
  render();
}

// ---- View ----------------------------------------------------------------------

function setText(node, text) {
  // Skip no-op writes: re-setting identical text can make screen readers
  // re-announce a live region.
  if (node.textContent !== text) node.textContent = text;
}

function statusText() {
  if (model.message) return model.message.text;
  if (model.refused) return t.refused;
  return t[model.conn];
}

function render() {
  const s = model.state;
  const live = model.conn === "live";
  const busy = Boolean(s?.spinner);
  const running = s?.phase === "running";
  const focused = document.activeElement;

  if (busy) el.start.setAttribute("aria-busy", "true");
  else el.start.removeAttribute("aria-busy");
  el.start.disabled = busy || !s?.enabled || !live;

  el.cancel.hidden = !running;
  el.cancel.disabled = !live;

  // Disabling or hiding the focused control drops focus to <body>; hand it to
  // the control that now does the job so keyboard users keep their place.
  if (focused === el.start && el.start.disabled && !el.cancel.hidden) el.cancel.focus();
  else if (focused === el.cancel && el.cancel.hidden && !el.start.disabled) el.start.focus();

  const label = s ? labelText(s) : "—";
  setText(el.label, label);
  el.label.dataset.size = labelSize(label);

  setText(el.session, model.session);
  setText(el.viewers, s ? viewersText(s.viewers, t) : "");

  setText(el.status, statusText());
  if (model.message?.kind === "error" || model.refused) el.status.dataset.kind = "error";
  else delete el.status.dataset.kind;
}

function applyStrings() {
  el.root.lang = lang;
  document.title = t.title;
  for (const node of document.querySelectorAll("[data-i18n]")) {
    const text = t[node.dataset.i18n];
    if (typeof text === "string") node.textContent = text;
  }
}

// ---- Boot ------------------------------------------------------------------------

function main() {
  applyStrings();
  el.form.addEventListener("submit", onStart);
  el.cancel.addEventListener("click", onCancel);
  el.seconds.addEventListener("input", () => el.seconds.removeAttribute("aria-invalid"));
  document.addEventListener("visibilitychange", () => {
    if (document.visibilityState === "visible") reconnectNow();
  });
  window.addEventListener("online", reconnectNow);

  const parsed = parseSession(location.search);
  if (!parsed.ok) {
    // The server would refuse it anyway; say why instead of retrying forever.
    model.session = parsed.raw;
    model.refused = true;
    setConn("lost");
    model.message = { kind: "error", text: t.badSession(parsed.raw) };
    render();
    return;
  }
  model.session = parsed.session;
  render();
  connect();
}

main();
