// Countdown page: renders one session and takes the host's presses.
//
// The server is the only source of truth. The button, spinner and label come
// from the snapshot plus the merge patches that follow it, never from what
// this page thinks should happen. The one thing drawn locally is *when* the
// number changes: the label is computed from the server's `endsAt` and an
// NTP-style estimate of the clock offset, so it turns on the second boundary
// even when a patch is late, and every patch that arrives is obeyed at once
// (see effectiveOffset in logic.js).
//
// The connection is socket.js's (it knows nothing of the DOM), the pure rules
// logic.js's, the words i18n.js's. Everything the page holds that changes is
// in `page` below.

import {
  ADJUST_STEP,
  CONTRACT,
  OVERTIME_PHASE,
  PRESET_MINUTES,
  SESSION_RE,
  WAITING_PHASE,
  adjustEnds,
  buttonView,
  clockWidth,
  confirmHolds,
  confirmWords,
  controlOf,
  controlView,
  durationEcho,
  elapsedText,
  errorText,
  isAdjust,
  labelSize,
  labelText,
  labelWords,
  localDateTime,
  msUntilNextChange,
  outcomeBadge,
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
  rememberKey,
  sessionUrl,
  shareLinks,
  titleText,
  viewersText,
} from "./logic.js";
import { STRINGS, pickLang } from "./i18n.js";
import { whyRefused } from "./origin.js";
import { CONN_STATES, SessionSocket } from "./socket.js";
import { bringIntoView, gone, inert, setInert, setText } from "./dom.js";
import { showLinks, showQr, wireCopy } from "./share.js";
import { msUntilNextMinute, parseView, reachedZero, timeOfDay } from "./views.js";
import { Chime } from "./chime.js";
import {
  blackoutView,
  levelCue,
  levelOf,
  messageLength,
  parseLevelTimes,
  parseMessage,
  shownMessage,
  startOptions,
} from "./stage.js";

const UNTIL_SUGGEST_MS = 5 * 60_000; // "Until a time" starts out this far ahead, on a whole minute
const FLASH_MS = 1100; // data-flash stays this long: the CSS animation's second, and a margin

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
  stop: document.getElementById("stop"),
  cancel: document.getElementById("cancel"),
  done: document.getElementById("done"),
  fail: document.getElementById("fail"),
  hostWait: document.getElementById("host-wait"),
  understood: document.getElementById("understood"),
  presets: document.getElementById("presets"),
  finishText: document.getElementById("finish-text"),
  confirm: document.getElementById("confirm"),
  confirmText: document.getElementById("confirm-text"),
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
  labelText: document.getElementById("label-text"),
  elapsed: document.getElementById("elapsed"),
  outcome: document.getElementById("outcome"),
  labelWords: document.getElementById("label-words"),
  presenterLine: document.getElementById("presenter-line"),
  timeOfDay: document.getElementById("time-of-day"),
  chime: document.getElementById("chime"),
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
  message: document.getElementById("message"),
  announce: document.getElementById("announce"),
  blackoutOn: document.getElementById("blackout-on"),
  blankedNote: document.getElementById("blanked-note"),
  stage: document.getElementById("stage"),
  messageForm: document.getElementById("message-form"),
  messageText: document.getElementById("message-text"),
  messageClear: document.getElementById("message-clear"),
  messageCount: document.getElementById("message-count"),
  blackout: document.getElementById("blackout"),
  overtime: document.getElementById("overtime"),
  warnAt: document.getElementById("warn-at"),
  dangerAt: document.getElementById("danger-at"),
};

const lang = pickLang(location.search, navigator.languages?.length ? navigator.languages : [navigator.language]);
const t = STRINGS[lang];

// Everything the page holds that changes, in one place: the connection (with
// the session's state as the server told it, and the clock), and what this
// page shows of it. render() draws from this and the form's own fields.
const page = {
  link: new SessionSocket({
    url: (since) => sessionUrl(location, page.session, since),
    on: {
      open: presentKey,
      conn: onConn,
      message: onServer,
      timeout: onTimeout,
      lost: onLost,
      close: onSocketClose,
    },
  }),
  session: "",
  message: null, // {text, kind: "error"|"info"} shown in #status instead of the connection text
  closedText: null, // why we stopped retrying, when the link is "closed"
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
  focusGoal: null, // the control focus is owed to when it cannot take it yet (see placeFocus)
  lastPhase: null, // the phase the last render drew
  tickTimer: 0, // the redraw when the number next changes
  // ?view= (views.js): "full", "overlay" or "presenter", and the overlay's type.
  view: parseView(location.search),
  patchedPhase: null, // the phase of the last snapshot or patch, to see a countdown reach zero
  chime: new Chime(),
  flashTimer: 0, // ends the flash at zero
  minuteTimer: 0, // the presenter's redraw when the time of day next changes
  level: null, // the level last drawn (stage.js levelOf); null before the first state
  shownMessage: undefined, // the message last drawn; undefined before the first state
};

