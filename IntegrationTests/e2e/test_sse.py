"""GET /api/v1/sessions/{id}/events: a session followed over Server-Sent Events, against the
built binary, read by Debian's `curl -N`, Python's http.client and a raw socket.

The stream is a hub viewer like a WebSocket one: first a `snapshot` event, then one `patch`
per patch (a slow reader's merged catch-up is one), each with `id:` its seq and as data the
WebSocket frame's JSON; it counts in `viewers`, shares the connection caps, and is closed on
drain. These tests check each of those from outside.
"""

from __future__ import annotations

import asyncio
import http.client
import json
import signal
import socket
import subprocess
import time
import uuid

import pytest

from cdclient import Client, merge_patch, norm_state, run_async, strict_loads
from opskit import rss_kb
from serverproc import start_server
from test_hostile import TCP_ESTABLISHED, tcp_table

EVENTS = "/api/v1/sessions/{}/events"
DROPPED = 0  # the status of a request closed without an answer


def sid() -> str:
    return "e" + uuid.uuid4().hex


class EventParser:
    """The event-stream format (HTML's "server-sent events" section): lines, an event per
    blank line, comments start with a colon."""

    def __init__(self):
        self.buf = b""
        self.fields: dict[str, str] = {}
        self.comments: list[str] = []

    def feed(self, data: bytes) -> list[dict]:
        self.buf += data
        out = []
        while b"\n" in self.buf:
            line, _, self.buf = self.buf.partition(b"\n")
            text = line.rstrip(b"\r").decode("utf-8")
            if text == "":
                if self.fields:
                    out.append(self.fields)
                self.fields = {}
            elif text.startswith(":"):
                self.comments.append(text)
            else:
                name, _, value = text.partition(":")
                value = value[1:] if value.startswith(" ") else value
                assert name not in self.fields, f"field {name} twice in one event: {text!r}"
                self.fields[name] = value
        return out


def check_event(event: dict) -> dict:
    """An event's data is the WebSocket frame of its kind, and its id is that frame's seq."""
    assert set(event) == {"event", "id", "data"}, event
    frame = strict_loads(event["data"])
    assert frame["type"] == event["event"], (event["event"], frame)
    assert event["event"] in ("snapshot", "patch")
    assert event["id"] == str(frame["seq"]), (event["id"], frame["seq"])
    return frame


class Stream:
    """An event stream read on a raw asyncio socket: headers, then parsed events."""

    def __init__(self, reader, writer, status: int, headers: dict[str, str], rest: bytes):
        self.reader, self.writer = reader, writer
        self.status, self.headers = status, headers
        self.parser = EventParser()
        self.pending = self.parser.feed(rest)
        self.frames: list[dict] = []
        self.state: dict = {}

    @classmethod
    async def open(cls, srv, path: str, headers: dict[str, str] | None = None):
        reader, writer = await asyncio.open_connection(srv.host, srv.port)
        extra = "".join(f"{k}: {v}\r\n" for k, v in (headers or {}).items())
        writer.write(f"GET {path} HTTP/1.1\r\nHost: {srv.host}:{srv.port}\r\n{extra}\r\n".encode())
        await writer.drain()
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
        except asyncio.IncompleteReadError:
            # Closed unanswered: what lws 4.1.6 does itself with some requests.
            return cls(reader, writer, DROPPED, {}, b"")
        lines = head.decode("latin-1").split("\r\n")
        status = int(lines[0].split()[1])
        hdrs = {}
        for line in lines[1:]:
            if line:
                k, _, v = line.partition(":")
                hdrs[k.strip().lower()] = v.strip()
        return cls(reader, writer, status, hdrs, b"")

    async def next(self, timeout: float = 5.0) -> dict:
        """The next event, checked, with the state it leads to applied."""
        deadline = time.monotonic() + timeout
        while not self.pending:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError("no event in time")
            data = await asyncio.wait_for(self.reader.read(65536), left)
            if not data:
                raise EOFError("stream ended")
            self.pending += self.parser.feed(data)
        event = self.pending.pop(0)
        frame = check_event(event)
        if frame["type"] == "snapshot":
            assert not self.frames, "a second snapshot"
            self.state = frame["state"]
        else:
            assert self.frames, "a patch before the snapshot"
            assert frame["seq"] > self.frames[-1]["seq"], "seq must grow"
            self.state = merge_patch(self.state, frame["patch"])
        self.frames.append(frame)
        return frame

    async def until(self, pred, timeout: float = 5.0, what: str = "") -> dict:
        deadline = time.monotonic() + timeout
        while not pred(self.state) or not self.frames:
            await self.next(max(0.01, deadline - time.monotonic()))
        return self.state

    async def ended(self, timeout: float = 5.0) -> bool:
        """True when the server closes the stream within `timeout` (events before it are read)."""
        deadline = time.monotonic() + timeout
        try:
            while time.monotonic() < deadline:
                data = await asyncio.wait_for(self.reader.read(65536), deadline - time.monotonic())
                if not data:
                    return True
        except (asyncio.TimeoutError, ConnectionResetError):
            return False
        return False

    def close(self):
        self.writer.close()


