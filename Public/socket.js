// The countdown.v1 client: one WebSocket to one session, kept up across losses.
// Like Phoenix's socket.js it connects, reconnects with backoff, checks that
// the link is alive and speaks the protocol, and knows nothing of the DOM: the
// page (app.js) hears what happens through the handlers it passes in, and
// draws from what this object holds.
//
// Held across sockets: the session's state exactly as the server last told it
// (a snapshot, then the merge patches after it), the clock samples that give
// the server's time, and the backoff. Held per socket: the commands in flight
// and the ping. The rules themselves are pure functions of logic.js.

import {
  SUBPROTOCOL,
  addClockSample,
  authMessage,
  backoffDelay,
  bestOffset,
  clockSample,
  closeOutcome,
  effectiveOffset,
  OVERTIME_PHASE,
  overtimeAnchor,
  reduceMessage,
} from "./logic.js";

/**
 * connecting: the first attempt; live: this connection has its snapshot;
 * reconnecting: lost, retrying with backoff; closed: the server said not to retry.
 */
export const CONN_STATES = ["connecting", "live", "reconnecting", "closed"];

const PRESS_TIMEOUT_MS = 8000; // a command with no ack/error by then is given up
const SNAPSHOT_TIMEOUT_MS = 10_000; // an open socket with no snapshot by then is dropped
const PONG_TIMEOUT_MS = 5000; // an unanswered ping means the link is dead
const PING_BURST = 5; // pings per burst on each new connection
const PING_GAP_MS = 150; // between the pings of a burst
const PING_RETRY_MS = 1000; // after a rate_limited that may have been a ping's
const RESYNC_MS = 60_000; // a short burst this often keeps the offset fresh and the link checked
const RESYNC_PINGS = 3;

export class SessionSocket {
  /** One of CONN_STATES. */
  conn = "connecting";
  /** The server's epoch from the last snapshot. */
  epoch = null;
  seq = -Infinity;
  /** Exactly what the server has told us; null until the first snapshot. */
  state = null;
  /** The last authoritative `remaining` while running (see effectiveOffset). */
  anchor = null;
  /** Recent clock samples (clockSample in logic.js). */
  samples = [];

  #url;
  #on;
  #WebSocket;
  #now;
  #ws = null;
  #snapshotted = false; // whether the current socket has delivered its snapshot
  #connectStartedAt = 0;
  #attempt = 0;
  #retryTimer = 0;
  #snapshotTimer = 0;
  #resyncTimer = 0;
  #nextId = 1; // never reset, so a late reply from an old socket cannot match a new command
  // Commands in flight: id -> {op, timer}. The page shows a press as a wait
  // until its ack or error, because pressing is a wait for the network.
  #pending = new Map();
  // The ping in flight (one at a time, so pongs never queue behind each other):
  // {t, timer} or null, plus how many more the current burst wants.
  #ping = null;
  #pingsLeft = 0;
  #pingGapTimer = 0;

  /**
   * @param {object} o
   * @param {(since: number|null) => string} o.url the session's ws:// URL (sessionUrl)
   * @param {object} o.on what the page does when:
   *   - open(): a socket opened; the page may present its key (authenticate);
   *   - conn(conn, before, why): the connection state was set (why: a key of
   *     STRINGS saying why the server let go, or null);
   *   - message(msg, {lostRun}): a snapshot or patch was taken in, or a pong,
   *     an ack of a command in flight, or an error of one or of the connection
   *     arrived (lostRun: a server restart took a running countdown with it);
   *   - timeout(id, op): command `id` got no answer in time;
   *   - lost(): the socket is gone, and with it every command in flight;
   *   - close(): the server's side closed the socket (before lost()).
   * @param {typeof WebSocket} [o.WebSocket]
   * @param {() => number} [o.now] wall time in epoch ms, as the server's clock counts
   */
  constructor({ url, on, WebSocket = globalThis.WebSocket, now = Date.now }) {
    this.#url = url;
    this.#on = on;
    this.#WebSocket = WebSocket;
    this.#now = now;
  }

  /** The server's time now, as best we know it. */
  serverNow() {
    return this.#now() + effectiveOffset(bestOffset(this.samples), this.anchor);
  }