// ---- Connection ------------------------------------------------------------
// The socket itself is socket.js's; here is what the page makes of it.

function onConn(conn, before, why) {
  if (before !== conn) page.message = null; // old messages are stale once the link changes
  for (const c of CONN_STATES) el.root.classList.toggle(`state-${c}`, c === conn);
  if (conn === "closed" && why) page.closedText = t[why];
  if (conn === "reconnecting" && why) page.message = { kind: "error", text: t[why] };
  // "live" comes with a snapshot, drawn once it is taken in (onServer).
  if (conn !== "live") render();
}

/**
 * The key goes in the connection's first message, not its URL. Until the
 * answer, a "viewer" snapshot (the join's) does not change what is shown
 * (roleDuringAuth), so a controller's page never flickers to "View only".
 */
function presentKey() {
  page.offered = page.key;
  page.authId = page.link.authenticate(page.key);
}

/** The auth was answered (or given up on): show the role the server gave. */
function authAnswered() {
  page.authId = null;
  page.role = page.snapshotRole ?? page.role;
}

/** Keeps the key for this tab: a reload presents it again, the address bar never shows it. */
function keepKey(key) {
  page.key = key;
  try {
    sessionStorage.setItem(keyStorageName(page.session), key);
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
    page.key = parseKey(new URLSearchParams({ key: sessionStorage.getItem(keyStorageName(page.session)) ?? "" }));
  } catch {
    page.key = null;
  }
}

/** The socket is gone: no answer can come to what this page asked on it. */
function onLost() {
  page.authId = null; // the next socket presents the key again
  if (page.confirm?.id != null) page.confirm = null;
  if (page.rotate?.id != null) page.rotate = null;
}

/** The server closed the socket (socket.js retries or stops after this). */
function onSocketClose() {
  // Only a page that was never live can be refused for its origin.
  if (!page.link.state) whyRefused(lang).then((text) => text && showRefusal(text));
}

/** The server refuses this page's origin: say so until the link is live. */
function showRefusal(text) {
  if (page.link.conn === "live") return;
  page.message = { kind: "error", text };
  render();
}

// ---- Messages ------------------------------------------------------------------

/** A message socket.js took in (see its `on.message`). */
function onServer(msg, { lostRun }) {
  switch (msg.type) {
    case "snapshot":
      applyControl(msg);
    // falls through
    case "patch":
      // Say so when the restart took a countdown with it; otherwise there is nothing to tell.
      if (lostRun) page.message = { kind: "info", text: t.restarted };
      el.root.dataset.epoch = page.link.epoch ?? "";
      el.root.dataset.phase = page.link.state.phase ?? "";
      // Only a patch is the moment itself: a snapshot after a reconnect may
      // find a countdown that reached zero while this page was away.
      if (msg.type === "patch" && reachedZero(page.patchedPhase, page.link.state)) atZero();
      page.patchedPhase = page.link.state.phase ?? null;
      break;
    case "ack":
      answered(msg.id);
      if (msg.id === page.authId) authAnswered();
      else if (msg.id === page.rotate?.id) rotated(msg);
      break;
    case "error":
      if (msg.id != null) answered(msg.id);
      if (msg.id != null && msg.id === page.authId) {
        // The key was not accepted: the view-only note says so; not an error of a press.
        authAnswered();
        break;
      }
      if (msg.id != null && msg.id === page.rotate?.id) page.rotate = null;
      page.message = { kind: "error", text: errorText(msg, t) };
      break;
  }
  render();
}

/** A countdown reached zero: the chime, if on, and the views' flash (none under reduced motion: app.css). */
function atZero() {
  page.chime.play();
  if (page.view.view === "full") return;
  clearTimeout(page.flashTimer);
  delete el.root.dataset.flash;
  void el.root.offsetWidth; // restarts the animation if the last flash had not ended
  el.root.dataset.flash = "";
  page.flashTimer = setTimeout(() => delete el.root.dataset.flash, FLASH_MS);
}