def silent_stream(srv, path: str) -> socket.socket:
    """A stream whose client never reads, not even the headers, with the smallest receive
    buffer the kernel allows: the server soon cannot write to it."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1)
    sock.connect((srv.host, srv.port))
    sock.sendall(f"GET {path} HTTP/1.1\r\nHost: {srv.host}:{srv.port}\r\n\r\n".encode())
    return sock


def read_silent(sock: socket.socket, seq: int, timeout: float = 10.0) -> list[dict]:
    """What a silent stream finally reads: every event, until one reaches `seq`."""
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)
    sock.settimeout(timeout)
    data = b""
    while b"\r\n\r\n" not in data:
        data += sock.recv(65536)
    head, _, rest = data.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200"), head[:100]
    parser = EventParser()
    frames = [check_event(e) for e in parser.feed(rest)]
    while not frames or frames[-1]["seq"] < seq:
        chunk = sock.recv(65536)
        assert chunk, "the stream ended"
        frames += [check_event(e) for e in parser.feed(chunk)]
    return frames


@pytest.fixture(scope="module")
def srv():
    s = start_server()
    yield s
    s.stop_and_check()


@run_async
async def test_curl_follows_a_countdown_started_over_websocket(srv):
    """`curl -N` gets the stream's headers, a snapshot whose id is its seq, then one patch
    event per patch, with ids that grow, as a WebSocket client starts a countdown: the
    patches it prints replay to the WebSocket viewer's own state."""
    session = sid()
    v = await Client.connect(srv.ws_url(session))
    curl = subprocess.Popen(
        ["curl", "-sN", "-D", "-", "--max-time", "20", f"http://{srv.host}:{srv.port}{EVENTS.format(session)}"],
        stdout=subprocess.PIPE)
    try:
        await v.wait_viewers(2)
        await v.command({"op": "start", "seconds": 2})
        await v.wait_phase("finished")
        await asyncio.sleep(0)
        # Read what curl printed until the finished patch is in it.
        out = b""
        parser = EventParser()
        events: list[dict] = []
        head = None
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            chunk = await asyncio.to_thread(curl.stdout.read1, 65536)
            if not chunk:
                break
            out += chunk
            if head is None and b"\r\n\r\n" in out:
                head, _, rest = out.partition(b"\r\n\r\n")
                events += parser.feed(rest)
            elif head is not None:
                events += parser.feed(chunk)
            if any('"finished"' in e.get("data", "") for e in events):
                break
        assert head is not None, out[:300]
        assert head.startswith(b"HTTP/1.1 200"), head
        assert b"content-type: text/event-stream" in head.lower()
        assert b"cache-control: no-cache" in head.lower()
        frames = [check_event(e) for e in events]
        assert frames[0]["type"] == "snapshot" and frames[0]["session"] == session
        assert all(f["type"] == "patch" for f in frames[1:]) and len(frames) >= 3
        seqs = [f["seq"] for f in frames]
        assert seqs == sorted(set(seqs)), seqs
        state = frames[0]["state"]
        for f in frames[1:]:
            state = merge_patch(state, f["patch"])
            if f["seq"] in v.history:
                assert norm_state(state) == v.history[f["seq"]], f"state after seq {f['seq']} differs"
        assert norm_state(state) == v.history[frames[-1]["seq"]]
        assert state["phase"] == "finished"
    finally:
        curl.kill()
        curl.wait()
        await v.close()


