"""Test-side client helpers for the countdown.v1 WebSocket protocol.

Built on the PyPI `websockets` asyncio client. A `Client` keeps the state it has built
from the snapshot plus RFC 7396 merge patches, a log of every message with its arrival
time, and the state after every seq, so tests can compare what different viewers saw.
"""

from __future__ import annotations

import asyncio
import copy
import functools
import http.client
import json
import socket
import time
from typing import Any, Callable

import websockets
from websockets.asyncio.client import connect as ws_connect
from websockets.exceptions import ConnectionClosed, InvalidHandshake

SUBPROTOCOL = "countdown.v1"
STATE_FIELDS = (
    "phase", "spinner", "enabled", "label", "remaining", "duration", "endsAt", "viewers", "remainingMs",
    "stale", "startedAt", "timeoutAt", "outcome",
    "level", "overSince", "overMs", "overtime", "warnAtSeconds", "dangerAtSeconds", "message", "blackout",
)
OUTCOMES = ("elapsed", "done", "failed", "timeout", "stopped")
LEVELS = ("normal", "warning", "danger", "over")
#: The optional fields: a merge patch's null removes them, and a client reads that as null.
NULLABLE = ("endsAt", "remainingMs", "startedAt", "timeoutAt", "outcome", "overSince", "overMs", "warnAtSeconds",
            "dangerAtSeconds", "message")
DEFAULT_TIMEOUT = 5.0