/** Command `id` got no answer in time. */
function onTimeout(id, op) {
  answered(id);
  if (op === "auth") authAnswered();
  else page.message = { kind: "error", text: t.noAnswer };
  render();
}

/** Command `id` was answered (or given up on). */
function answered(id) {
  // "End for everyone?" was answered: close it (a run that ended closes it anyway).
  if (page.confirm?.id === id) page.confirm = null;
}

/** Takes this connection's role (and the key, for a controller) from its snapshot. */
function applyControl(snapshot) {
  const { role, key } = controlOf(snapshot);
  page.snapshotRole = role;
  page.role = roleDuringAuth(page.role, role, page.authId !== null);
  // The first joiner gets a key it did not ask for (or a forgotten session
  // is begun anew with a new one): keep it so a reload keeps control.
  if (role === "controller" && key && key !== page.key) keepKey(key);
}

// ---- "New controller link" (rotate_key) ---------------------------------------
// Cuts off everyone else who holds the controller link, so it asks first,
// with No focused, like ending a run.

function askToRotate() {
  page.rotate = {};
  render();
  el.rotateNo.focus();
}

function onRotateYes() {
  if (!page.rotate || page.rotate.id != null) return;
  const id = send("rotate_key");
  page.rotate = id === null ? null : { id };
  render();
}

function closeRotate() {
  page.rotate = null;
  render();
  el.rotateKey.focus();
}

function rotated(ack) {
  const focusWasIn = el.rotate.contains(document.activeElement);
  page.rotate = null;
  if (typeof ack.key === "string" && parseKey(new URLSearchParams({ key: ack.key }))) {
    keepKey(ack.key);
    page.offered = ack.key; // this connection holds the new key now
    el.shareStatus.textContent = "";
    setText(el.shareStatus, t.newKeyDone);
  }
  render();
  if (focusWasIn) el.rotateKey.focus();
}

/** Sends a command; returns its id, or null (and says so) if not connected. */
function send(op, fields = {}) {
  const id = page.link.send(op, fields);
  if (id === null) page.message = { kind: "error", text: t.notConnected };
  return id;
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
    const parsed = parseUntil(el.until.value, page.link.serverNow());
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
  const times = parseLevelTimes(el.warnAt.value, el.dangerAt.value);
  if (!times.ok) {
    el.stage.open = true; // the field is in the Stage area: show it before pointing at it
    return refuse(times.field === "warn" ? el.warnAt : el.dangerAt, t.badLevel[times.why]);
  }
  for (const input of [el.warnAt, el.dangerAt]) input.removeAttribute("aria-invalid");
  Object.assign(fields, startOptions(el.overtime.checked, times));
  if (finish.label !== null) fields.finishedLabel = finish.label;
  remember();
  command("start", fields);
}

function refuse(input, problem) {
  input.setAttribute("aria-invalid", "true");
  page.message = { kind: "error", text: problem };
  render();
  input.focus();
}

// The last values a host started with, per session, so a reload or the
// next run of the same show starts from them.
function remember() {
  try {
    localStorage.setItem(
      rememberKey(page.session),
      JSON.stringify({
        mode: el.mode.value,
        duration: el.seconds.value,
        finish: el.finishText.value,
        overtime: el.overtime.checked,
        warn: el.warnAt.value,
        danger: el.dangerAt.value,
      }),
    );
  } catch {
    // Storage refused (private mode, full): nothing to remember with.
  }
}

function recall() {
  let saved = null;
  try {
    saved = readRemembered(localStorage.getItem(rememberKey(page.session)));
  } catch {
    saved = null;
  }
  if (!saved) return;
  if (saved.duration) el.seconds.value = saved.duration;
  el.finishText.value = saved.finish;
  el.overtime.checked = saved.overtime;
  el.warnAt.value = saved.warn;
  el.dangerAt.value = saved.danger;
  if (saved.mode === "until") {
    el.mode.value = "until";
    onMode();
  }
}

/** A press: clears the last message, sends, and shows the wait. Returns the command's id. */
function command(op, fields = {}) {
  // A second press while the first awaits its answer is the same wish, not a new one.
  if (op !== "adjust" && page.link.pendingOps().has(op)) return null;
  page.message = null;
  const id = send(op, fields);
  render();
  return id;
}