@run_async
async def test_http_client_stream_counts_in_viewers(srv):
    """Python's http.client reads the stream; while it is open the session shows one more
    viewer, on the WebSocket and in the stream itself, and one fewer once it closes (seen
    at the stream's next write, a tick)."""
    session = sid()
    v = await Client.connect(srv.ws_url(session))
    conn = http.client.HTTPConnection(srv.host, srv.port, timeout=5)
    try:
        conn.request("GET", EVENTS.format(session))
        resp = conn.getresponse()
        assert resp.status == 200
        assert resp.getheader("content-type") == "text/event-stream"
        parser = EventParser()
        events: list[dict] = []
        while not events:
            events += parser.feed(await asyncio.to_thread(resp.fp.readline))
        snap = check_event(events[0])
        assert snap["type"] == "snapshot" and snap["session"] == session
        # The count it is shown grows to include it (counts are merged over 250 ms), as the
        # WebSocket's does.
        state = snap["state"]
        while state["viewers"] != 2:
            events += parser.feed(await asyncio.to_thread(resp.fp.readline))
            state = merge_patch(state, check_event(events[-1])["patch"]) if len(events) > 1 else state
            events = events[:1]
        await v.wait_viewers(2)
        # A client that leaves is found at the stream's next write: a tick, here.
        await v.command({"op": "start", "seconds": 30})
        resp.close()
    finally:
        conn.close()
    await v.wait_viewers(1, timeout=5)
    await v.close()


@run_async
async def test_resume_with_last_event_id_or_since(srv):
    """A reconnect naming the last id it saw (Last-Event-ID, as EventSource sends it, or
    ?since=) gets a snapshot whose seq is at least that id; a claim far past the session's
    seq moves nothing, and values that are not a seq are refused with 400."""
    session = sid()
    first = await Stream.open(srv, EVENTS.format(session))
    snap = await first.next()
    first.close()
    seq = snap["seq"]
    again = await Stream.open(srv, EVENTS.format(session), {"Last-Event-ID": str(seq + 50)})
    assert (await again.next())["seq"] >= seq + 50
    again.close()
    since = await Stream.open(srv, EVENTS.format(session) + f"?since={seq + 200}")
    got = (await since.next())["seq"]
    assert got >= seq + 200
    since.close()
    # Both: the larger wins, as EventSource keeps the URL's since and adds its Last-Event-ID.
    both = await Stream.open(srv, EVENTS.format(session) + f"?since={got}", {"Last-Event-ID": str(got + 7)})
    assert (await both.next())["seq"] >= got + 7
    both.close()
    for far in (str(2**63), str(2**64 - 1), str(got + 100_000)):
        s = await Stream.open(srv, EVENTS.format(session), {"Last-Event-ID": far})
        assert (await s.next())["seq"] < got + 2000, f"Last-Event-ID {far} moved the seq"
        s.close()
    for bad in ("-1", str(2**64), "1e308", "1e400", "-0", "+5", "", "abc", "1 2", "x" * 2000):
        s = await Stream.open(srv, EVENTS.format(session), {"Last-Event-ID": bad})
        assert s.status == 400, (bad[:20], s.status)
        s.close()
    for bad in ("-1", "-0", "+5", str(2**64), "1e308", "abc", ""):
        s = await Stream.open(srv, EVENTS.format(session) + f"?since={bad}")
        assert s.status == 400, (bad, s.status)
        s.close()
    # A NUL: lws 4.1.6 drops the request itself; never a stream.
    s = await Stream.open(srv, EVENTS.format(session) + "?since=%00")
    assert s.status in (400, DROPPED), s.status
    s.close()