  /** The ops of the commands in flight. */
  pendingOps() {
    return new Set([...this.#pending.values()].map((p) => p.op));
  }

  connect() {
    if (this.#ws || this.conn === "closed") return;
    clearTimeout(this.#retryTimer);
    // Tell the server what we have. It may answer with only the missed patches;
    // today it always sends a fresh snapshot, which replaces everything anyway.
    const since = this.state && Number.isSafeInteger(this.seq) ? this.seq : null;
    let sock;
    try {
      sock = new this.#WebSocket(this.#url(since), SUBPROTOCOL);
    } catch {
      this.#scheduleReconnect();
      return;
    }
    this.#ws = sock;
    this.#snapshotted = false;
    this.#connectStartedAt = this.#now();
    // Handlers check the socket is still the current one, so a socket we have
    // given up on cannot touch what this holds.
    sock.addEventListener("open", () => {
      if (this.#ws !== sock) return;
      this.#on.open();
      clearTimeout(this.#snapshotTimer);
      this.#snapshotTimer = setTimeout(() => {
        if (this.#ws === sock && !this.#snapshotted) this.#drop();
      }, SNAPSHOT_TIMEOUT_MS);
    });
    sock.addEventListener("message", (ev) => {
      if (this.#ws === sock) this.#onMessage(ev.data);
    });
    sock.addEventListener("close", (ev) => {
      if (this.#ws === sock) this.#onClose(ev);
    });
    // "error" is always followed by "close", which does the work.
  }

  /** Gives up for good without ever connecting (a session the server would refuse). */
  stop() {
    this.#setConn("closed");
  }

  /** Lets go of the current socket, closing it with `code` and `reason`. */
  close(code, reason) {
    const sock = this.#ws;
    this.#forget();
    try {
      sock?.close(code, reason);
    } catch {
      // already closing
    }
  }

  /** The browser says the network is gone: the socket may take minutes to notice. */
  offline() {
    if (this.#ws) this.#drop();
  }

  // A backoff timer can be seconds long; when the tab comes back to the front
  // or the network returns, the user is looking now, so try now.
  reconnectNow() {
    if (this.#ws || this.conn !== "reconnecting") return;
    this.#attempt = 0;
    this.connect();
  }

  /**
   * Presents a controller key on the socket that just opened: its first
   * message, never its URL. Returns the auth's id, or null with no key to present.
   */
  authenticate(key) {
    const id = this.#nextId++;
    const msg = authMessage(key, id);
    if (!msg) return null;
    this.#ws.send(msg);
    this.#await(id, "auth");
    return id;
  }

  /** Sends a command with a fresh id; returns the id, or null if not connected. */
  send(op, fields = {}) {
    const ws = this.#ws;
    if (!ws || ws.readyState !== this.#WebSocket.OPEN || this.conn !== "live") return null;
    const id = this.#nextId++;
    ws.send(JSON.stringify({ op, ...fields, id }));
    this.#await(id, op);
    return id;
  }

  startPings(count) {
    this.#pingsLeft = Math.max(this.#pingsLeft, count);
    if (!this.#ping) this.#sendPing();
    clearTimeout(this.#resyncTimer);
    this.#resyncTimer = setTimeout(() => this.startPings(RESYNC_PINGS), RESYNC_MS);
  }

  #setConn(conn, why = null) {
    const before = this.conn;
    this.conn = conn;
    this.#on.conn(conn, before, why);
  }

  #await(id, op) {
    const timer = setTimeout(() => {
      if (this.#settle(id)) this.#on.timeout(id, op);
    }, PRESS_TIMEOUT_MS);
    this.#pending.set(id, { op, timer });
  }

  /** Ends the wait for command `id`; returns whether we were waiting for it. */
  #settle(id) {
    const p = this.#pending.get(id);
    if (!p) return false;
    clearTimeout(p.timer);
    this.#pending.delete(id);
    return true;
  }

  /** Forgets everything tied to the current socket: commands in flight, pings. */
  #forget() {
    this.#ws = null;
    this.#snapshotted = false;
    clearTimeout(this.#snapshotTimer);
    clearTimeout(this.#resyncTimer);
    clearTimeout(this.#pingGapTimer);
    if (this.#ping) clearTimeout(this.#ping.timer);
    this.#ping = null;
    this.#pingsLeft = 0;
    // No reply can come on a new socket, so the wait a press showed must go now.
    for (const p of this.#pending.values()) clearTimeout(p.timer);
    this.#pending.clear();
    this.#on.lost();
  }

  /** Gives up on a socket that looks dead (no snapshot, no pong, offline) and retries. */
  #drop() {
    this.close(4000, "client gave up");
    this.#scheduleReconnect();
  }

  #onClose(ev) {
    this.#on.close();
    this.#forget();
    const { retry, why } = closeOutcome(ev.code, ev.reason, ev.wasClean);
    if (!retry) this.#setConn("closed", why);
    else this.#scheduleReconnect(why);
  }

  // Stays "reconnecting" while retrying (rather than flickering back to
  // "connecting" on each attempt) until a snapshot proves the link is live
  // again. `why` says why the server let go, when it said so.
  #scheduleReconnect(why = null) {
    this.#setConn("reconnecting", why);
    clearTimeout(this.#retryTimer);
    this.#retryTimer = setTimeout(() => this.connect(), backoffDelay(this.#attempt++));
  }

  #onMessage(data) {
    let msg;
    try {
      msg = JSON.parse(data);
    } catch {
      return; // the server only sends JSON; ignore rather than die on a stray frame
    }
    const at = this.#now();
    let lostRun = false;
    switch (msg?.type) {
      case "snapshot":
      case "patch": {
        const taken = this.#onState(msg, at);
        if (!taken) return;
        lostRun = taken.lostRun;
        break;
      }
      case "pong":
        this.#onPong(msg, at);
        break;
      case "ack":
        if (!this.#settle(msg.id)) return;
        break;
      case "error":
        // Errors of this page's own commands go on, and so do errors about
        // this connection itself, which carry no id (rate_limited, and
        // too_many_sessions just before a 1013 close). An id we no longer
        // wait for is not the user's business.
        if (msg.id != null && !this.#settle(msg.id)) return;
        if (msg.id == null) this.#pingMayBeRefused();
        break;
      default:
        return; // unknown types are for newer pages; ignore
    }
    this.#on.message(msg, { lostRun });
  }

  /** Takes in a snapshot or patch (reduceMessage); returns {lostRun}, or null to ignore it. */
  #onState(msg, at) {
    const held = { epoch: this.epoch, seq: this.seq, state: this.state };
    const next = reduceMessage(held, msg, this.#snapshotted);
    if (!next) return null;
    const first = msg.type === "snapshot" && !this.#snapshotted;
    const lostRun = next.restarted && ["running", "paused", "waiting"].includes(this.state?.phase);
    if (next.restarted) {
      // A new epoch: the sessions we knew are gone. Drop every trace of the old
      // server (its clock samples too) so nothing old is ever drawn again.
      this.samples = [];
      this.anchor = null;
    }
    this.epoch = next.epoch;
    this.seq = next.seq;
    this.state = next.state;
    if (msg.type === "snapshot") {
      // The server read its clock between our connect and this arrival: a
      // coarse clock sample, soon beaten by the pings' shorter round trips.
      if (first) this.samples = addClockSample(this.samples, clockSample(this.#connectStartedAt, at, msg.serverTime));
      this.#setAnchor(at, msg.serverTime);
    } else if (msg.patch && ("remaining" in msg.patch || (this.#inOvertime() && "label" in msg.patch))) {
      this.#setAnchor(at, null);
    } else if (this.state.phase !== "running" && !this.#inOvertime()) {
      this.anchor = null;
    }
    if (first) {
      this.#snapshotted = true;
      this.#attempt = 0; // reset only now: a server that accepts and drops must still back off
      clearTimeout(this.#snapshotTimer);
      this.#setConn("live");
      this.startPings(PING_BURST);
    }
    return { lostRun };
  }

  #inOvertime() {
    return this.state?.phase === OVERTIME_PHASE;
  }

  #setAnchor(at, sentAt) {
    const s = this.state;
    if (this.#inOvertime()) {
      this.anchor = overtimeAnchor(s, at, sentAt); // an overtime tick carries its label, not `remaining`
      return;
    }
    this.anchor =
      s.phase === "running" && Number.isFinite(s.endsAt) && Number.isFinite(s.remaining)
        ? { endsAt: s.endsAt, remaining: s.remaining, at, sentAt }
        : null;
  }

  #sendPing() {
    clearTimeout(this.#pingGapTimer);
    const ws = this.#ws;
    if (!ws || ws.readyState !== this.#WebSocket.OPEN || this.#pingsLeft <= 0) return;
    this.#pingsLeft -= 1;
    const t0 = this.#now();
    ws.send(JSON.stringify({ op: "ping", t: t0 }));
    // The server answers pings at once; silence means a dead link that TCP has
    // not noticed yet (a sleeping laptop, a dropped Wi-Fi).
    this.#ping = { t: t0, timer: setTimeout(() => this.#drop(), PONG_TIMEOUT_MS) };
  }

  /**
   * The server refused a message of ours without naming it (an error with no
   * id: rate_limited, refused before the message is read), so the ping in
   * flight may be the one refused: its pong would never come, and
   * waiting it out would drop a link the refusal itself proves alive (racing
   * the server's own 1008 when a page floods). Ask again once the bucket has
   * had time to refill, so the burst's clock samples still come.
   */
  #pingMayBeRefused() {
    if (!this.#ping) return;
    clearTimeout(this.#ping.timer);
    this.#ping = null;
    this.#pingsLeft += 1;
    this.#pingGapTimer = setTimeout(() => this.#sendPing(), PING_RETRY_MS);
  }

  #onPong(msg, at) {
    if (!this.#ping || msg.t !== this.#ping.t) return;
    clearTimeout(this.#ping.timer);
    this.#ping = null;
    this.samples = addClockSample(this.samples, clockSample(msg.t, at, msg.serverTime));
    if (this.#pingsLeft > 0) this.#pingGapTimer = setTimeout(() => this.#sendPing(), PING_GAP_MS);
  }
}