/** "Show message": the field's text to everyone's screen, once the page has checked it. */
function onMessage(ev) {
  ev.preventDefault();
  const parsed = parseMessage(el.messageText.value);
  if (!parsed.ok) return refuse(el.messageText, t.badMessage[parsed.why]);
  el.messageText.removeAttribute("aria-invalid");
  command("message", { text: parsed.text });
}

/** The blackout's toggle: the opposite of what the server says now. */
function onBlackout() {
  command("blackout", { on: page.link.state?.blackout !== true });
}

function renderMessageCount() {
  const n = messageLength(el.messageText.value);
  setText(el.messageCount, t.messageCount(n));
  el.messageCount.dataset.over = String(n > CONTRACT.messageMaxLength);
}

function onAdjust(seconds, opener) {
  if (!isAdjust(seconds)) return;
  if (adjustEnds(page.link.state, seconds, page.link.serverNow())) askToEnd("adjust", { seconds }, opener);
  else command("adjust", { seconds });
}

// ---- "End for everyone?" -------------------------------------------------------
// Cancel, a −1 min that leaves nothing, and Done or Fail while waiting end the
// run for every viewer, so they ask first, in the run controls' place, with No focused: a key pressed
// twice, or held, then answers No. (Why not Undo: see the README.)

function askToEnd(op, fields, opener) {
  page.confirm = { op, fields, opener, id: null };
  render();
  el.confirmNo.focus();
}

function onConfirmYes() {
  const c = page.confirm;
  if (!c || c.id !== null) return;
  c.id = command(c.op, c.fields);
  if (c.id === null) closeConfirm(false); // not sent: the message says why
}

/** Closes the question; `back` puts the focus on the control that asked it. */
function closeConfirm(back) {
  const c = page.confirm;
  if (!c) return;
  page.confirm = null;
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
    page.message = { kind: "error", text: t.badSession(name) };
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
    const ahead = page.link.serverNow() + UNTIL_SUGGEST_MS;
    el.until.value = localDateTime(Math.ceil(ahead / 60_000) * 60_000);
  }
  page.message = null;
  render();
}

// ---- View ----------------------------------------------------------------------

function statusText() {
  if (page.message) return page.message.text;
  if (page.link.conn === "closed") return page.closedText ?? t.closed;
  // Cluster mode: the server cannot confirm this state with Redis.
  if (page.link.conn === "live" && page.link.state?.stale) return t.stale;
  return t[page.link.conn];
}

/** The big button and the run's controls (buttonView in logic.js). */
function view() {
  return buttonView(page.link.state, { role: page.role, live: page.link.conn === "live", pending: page.link.pendingOps() });
}

/**
 * Where the keyboard focus goes when the phase changes under it, or the
 * control holding it goes away. The rule: never onto a control that ends the
 * run (Cancel, −1 min, Done, Fail); the big button and Pause, the two that
 * take turns, hand it to each other, and a wait begun from outside puts it on
 * the big button (which takes no press then); while a press awaits its
 * answer nothing moves (the pressed control stays focusable, only
 * aria-disabled).
 */
function focusTarget(phase) {
  if (page.confirm) return el.confirmNo;
  if (phase === "running") return el.pause;
  if (phase === "paused" || phase === WAITING_PHASE || phase === OVERTIME_PHASE) return el.start;
  return el.mode.value === "until" ? el.until : el.seconds;
}

function placeFocus(focused, before, after) {
  const onBody = !focused || focused === document.body;
  const inForm = !onBody && el.form.contains(focused);
  let target = null;
  const turnTaker = focused === el.start || focused === el.pause || el.startFields.contains(focused);
  if (inForm && before !== after && turnTaker) target = focusTarget(after);
  else if (inForm && gone(focused)) target = focusTarget(after);
  else if (onBody && page.focusGoal) target = page.focusGoal;
  if (!target || target === focused) return;
  if (gone(target)) {
    page.focusGoal = target; // e.g. Resume while the link is down: given once it is back
    return;
  }
  page.focusGoal = null;
  target.focus();
}