@run_async
async def test_bad_session_ids_and_methods_are_refused(srv):
    """The session id is validated as on /ws/: a bad one is 404, before anything is created;
    only GET opens a stream."""
    for bad in ("a%20b", "a%2Fb", "x" * 2000, "..", "a.b", "%C3%A9"):
        s = await Stream.open(srv, EVENTS.format(bad))
        assert s.status == 404, (bad[:20], s.status)
        s.close()
    # A NUL, or a path past lws's 4 KiB of headers: refused or dropped, as on any path.
    for bad in ("a%00b", "%00", "x" * 4096):
        s = await Stream.open(srv, EVENTS.format(bad))
        assert s.status in (400, DROPPED), (bad[:20], s.status)
        s.close()
    conn = http.client.HTTPConnection(srv.host, srv.port, timeout=5)
    conn.request("POST", EVENTS.format(sid()), body=b"")
    assert conn.getresponse().status == 405
    conn.close()


async def adjust_burst(v: Client, count: int = 50) -> None:
    """`count` adjusts (a patch each for every viewer), their acks awaited."""
    for i in range(count):
        await v.send({"op": "adjust", "seconds": 1 if i % 2 else -1})
    replies = 0
    while replies < count:
        msg = await v.recv()
        if msg["type"] in ("ack", "error"):
            assert msg["type"] == "ack", msg
            replies += 1


@run_async
async def test_a_non_reading_stream_is_merged_and_keeps_server_memory_bounded():
    """A client with the smallest receive buffer that never reads its stream, not even the
    headers, while its session ticks and takes thousands of commands (a patch each): once
    the kernel's socket queue holds all it will (about a megabyte on loopback), the server
    holds at most one merged frame for it, so its RSS grows by less than 2 MB from there
    while a reading viewer keeps every tick. Read at last, the stream's tail is merged
    patches (seq jumps, one event each) that replay to the reading viewer's state."""
    s = start_server("--max-commands-per-second", "100000", "--data", ":memory:")
    try:
        session = sid()
        v = await Client.connect(s.ws_url(session))
        stuck = silent_stream(s, EVENTS.format(session))
        await v.wait_viewers(2)
        await v.command({"op": "start", "seconds": 600})
        port = stuck.getsockname()[1]
        # Until the queue to it stops growing: the kernel takes no more.
        queued, stable, deadline = 0, 0, time.monotonic() + 40
        while stable < 3:
            assert time.monotonic() < deadline, f"the silent stream's socket never filled: {queued} bytes"
            for _ in range(20):
                await adjust_burst(v)
            now_queued = tcp_table(s.port)[port][1]
            stable = stable + 1 if now_queued <= queued + 1024 and now_queued > 256 * 1024 else 0
            queued = max(queued, now_queued)
        rss_before = rss_kb(s.proc.pid)
        for _ in range(100):
            await adjust_burst(v)
        growth = rss_kb(s.proc.pid) - rss_before
        assert growth < 2048, f"RSS grew by {growth} kB for 5000 patches a stream did not read"
        before = v.state["remaining"]
        await v.wait_state(lambda st: st["remaining"] <= before - 2, timeout=4, what="two more ticks")
        assert v.state["viewers"] == 2
        target = v.seq
        frames = await asyncio.to_thread(read_silent, stuck, target)
        assert frames[0]["type"] == "snapshot"
        jumps = [b["seq"] - a["seq"] for a, b in zip(frames, frames[1:])]
        assert max(jumps) > 100, f"no merged patch: largest step {max(jumps)}"
        state = frames[0]["state"]
        for f in frames[1:]:
            state = merge_patch(state, f["patch"])
        last = frames[-1]["seq"]
        assert last >= target
        await v.wait_seq(last, timeout=3)
        assert norm_state(state) == v.history[last], "the merged stream ends where the viewer is"
        stuck.close()
        await v.close()
    finally:
        s.stop_and_check()