def run_async(fn):
    """Run an ``async def`` test body with asyncio.run (no pytest-asyncio needed)."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        return asyncio.run(fn(*args, **kwargs))

    return wrapper


def now_ms() -> float:
    return time.time() * 1000.0


# -- JSON -------------------------------------------------------------------------------
def _no_duplicate_keys(pairs):
    obj = {}
    for k, v in pairs:
        if k in obj:
            raise AssertionError(f"server sent a JSON object with duplicate key {k!r}")
        obj[k] = v
    return obj


def _reject_constant(name):
    raise AssertionError(f"server sent non-JSON constant {name}")


def strict_loads(text: str) -> Any:
    return json.loads(text, object_pairs_hook=_no_duplicate_keys, parse_constant=_reject_constant)


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7396 JSON merge patch."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = copy.deepcopy(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def norm_state(state: dict) -> dict:
    """A state as a client reads it: a missing optional field (a merge patch's null) means null."""
    out = dict(state)
    for field in NULLABLE:
        out.setdefault(field, None)
    return out


def is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def check_state_shape(state: dict) -> None:
    s = norm_state(state)
    missing = [f for f in STATE_FIELDS if f not in s]
    assert not missing, f"state lacks fields {missing}: {state}"
    assert s["phase"] in ("idle", "running", "paused", "finished", "waiting", "overtime"), s
    assert isinstance(s["spinner"], bool) and isinstance(s["enabled"], bool), s
    assert isinstance(s["stale"], bool), s
    assert isinstance(s["label"], str), s
    assert is_int(s["remaining"]) and is_int(s["duration"]) and is_int(s["viewers"]), s
    assert s["endsAt"] is None or is_int(s["endsAt"]), s
    assert (s["remainingMs"] is not None) is (s["phase"] == "paused"), f"remainingMs only while paused: {s}"
    if s["phase"] == "paused":
        assert is_int(s["remainingMs"]) and s["remainingMs"] > 0, s
        assert s["endsAt"] is None, s
        assert s["remaining"] == -(-s["remainingMs"] // 1000), s
        assert s["label"] == str(s["remaining"]), s
    # Invariants from the contract.
    waiting = s["phase"] == "waiting"
    assert (s["outcome"] is not None) is (s["phase"] == "finished"), f"outcome only when finished: {s}"
    assert s["outcome"] is None or s["outcome"] in OUTCOMES, s
    assert (s["startedAt"] is not None) is waiting, f"startedAt only while waiting: {s}"
    assert s["timeoutAt"] is None or (waiting and is_int(s["timeoutAt"]) and s["timeoutAt"] > s["startedAt"]), s
    if waiting:
        assert is_int(s["startedAt"]) and s["duration"] == 0, s
    # The stage (issue 20): the level in every state, overtime's overSince, a stop's overMs.
    overtime = s["phase"] == "overtime"
    assert s["level"] in LEVELS and (s["level"] == "over") is overtime, s
    assert (s["overSince"] is not None) is overtime, f"overSince only in overtime: {s}"
    assert (s["overMs"] is not None) is (s["outcome"] == "stopped"), f"overMs only when stopped: {s}"
    assert isinstance(s["overtime"], bool) and isinstance(s["blackout"], bool), s
    assert s["message"] is None or isinstance(s["message"], str), s
    if overtime:
        assert s["overtime"] is True and s["label"].startswith("+") and s["remaining"] == 0, s
    busy = s["phase"] in ("running", "waiting", "overtime")
    running = s["phase"] == "running"
    assert s["spinner"] is busy, f"spinner must be true exactly while running, waiting or in overtime: {s}"
    assert s["enabled"] is (not busy), f"enabled must be false exactly while running, waiting or in overtime: {s}"
    if running:
        assert s["endsAt"] is not None, s
        assert s["label"] == str(s["remaining"]), s
    elif s["phase"] != "paused":
        assert s["remaining"] == 0, s
        assert s["endsAt"] is None, s


# -- WebSocket client ---------------------------------------------------------------------
class Client:
    def __init__(self, ws, name: str = ""):
        self.ws = ws
        self.name = name
        self.snapshot: dict | None = None
        self.state: dict = {}
        self.seq: int | None = None
        self.log: list[tuple[float, dict]] = []  # (arrival ms, message)
        self.history: dict[int, dict] = {}  # seq -> normalised state after that seq
        self.noop_patch_fields: list[tuple[int, str]] = []  # patch fields that did not change anything

    @classmethod
    async def connect(
        cls,
        url: str,
        *,
        subprotocols: list[str] | None = [SUBPROTOCOL],  # noqa: B006 (read-only default)
        name: str = "",
        timeout: float = DEFAULT_TIMEOUT,
        compression: str | None = None,
    ) -> "Client":
        ws = await ws_connect(
            url,
            subprotocols=subprotocols,
            open_timeout=timeout,
            ping_interval=None,
            proxy=None,
            compression=compression,
            max_size=2**20,
            max_queue=None,  # never stop reading, even for clients that do not consume
            close_timeout=2,
        )
        client = cls(ws, name or url.rsplit("/", 1)[-1])
        first = await client.recv(timeout)
        assert first["type"] == "snapshot", f"first message must be a snapshot, got {first}"
        return client

    # -- receiving ----------------------------------------------------------------------
    async def recv_raw(self, timeout: float = DEFAULT_TIMEOUT):
        return await asyncio.wait_for(self.ws.recv(), timeout)

    async def recv(self, timeout: float = DEFAULT_TIMEOUT) -> dict:
        try:
            raw = await asyncio.wait_for(self.ws.recv(), timeout)
        except asyncio.TimeoutError:
            raise AssertionError(
                f"[{self.name}] no message within {timeout}s; state={self.state}; "
                f"last messages={[m for _, m in self.log[-5:]]}"
            ) from None
        arrival = now_ms()
        assert isinstance(raw, str), f"server sent a binary frame: {raw!r}"
        msg = strict_loads(raw)
        assert isinstance(msg, dict), f"server message is not a JSON object: {raw!r}"
        self.log.append((arrival, msg))
        self._apply(msg)
        return msg

    def _apply(self, msg: dict) -> None:
        t = msg.get("type")
        if t == "snapshot":
            assert set(msg) >= {"type", "session", "seq", "serverTime", "state"}, msg
            assert is_int(msg["seq"]) and is_int(msg["serverTime"]), msg
            assert isinstance(msg["state"], dict), msg
            missing = [f for f in STATE_FIELDS if f not in msg["state"]]
            assert not missing, f"snapshot state must spell out every field (endsAt as null); lacks {missing}: {msg}"
            check_state_shape(msg["state"])
            if self.seq is not None:
                assert msg["seq"] >= self.seq, f"snapshot seq went back: {self.seq} -> {msg}"
            if self.snapshot is None:
                self.snapshot = msg
            self.state = copy.deepcopy(msg["state"])
            self.seq = msg["seq"]
            self.history[self.seq] = norm_state(self.state)
        elif t == "patch":
            assert set(msg) >= {"type", "seq", "patch"}, msg
            assert is_int(msg["seq"]) and isinstance(msg["patch"], dict), msg
            assert self.seq is not None, "patch before snapshot"
            assert msg["seq"] > self.seq, f"[{self.name}] seq did not increase: {self.seq} -> {msg}"
            assert msg["patch"], f"empty patch: {msg}"
            before = norm_state(self.state)
            for k, v in msg["patch"].items():
                if before.get(k) == v:
                    self.noop_patch_fields.append((msg["seq"], k))
            self.state = merge_patch(self.state, msg["patch"])
            self.seq = msg["seq"]
            check_state_shape(self.state)
            self.history[self.seq] = norm_state(self.state)
        elif t == "ack":
            assert "seq" in msg and is_int(msg["seq"]), msg
        elif t == "error":
            assert set(msg) >= {"type", "id", "code", "message"}, msg
            assert isinstance(msg["code"], str) and msg["code"], msg
            assert isinstance(msg["message"], str) and msg["message"], msg
        else:
            raise AssertionError(f"unknown message type: {msg}")

    async def until(self, pred: Callable[[dict], bool], timeout: float = DEFAULT_TIMEOUT, what: str = "") -> dict:
        """Receive messages until one satisfies `pred`; return it."""
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(
                    f"[{self.name}] timed out after {timeout}s waiting for {what or pred}; state={self.state}; "
                    f"last messages={[m for _, m in self.log[-6:]]}"
                )
            msg = await self.recv(left)
            if pred(msg):
                return msg

    async def wait_state(self, pred: Callable[[dict], bool], timeout: float = DEFAULT_TIMEOUT, what: str = "") -> dict:
        """Receive until the built state satisfies `pred` (returns at once if it already does)."""
        if self.state and pred(norm_state(self.state)):
            return norm_state(self.state)
        await self.until(lambda _m: bool(self.state) and pred(norm_state(self.state)), timeout, what)
        return norm_state(self.state)

    async def wait_seq(self, seq: int, timeout: float = DEFAULT_TIMEOUT) -> None:
        if self.seq is not None and self.seq >= seq:
            return
        await self.until(lambda _m: self.seq is not None and self.seq >= seq, timeout, f"seq >= {seq}")

    async def wait_phase(self, phase: str, timeout: float = DEFAULT_TIMEOUT) -> dict:
        return await self.wait_state(lambda s: s["phase"] == phase, timeout, f"phase {phase}")

    async def wait_viewers(self, n: int, timeout: float = DEFAULT_TIMEOUT) -> dict:
        return await self.wait_state(lambda s: s["viewers"] == n, timeout, f"viewers == {n}")

    # -- sending ------------------------------------------------------------------------
    async def send(self, obj: Any) -> None:
        await self.ws.send(obj if isinstance(obj, (str, bytes)) else json.dumps(obj, ensure_ascii=False))

    async def reply(self, timeout: float = DEFAULT_TIMEOUT) -> dict:
        """The next ack or error (patches that arrive first are applied and logged)."""
        return await self.until(lambda m: m["type"] in ("ack", "error"), timeout, "ack or error")

    async def command(self, obj: Any, timeout: float = DEFAULT_TIMEOUT) -> tuple[dict, dict]:
        """Send a command that must be accepted; return (its patch, its ack).

        Checks the contract: the patch with the ack's seq arrives before the ack."""
        mark = len(self.log)
        await self.send(obj)
        ack = await self.reply(timeout)
        assert ack["type"] == "ack", f"command {obj} was not accepted: {ack}"
        if isinstance(obj, dict) and "id" in obj:
            assert ack["id"] == obj["id"] and type(ack["id"]) is type(obj["id"]), (obj, ack)
        patches = [m for _, m in self.log[mark:] if m["type"] == "patch" and m["seq"] == ack["seq"]]
        assert patches, f"the patch for ack {ack} did not arrive before the ack; got {[m for _, m in self.log[mark:]]}"
        return patches[0]["patch"], ack

    async def expect_error(self, frame: Any, code: str, *, id: Any = ..., timeout: float = DEFAULT_TIMEOUT) -> dict:
        """Send `frame`; the very next message must be an error with `code` (and `id`, if given)."""
        await self.send(frame)
        msg = await self.recv(timeout)
        assert msg["type"] == "error", f"sent {frame!r}: expected error {code}, got {msg}"
        assert msg["code"] == code, f"sent {frame!r}: expected error code {code}, got {msg}"
        if id is not ...:
            assert msg["id"] == id and type(msg["id"]) is type(id), f"sent {frame!r}: expected id {id!r}, got {msg}"
        return msg

    def patches_from(self, seq: int) -> list[tuple[int, dict]]:
        return [(m["seq"], m["patch"]) for _, m in self.log if m["type"] == "patch" and m["seq"] >= seq]

    async def close(self) -> None:
        await self.ws.close()


async def settle(*clients: Client, viewers: int | None = None, timeout: float = 1.5) -> None:
    """Wait until every client sees `viewers` (default: the number of clients) and all have
    reached the same seq, so no join-time patch is still on its way to any of them."""
    n = len(clients) if viewers is None else viewers
    await asyncio.gather(*(c.wait_viewers(n, timeout) for c in clients))
    top = max(c.seq for c in clients)
    await asyncio.gather(*(c.wait_seq(top, timeout) for c in clients))


async def expect_refused(url: str, timeout: float = DEFAULT_TIMEOUT) -> str:
    """The WebSocket at `url` must be refused: the upgrade fails, or the socket closes
    with 1008 before any message. Returns a description of what happened."""
    try:
        ws = await ws_connect(url, subprotocols=[SUBPROTOCOL], open_timeout=timeout, ping_interval=None, proxy=None,
                              compression=None)
    except (InvalidHandshake, ConnectionClosed, OSError, EOFError) as exc:
        return f"handshake refused: {exc!r}"
    try:
        try:
            msg = await asyncio.wait_for(ws.recv(), timeout)
        except ConnectionClosed as exc:
            code = exc.rcvd.code if exc.rcvd else None
            assert code == 1008, f"{url}: socket closed with {code} (expected 1008), before any message"
            return "closed with 1008"
        except asyncio.TimeoutError:
            raise AssertionError(f"{url}: connection accepted and left open") from None
        raise AssertionError(f"{url}: connection accepted and got a message {msg!r}")
    finally:
        await ws.close()


# -- HTTP ------------------------------------------------------------------------------
def http_get(host: str, port: int, path: str, timeout: float = DEFAULT_TIMEOUT):
    """GET with http.client (no proxies). Returns (status, headers dict lowercased, body bytes)."""
    conn = http.client.HTTPConnection(host, port, timeout=timeout)
    try:
        conn.request("GET", path)
        resp = conn.getresponse()
        body = resp.read()
        headers = {k.lower(): v for k, v in resp.getheaders()}
        return resp.status, headers, body
    finally:
        conn.close()


def raw_http(host: str, port: int, request_target: str, timeout: float = DEFAULT_TIMEOUT):
    """Send a request line byte-for-byte (no client-side path normalisation).

    Returns (status or None if the server sent no status line, raw response bytes)."""
    req = (
        f"GET {request_target} HTTP/1.1\r\nHost: {host}:{port}\r\nConnection: close\r\n\r\n"
    ).encode("latin-1")
    data = bytearray()
    with socket.create_connection((host, port), timeout=timeout) as s:
        s.sendall(req)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                chunk = s.recv(65536)
            except socket.timeout:
                break
            except ConnectionResetError:
                break
            if not chunk:
                break
            data += chunk
            # Stop once a complete response with Content-Length has arrived.
            head, sep, body = bytes(data).partition(b"\r\n\r\n")
            if sep:
                for line in head.split(b"\r\n")[1:]:
                    k, _, v = line.partition(b":")
                    if k.strip().lower() == b"content-length" and len(body) >= int(v.strip() or 0):
                        return _status(data), bytes(data)
    return _status(data), bytes(data)


def _status(data: bytes | bytearray):
    line = bytes(data).split(b"\r\n", 1)[0]
    parts = line.split()
    if len(parts) >= 2 and parts[0].startswith(b"HTTP/") and parts[1].isdigit():
        return int(parts[1])
    return None


__all__ = [
    "Client", "ConnectionClosed", "settle", "InvalidHandshake", "SUBPROTOCOL", "STATE_FIELDS", "check_state_shape",
    "expect_refused", "http_get", "is_int", "merge_patch", "norm_state", "now_ms", "raw_http", "run_async",
    "strict_loads", "websockets",
]