function render() {
  const s = page.link.state;
  const live = page.link.conn === "live";
  const ops = page.link.pendingOps();
  const v = view();
  const focused = document.activeElement;
  const before = page.lastPhase;
  page.lastPhase = s?.phase ?? null;
  if (page.confirm && !confirmHolds(page.confirm.op, s?.phase)) page.confirm = null; // the run ended anyway

  if (v.busy) el.start.setAttribute("aria-busy", "true");
  else el.start.removeAttribute("aria-busy");
  // A controller's button keeps the focus through its waits: aria-disabled,
  // not disabled. A viewer's never takes presses at all.
  const watcher = page.role === "viewer" || page.role === null;
  el.start.disabled = watcher && v.disabled;
  setInert(el.start, !watcher && v.disabled);
  el.start.hidden = v.hostWait;
  el.hostWait.hidden = !v.hostWait;
  setText(el.startText, t[v.text]);
  const busyText = s?.phase === WAITING_PHASE ? t.waitBusy : s?.phase === OVERTIME_PHASE ? t.levelOver : t.busy;
  setText(el.spinnerText, v.waiting ? t.waiting : busyText);

  // What to start with and the run's controls take turns in one area.
  const byUntil = el.mode.value === "until";
  el.startFields.hidden = v.run;
  el.seconds.hidden = byUntil;
  el.until.hidden = !byUntil;
  el.understood.hidden = byUntil;
  setText(el.understood, byUntil ? "" : durationEcho(el.seconds.value, t));
  // Read-only rather than disabled while a start waits, so the focus stays.
  for (const input of [el.seconds, el.until, el.finishText]) input.readOnly = v.busy;
  el.runControls.hidden = !v.run || Boolean(page.confirm);
  el.confirm.hidden = !v.run || !page.confirm;
  el.runControls.setAttribute("aria-label", v.settle ? t.waitControls : t.runControls);
  el.pause.hidden = !v.pause;
  setInert(el.pause, !live || ops.has("pause"));
  for (const b of [el.minus, el.plus]) {
    b.hidden = !v.adjust;
    setInert(b, !live);
  }
  el.stop.hidden = !v.stop;
  setInert(el.stop, !live || ops.has("stop"));
  for (const [b, op] of [[el.done, "done"], [el.fail, "fail"]]) {
    b.hidden = !v.settle;
    setInert(b, !live || ops.has(op));
  }
  setInert(el.cancel, !live || ops.has("cancel"));
  const words = confirmWords(page.confirm?.op);
  setText(el.confirmText, t[words.ask]);
  setText(el.confirmYes, t[words.yes]);
  const asked = page.confirm?.id != null;
  setInert(el.confirmYes, !live || asked);
  setInert(el.confirmNo, asked);

  const sNow = page.link.serverNow();
  const label = labelText(s, sNow, t);
  setText(el.labelText, label);
  setText(el.labelWords, s ? labelWords(s, sNow, t) : label);
  el.label.dataset.size = labelSize(label);
  renderSubline(s, sNow);
  const width = clockWidth(s, sNow);
  if (width === null) delete el.label.dataset.clock;
  else el.label.dataset.clock = String(width);
  const title = titleText(s, sNow, page.session, t);
  if (document.title !== title) document.title = title;

  el.root.dataset.spinner = String(s?.spinner === true);
  renderStage(s, sNow, live, ops);
  renderPresenter(sNow);
  el.chime.setAttribute("aria-pressed", String(page.chime.on));

  setText(el.session, page.session);
  if (el.session.title !== page.session) el.session.title = page.session;
  // A count from a link that is down is one this page cannot vouch for.
  setText(el.viewers, s ? viewersText(s.viewers, t, live) : "");
  el.viewers.classList.toggle("last-known", !live);

  renderControl(v);

  setText(el.status, statusText());
  if (page.message?.kind === "error" || page.link.conn === "closed" || (page.link.conn === "live" && s?.stale)) {
    el.status.dataset.kind = "error";
  } else delete el.status.dataset.kind;

  placeFocus(focused, before, page.lastPhase);

  // Redraw exactly when the number next changes. Timers in a background tab
  // may fire late; visibilitychange redraws at once when it is shown again.
  clearTimeout(page.tickTimer);
  const delay = msUntilNextChange(s, sNow);
  if (delay !== null) page.tickTimer = setTimeout(render, delay);
}

/**
 * The level's colour (data-level), said once when it changes, and its
 * chime; the presenter message; the blackout; the Stage area's controls.
 */