@run_async
async def test_caps_refuse_streams_with_statuses():
    """Streams and WebSockets share one connection budget: past --max-connections-per-ip a
    stream gets 429 and past --max-connections 503, both with Retry-After, and a WebSocket
    is refused by the same count of streams."""
    s = start_server("--max-connections-per-ip", "2")
    try:
        session = sid()
        one = await Stream.open(s, EVENTS.format(session))
        v = await Client.connect(s.ws_url(session))
        over = await Stream.open(s, EVENTS.format(session))
        assert over.status == 429 and over.headers.get("retry-after") == "5", (over.status, over.headers)
        over.close()
        with pytest.raises(Exception):
            await Client.connect(s.ws_url(session))
        one.close()
        await v.wait_viewers(1, timeout=5)
        await v.close()
    finally:
        s.stop_and_check()
    s = start_server("--max-connections", "1")
    try:
        session = sid()
        one = await Stream.open(s, EVENTS.format(session))
        await one.next()
        over = await Stream.open(s, EVENTS.format(session))
        assert over.status == 503 and over.headers.get("retry-after") == "5", (over.status, over.headers)
        over.close()
        one.close()
    finally:
        s.stop_and_check()


@run_async
async def test_drain_refuses_new_streams_and_closes_open_ones():
    """On SIGTERM with --drain-seconds, a new stream gets 503 while the open one keeps its
    events; when the drain ends the server closes it and exits 0."""
    s = start_server("--drain-seconds", "2")
    session = sid()
    open_ = await Stream.open(s, EVENTS.format(session))
    await open_.next()
    s.proc.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + 2
    status = 200
    while status == 200 and time.monotonic() < deadline:
        late = await Stream.open(s, EVENTS.format(sid()))
        status = late.status
        late.close()
        await asyncio.sleep(0.05)
    assert status == 503
    assert await open_.ended(timeout=6), "the stream stayed open after the drain"
    assert await asyncio.to_thread(s.proc.wait, 6) == 0
    open_.close()


@run_async
async def test_an_idle_stream_gets_a_keepalive_comment_within_15_seconds(srv):
    """With nothing to send, the stream carries a comment line within 15 s, so proxies do
    not time it out; it stays open meanwhile."""
    stream = await Stream.open(srv, EVENTS.format(sid()))
    await stream.next()
    started = time.monotonic()
    while not stream.parser.comments:
        assert time.monotonic() - started < 15.5, "no comment within 15 s"
        data = await asyncio.wait_for(stream.reader.read(4096), 16)
        assert data, "the stream ended"
        assert not stream.parser.feed(data), "an event on an idle session"
    assert stream.parser.comments == [": keepalive"]
    assert time.monotonic() - started >= 10, "comments come after a silence, not at once"
    stream.close()


@run_async
async def test_key_mode_stream_is_a_viewer_and_leaves_control_to_the_page():
    """With --control key, a stream is a viewer only (no token needed to read): its
    snapshot says role viewer and holds no key, even when it opened the session; the
    first WebSocket to join afterwards becomes the controller, as the first joiner of a
    new session does, and a second one is a viewer."""
    s = start_server("--control", "key")
    try:
        session = sid()
        stream = await Stream.open(s, EVENTS.format(session))
        snap = await stream.next()
        assert snap.get("role") == "viewer" and "key" not in snap, snap
        page = await Client.connect(s.ws_url(session))
        assert page.snapshot.get("role") == "controller" and page.snapshot.get("key"), page.snapshot
        other = await Client.connect(s.ws_url(session))
        assert other.snapshot.get("role") == "viewer" and "key" not in other.snapshot
        ack, _ = await page.command({"op": "start", "seconds": 5})
        await stream.until(lambda st: st["phase"] == "running", what="the run, on the stream")
        second = await Stream.open(s, EVENTS.format(session) + "?key=" + page.snapshot["key"])
        snap2 = await second.next()
        assert snap2.get("role") == "viewer" and "key" not in snap2, "a stream is never a controller"
        for c in (page, other):
            await c.close()
        stream.close()
        second.close()
    finally:
        s.stop_and_check()