function renderStage(s, sNow, live, ops) {
  const blackout = blackoutView(s, page.role, page.view.view);
  el.root.dataset.blackout = blackout;
  el.blackoutOn.hidden = blackout !== "indicator";
  el.blankedNote.hidden = blackout !== "blank";

  const level = levelOf(s, sNow);
  el.root.dataset.level = level;
  const said = [];
  if (s) {
    const cue = levelCue(page.level, level, s, sNow, t);
    if (cue.announce) said.push(cue.announce);
    if (cue.chime) page.chime.play();
    page.level = level;
  }

  const message = shownMessage(s);
  setText(el.message, message ?? "");
  el.message.hidden = message === null;
  if (message === null) delete el.root.dataset.message;
  else el.root.dataset.message = "";
  if (s) {
    if (page.shownMessage !== undefined && message !== null && message !== page.shownMessage) {
      said.push(t.messageSaid(message));
    }
    page.shownMessage = message;
  }
  // A blank screen says nothing but that it is blank.
  if (said.length && blackout !== "blank") {
    el.announce.textContent = ""; // the same words again (a level back and forth) are said again
    el.announce.textContent = said.join(" ");
  }

  const controls = page.role === "open" || page.role === "controller";
  el.stage.hidden = !controls;
  el.blackout.setAttribute("aria-pressed", String(s?.blackout === true));
  setInert(el.blackout, !live || ops.has("blackout"));
  // Clear goes away with the message: the focus it held goes to the field, not the page.
  if (message === null && document.activeElement === el.messageClear) el.messageText.focus();
  el.messageClear.hidden = message === null;
  setInert(el.messageClear, !live || ops.has("message"));
}

/** The presenter's time of day, on the server's clock, redrawn when the minute turns. */
function renderPresenter(sNow) {
  if (page.view.view !== "presenter") return;
  const now = Number.isFinite(sNow) ? sNow : Date.now();
  setText(el.timeOfDay, timeOfDay(now, lang));
  clearTimeout(page.minuteTimer);
  page.minuteTimer = setTimeout(render, msUntilNextMinute(now));
}

/**
 * The line under the label: the time elapsed while waiting, counting up, or
 * how a wait ended, in words and in its colour (data-outcome on <html>, so
 * the label takes the colour too).
 */
function renderSubline(s, sNow) {
  const elapsed = elapsedText(s, sNow);
  const badge = outcomeBadge(s, sNow, t);
  setText(el.elapsed, elapsed ?? "");
  el.elapsed.hidden = elapsed === null;
  setText(el.outcome, badge?.words ?? "");
  el.outcome.hidden = !badge?.shown;
  if (elapsed !== null) el.label.dataset.sub = "elapsed";
  else if (badge?.shown) el.label.dataset.sub = "outcome";
  else delete el.label.dataset.sub;
  if (badge) el.root.dataset.outcome = badge.outcome;
  else delete el.root.dataset.outcome;
}

/** Controls or "View only", the Share area and the session field, from the role the server gave. */
function renderControl(v) {
  const view = controlView(page.role, page.key, page.offered);
  el.root.dataset.role = page.role ?? "";
  el.options.hidden = !view.controls;
  el.viewOnly.hidden = !view.viewOnly;
  setText(el.viewOnlyDetail, view.keyRejected ? t.keyRejected : t.viewOnlyDetail);
  el.share.hidden = !view.share;
  el.shareController.hidden = !view.controllerLink;
  // The key stays out of the DOM unless this page may hand it out.
  const links = view.share ? shareLinks(location, page.session, view.controllerLink ? page.key : null) : {};
  showLinks([[el.viewerLink, links.viewer], [el.controllerLink, links.controller]]);
  el.rotate.hidden = !view.controllerLink;
  el.rotateKey.hidden = Boolean(page.rotate);
  el.rotateConfirm.hidden = !page.rotate;
  setInert(el.rotateYes, page.rotate?.id != null || page.link.conn !== "live");
  setInert(el.rotateNo, page.rotate?.id != null);
  // QR codes are fetched only once someone opens what shows them.
  showQr(el.viewerQr, el.share.open ? links.viewer : null);
  showQr(el.controllerQr, el.share.open && el.shareController.open ? links.controller : null, true);

  // Open mode, nothing running: the session's name becomes a field.
  const picking = page.role === "open" && !v.run;
  el.openSession.hidden = !picking;
  el.session.hidden = picking;
  document.getElementById("session-word").classList.toggle("picking", picking);
  if (picking && document.activeElement !== el.sessionName && !el.sessionName.value) {
    el.sessionName.value = page.session;
  }
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

/** Sets the view the URL asked for (the CSS does the rest), and the overlay's range-checked type. */
function applyView() {
  const { view, size, weight } = page.view;
  el.root.dataset.view = view;
  el.presenterLine.hidden = view !== "presenter";
  if (view === "overlay") {
    el.root.style.setProperty("--view-size", String(size));
    el.root.style.setProperty("--view-weight", String(weight));
  }
}

function main() {
  applyStrings();
  applyView();
  el.chime.addEventListener("click", () => {
    page.chime.toggle();
    render();
  });
  el.form.addEventListener("submit", onStart);
  const onPress = (node, fn) => node.addEventListener("click", () => inert(node) || fn());
  onPress(el.cancel, () => askToEnd("cancel", {}, el.cancel));
  onPress(el.done, () => askToEnd("done", {}, el.done));
  onPress(el.fail, () => askToEnd("fail", {}, el.fail));
  onPress(el.pause, () => command("pause"));
  onPress(el.minus, () => onAdjust(-ADJUST_STEP, el.minus));
  onPress(el.plus, () => onAdjust(ADJUST_STEP, el.plus));
  onPress(el.stop, () => askToEnd("stop", {}, el.stop));
  el.messageForm.addEventListener("submit", onMessage);
  onPress(el.messageClear, () => command("message", { text: null }));
  onPress(el.blackout, onBlackout);
  el.messageText.addEventListener("input", renderMessageCount);
  onPress(el.confirmYes, onConfirmYes);
  onPress(el.confirmNo, () => closeConfirm(true));
  onPress(el.rotateKey, askToRotate);
  onPress(el.rotateYes, onRotateYes);
  onPress(el.rotateNo, closeRotate);
  el.rotateConfirm.addEventListener("keydown", (ev) => {
    if (ev.key === "Escape" && page.rotate?.id == null) closeRotate();
  });
  el.confirm.addEventListener("keydown", (ev) => {
    if (ev.key === "Escape" && page.confirm?.id === null) closeConfirm(true);
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
    if (ev.target !== page.focusGoal) page.focusGoal = null; // the user chose where to be
  });
  el.mode.addEventListener("change", onMode);
  for (const input of [el.seconds, el.until, el.finishText, el.sessionName, el.messageText, el.warnAt, el.dangerAt]) {
    input.addEventListener("input", () => {
      input.removeAttribute("aria-invalid");
      if (input === el.seconds) setText(el.understood, durationEcho(el.seconds.value, t));
    });
  }
  buildPresets();
  renderMessageCount();
  el.openSession.addEventListener("submit", onOpenSession);
  el.shareController.addEventListener("toggle", () => {
    render();
    // It opens at the panel's foot: bring that into view.
    if (el.shareController.open) bringIntoView(el.share, "end");
  });
  wireCopy(el.share, [el.viewerLink, el.controllerLink], el.shareStatus, t);
  // The page fills the screen, so an opened Share area starts below the fold:
  // bring it into view.
  el.share.addEventListener("toggle", () => {
    render(); // the QR codes load when shown
    if (el.share.open) bringIntoView(el.share, "nearest");
  });
  // A code that arrives after the panel opened can lengthen it: keep its foot in view.
  el.viewerQr.addEventListener("load", () => {
    if (el.share.open && !el.shareController.open) bringIntoView(el.share, "nearest");
  });
  document.addEventListener("visibilitychange", () => {
    if (document.visibilityState !== "visible") return;
    render(); // throttled timers may have left the label behind: redraw from endsAt now
    page.link.reconnectNow();
    if (page.link.conn === "live") page.link.startPings(3); // the machine may have slept: re-measure
  });
  window.addEventListener("online", () => page.link.reconnectNow());
  // A controller link pasted into a tab already on this session changes only
  // the fragment, which reloads nothing: take its key and present it anew.
  window.addEventListener("hashchange", () => {
    if (!parseKeyFragment(location.hash)) return;
    takeKey();
    page.link.close(1000, "new key");
    page.link.connect();
  });
  // The socket may take minutes to notice a dead network; the browser knows now.
  window.addEventListener("offline", () => {
    page.link.offline();
  });

  const parsed = parseSession(location.search);
  if (!parsed.ok) {
    // The server would refuse it anyway; say why instead of retrying forever.
    page.session = parsed.raw;
    page.closedText = t.badSession(parsed.raw);
    page.link.stop();
    return;
  }
  page.session = parsed.session;
  takeKey();
  recall();
  render();
  page.link.connect();
}

main();