@run_async
async def test_origin_decides_streams_as_upgrades():
    """A foreign Origin gets 403, a listed one its stream with access-control-allow-origin
    naming it (so a page there may read it), and with --allow-origin '*' even a 2 KB
    origin gets its headers whole."""
    s = start_server("--allow-origin", "https://ok.test")
    try:
        foreign = await Stream.open(s, EVENTS.format(sid()), {"Origin": "https://evil.test"})
        assert foreign.status == 403
        foreign.close()
        listed = await Stream.open(s, EVENTS.format(sid()), {"Origin": "https://ok.test"})
        assert listed.status == 200 and listed.headers.get("access-control-allow-origin") == "https://ok.test"
        assert (await listed.next())["type"] == "snapshot"
        listed.close()
    finally:
        s.stop_and_check()
    s = start_server("--allow-origin", "*")
    try:
        origin = "https://" + "a" * 2000 + ".test"
        long_ = await Stream.open(s, EVENTS.format(sid()), {"Origin": origin})
        assert long_.status == 200 and long_.headers.get("access-control-allow-origin") == origin
        assert (await long_.next())["type"] == "snapshot"
        long_.close()
    finally:
        s.stop_and_check()


@run_async
async def test_stream_on_another_cluster_instance_follows_and_resumes():
    """Two instances on one Redis: a stream on B follows a run started on A, counts in the
    cluster-wide viewers, and a reconnect to A with B's Last-Event-ID gets a snapshot at
    least that far, as a WebSocket moving between instances does."""
    from test_cluster import Redis

    redis = Redis()
    servers = [start_server("--redis", redis.url) for _ in range(2)]
    try:
        a, b = servers
        session = sid()
        va = await Client.connect(a.ws_url(session))
        stream = await Stream.open(b, EVENTS.format(session))
        await stream.next()
        await va.wait_viewers(2, timeout=5)
        await va.command({"op": "start", "seconds": 30})
        await stream.until(lambda st: st["phase"] == "running", what="the run, on B's stream")
        assert stream.state["endsAt"] == va.state["endsAt"]
        seen = stream.frames[-1]["seq"]
        stream.close()
        moved = await Stream.open(a, EVENTS.format(session), {"Last-Event-ID": str(seen)})
        snap = await moved.next()
        assert snap["seq"] >= seen and snap["epoch"] == va.snapshot["epoch"]
        assert snap["state"]["endsAt"] == va.state["endsAt"]
        moved.close()
        await va.close()
    finally:
        for s in servers:
            s.stop_and_check()
        redis.stop()


@run_async
async def test_a_stream_the_hub_refuses_gets_503_with_the_error_object():
    """Past --max-sessions, a stream to a new session is refused by the hub: 503, the
    WebSocket's error object as the body, Retry-After; the budget it took is given back."""
    s = start_server("--max-sessions", "1", "--max-connections", "2")
    try:
        first = await Stream.open(s, EVENTS.format(sid()))
        await first.next()
        for _ in range(3):  # each refusal gives its place back, or the third would be 503 total_cap
            refused = await Stream.open(s, EVENTS.format(sid()))
            assert refused.status == 503 and refused.headers.get("retry-after") == "5"
            body = await asyncio.wait_for(refused.reader.read(), 5)
            error = strict_loads(body.decode())
            assert error["type"] == "error" and error["code"] == "too_many_sessions", error
            refused.close()
        first.close()
    finally:
        s.stop_and_check()


@run_async
async def test_a_stream_follows_a_wait_to_its_outcome(srv):
    """A CI job's wait, followed by curl's kind of client: the stream shows the shared
    spinner with the wait's label and startedAt, then the outcome the job reports."""
    session = sid()
    v = await Client.connect(srv.ws_url(session))
    stream = await Stream.open(srv, EVENTS.format(session))
    await stream.next()
    await v.command({"op": "wait", "label": "Deploying", "timeoutSeconds": 900})
    st = await stream.until(lambda st: st["phase"] == "waiting", what="the wait")
    assert st["spinner"] is True and st["label"] == "Deploying" and isinstance(st["startedAt"], int)
    assert isinstance(st["timeoutAt"], int) and st["timeoutAt"] > st["startedAt"]
    await v.command({"op": "done", "label": "Deployed"})
    st = await stream.until(lambda st: st["phase"] == "finished", what="the outcome")
    assert st["outcome"] == "done" and st["label"] == "Deployed" and st["spinner"] is False
    stream.close()
    await v.close()
