"""Cluster mode (--redis): several instances share sessions through a real
redis-server that each test starts on a free loopback port."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import tempfile
import threading
import time
from pathlib import Path

import pytest

from cdclient import Client, http_get, now_ms, run_async
from serverproc import server_binary, start_server, PUBLIC_DIR

REDIS_SERVER = "/usr/bin/redis-server"

pytestmark = pytest.mark.skipif(not Path(REDIS_SERVER).exists(), reason="redis-server is not installed")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Redis:
    """A redis-server of the test's own; stop() and start() keep its port and directory."""

    def __init__(self, appendonly: bool = False, extra: tuple[str, ...] = (), password: str | None = None):
        self.port = free_port()
        self.dir = tempfile.mkdtemp(prefix="countdown-redis-")
        self.appendonly = appendonly
        # Server arguments (requirepass, an ACL user), and the password redis-cli then gives.
        self.extra = extra
        self.password = password
        self.proc: subprocess.Popen | None = None
        self.start()

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}"

    def start(self) -> None:
        self.proc = subprocess.Popen(
            [REDIS_SERVER, "--port", str(self.port), "--bind", "127.0.0.1", "--dir", self.dir,
             "--save", "", "--appendonly", "yes" if self.appendonly else "no", "--appendfsync", "always",
             *self.extra],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        seen = b""
        # Its own "ready" log line is the event to wait for.
        while b"eady to accept connections" not in seen:
            chunk = self.proc.stdout.read1(4096)
            assert chunk, f"redis-server exited: {seen!r}"
            seen += chunk
        threading.Thread(target=lambda p=self.proc: [None for _ in iter(lambda: p.stdout.read1(4096), b"")],
                         daemon=True).start()

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=10)
        self.proc = None

    def command(self, *args: str) -> str:
        auth = ["--no-auth-warning", "-a", self.password] if self.password else []
        return subprocess.run(["redis-cli", "-p", str(self.port), *auth, *args], capture_output=True, text=True,
                              timeout=5).stdout.strip()


@pytest.fixture
def redis():
    r = Redis()
    yield r
    r.stop()


@pytest.fixture
def pair(redis):
    """Two instances on one Redis; one that a test killed is not stopped again."""
    servers = [start_server("--redis", redis.url) for _ in range(2)]
    yield servers
    for server in servers:
        if server.proc.returncode is None:
            server.stop_and_check()


@pytest.mark.parametrize("value,needle", [
    ("redis://localhost:6379", "not an IP address"),
    ("redis://127.0.0.1:notaport", "port"),
    ("http://127.0.0.1:6379", "expected redis://"),
])
def test_bad_redis_url_exits_2(value, needle):
    for args, env in ((["--redis", value], None), ([], {"COUNTDOWN_REDIS": value})):
        done = subprocess.run([str(server_binary()), "--port", "0", "--public", str(PUBLIC_DIR), *args],
                              env={**os.environ, **(env or {})}, capture_output=True, text=True, timeout=10)
        assert done.returncode == 2, done
        assert needle in done.stderr and value in done.stderr, done.stderr


@run_async
async def test_command_on_one_instance_is_seen_on_another(pair, session_id):
    a, b = pair
    va = await Client.connect(a.ws_url(session_id), name="A")
    vb = await Client.connect(b.ws_url(session_id), name="B")
    assert va.snapshot["epoch"] == vb.snapshot["epoch"]
    await va.command({"op": "start", "seconds": 30, "id": 1})
    await vb.wait_phase("running")
    assert vb.state["endsAt"] == va.state["endsAt"]
    # A viewer moving from A to B: the same epoch, and a seq not lower than it saw.
    await va.wait_seq(va.seq + 1, timeout=3)
    seen = va.seq
    moved = await Client.connect(b.ws_url(session_id) + f"?since={seen}", name="moved")
    assert moved.snapshot["epoch"] == va.snapshot["epoch"]
    assert moved.snapshot["seq"] >= seen
    assert moved.state["endsAt"] == va.state["endsAt"]
    for c in (va, vb, moved):
        await c.close()


@run_async
async def test_hundred_rounds_of_racing_starts_give_one_ack_each(pair, session_id):
    a, b = pair
    single = 0
    for round in range(100):
        sid = f"{session_id}-{round}"
        va, vb = await asyncio.gather(Client.connect(a.ws_url(sid)), Client.connect(b.ws_url(sid)))
        await asyncio.gather(va.send({"op": "start", "seconds": 30, "id": 1}),
                             vb.send({"op": "start", "seconds": 30, "id": 1}))
        ra, rb = await asyncio.gather(va.reply(), vb.reply())
        kinds = sorted([ra["type"], rb["type"]])
        codes = [r.get("code") for r in (ra, rb) if r["type"] == "error"]
        if kinds == ["ack", "error"] and codes == ["busy"]:
            single += 1
        await asyncio.gather(va.close(), vb.close())
    assert single == 100


async def command_until(client: Client, op: str, want: str, within: float) -> dict:
    """Sends `op` until its reply is `want` (ack, or an error code), for at most `within` s."""
    deadline = time.monotonic() + within
    while True:
        await client.send({"op": op, "id": op})
        # A command whose reply a cut link lost may take up to 5 s to resolve.
        reply = await client.reply(timeout=max(6.0, deadline - time.monotonic()))
        if reply["type"] == want or reply.get("code") == want:
            return reply
        assert time.monotonic() < deadline, reply
        await asyncio.sleep(0.2)


@run_async
async def test_redis_stopped_for_five_seconds(pair, redis, session_id):
    a, b = pair
    va = await Client.connect(a.ws_url(session_id), name="A")
    vb = await Client.connect(b.ws_url(session_id), name="B")
    await va.command({"op": "start", "seconds": 60, "id": 1})
    await vb.wait_phase("running")
    ends_at = va.state["endsAt"]
    redis.stop()
    stopped = time.monotonic()
    # Commands are refused while the cluster is unreachable.
    await command_until(va, "pause", "unavailable", within=5)
    # Both instances keep ticking from the known deadline.
    for viewer in (va, vb):
        before = viewer.state["remaining"]
        await viewer.wait_state(lambda s, before=before: s["remaining"] <= before - 2, timeout=4,
                                what="ticks during the outage")
        assert viewer.state["endsAt"] == ends_at
        await viewer.wait_state(lambda s: s.get("stale") is True, timeout=5, what="stale")
    await asyncio.sleep(max(0, 5 - (time.monotonic() - stopped)))  # the outage lasts 5 s
    redis.start()
    # Both reconnect on their own; a command works again and reaches the other instance.
    await command_until(va, "pause", "ack", within=10)
    await vb.wait_phase("paused")
    assert vb.state["remainingMs"] == va.state["remainingMs"]
    for viewer in (va, vb):
        await viewer.wait_state(lambda s: s.get("stale") is False, timeout=5, what="confirmed")


@run_async
async def test_kill_9_of_an_instance_mid_countdown(pair, session_id):
    a, b = pair
    va = await Client.connect(a.ws_url(session_id), name="A")
    await va.command({"op": "start", "seconds": 30, "id": 1})
    await va.wait_seq(va.seq + 1, timeout=3)
    seen, epoch, ends_at = va.seq, va.snapshot["epoch"], va.state["endsAt"]
    a.proc.send_signal(signal.SIGKILL)
    a.proc.wait(timeout=5)
    # Its viewer reconnects to the other instance and carries on.
    moved = await Client.connect(b.ws_url(session_id) + f"?since={seen}", name="moved")
    assert moved.snapshot["epoch"] == epoch
    assert moved.snapshot["seq"] >= seen
    state = moved.snapshot["state"]
    assert state["phase"] == "running" and state["endsAt"] == ends_at
    left = (ends_at - now_ms()) / 1000
    assert abs(state["remaining"] - left) <= 1.2, (state, left)
    await moved.close()


@run_async
async def test_redis_restarted_with_aof_finds_every_session(session_id):
    redis = Redis(appendonly=True)
    try:
        a = start_server("--redis", redis.url)
        ends = {}
        try:
            for i in range(5):
                v = await Client.connect(a.ws_url(f"{session_id}-{i}"))
                await v.command({"op": "start", "seconds": 600, "id": 1})
                ends[i] = v.state["endsAt"]
                await v.close()
        finally:
            a.stop_and_check()
        redis.stop()
        redis.start()
        # A new instance knows none of them: everything comes from Redis.
        c = start_server("--redis", redis.url)
        try:
            for i, ends_at in ends.items():
                v = await Client.connect(c.ws_url(f"{session_id}-{i}"))
                assert v.state["phase"] == "running" and v.state["endsAt"] == ends_at
                await v.close()
        finally:
            c.stop_and_check()
    finally:
        redis.stop()


class StallingProxy:
    """A TCP proxy to Redis that can stop forwarding without closing anything,
    as a cut link looks from one side: bytes wait until `resume()`."""

    def __init__(self, target_port: int):
        self.target_port = target_port
        self.flowing = threading.Event()
        self.flowing.set()
        self.listener = socket.socket()
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen()
        self.port = self.listener.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}"

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(("127.0.0.1", self.target_port))
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                self.flowing.wait()
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for s in (source, sink):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def stall(self) -> None:
        self.flowing.clear()

    def resume(self) -> None:
        self.flowing.set()

    def close(self) -> None:
        self.flowing.set()
        self.listener.close()


@run_async
async def test_an_instance_cut_off_from_redis_does_not_diverge(redis, session_id):
    proxy = StallingProxy(redis.port)
    a = start_server("--redis", redis.url)
    b = start_server("--redis", proxy.url)
    try:
        va = await Client.connect(a.ws_url(session_id), name="A")
        vb = await Client.connect(b.ws_url(session_id), name="B")
        await va.command({"op": "start", "seconds": 60, "id": 1})
        await vb.wait_phase("running")
        proxy.stall()
        # A carries on; B cannot confirm the change, so it refuses commands
        # rather than order them on a state it cannot see.
        await va.command({"op": "pause", "id": 2})
        await command_until(vb, "resume", "unavailable", within=10)
        assert vb.state["phase"] == "running"
        # B tells its viewers it cannot confirm their state; A's do not hear it.
        await vb.wait_state(lambda s: s.get("stale") is True, timeout=10, what="stale on B")
        assert va.state["stale"] is False
        status, _, body = http_get(b.host, b.port, "/readyz")
        assert status == 503 and b"redis" in body, body
        proxy.resume()
        # Back through the proxy, B reconnects and reconciles by itself.
        await vb.wait_phase("paused", timeout=15)
        await vb.wait_state(lambda s: s.get("stale") is False, timeout=10, what="confirmed again")
        assert vb.state["remainingMs"] == va.state["remainingMs"]
        await command_until(vb, "resume", "ack", within=10)
        await va.wait_phase("running")
        assert va.state["endsAt"] == vb.state["endsAt"]
    finally:
        proxy.close()
        a.stop_and_check()
        b.stop_and_check()


@run_async
async def test_viewer_counts_are_cluster_wide(pair, session_id):
    a, b = pair
    va = await Client.connect(a.ws_url(session_id), name="A")
    vb = await Client.connect(b.ws_url(session_id), name="B")
    more = await Client.connect(a.ws_url(session_id), name="A2")
    for viewer in (va, vb, more):
        await viewer.wait_viewers(3, timeout=5)
    await more.close()
    for viewer in (va, vb):
        await viewer.wait_viewers(2, timeout=5)
    # An instance killed without a word stops counting once its heartbeat expires.
    a.proc.send_signal(signal.SIGKILL)
    a.proc.wait(timeout=5)
    await vb.wait_viewers(1, timeout=10)


@run_async
async def test_thousand_sessions_survive_a_restart_of_every_instance(redis, session_id):
    servers = [start_server("--redis", redis.url) for _ in range(3)]
    try:
        ends = {}

        async def start(i: int) -> None:
            server = servers[i % 3]
            viewer = await Client.connect(server.ws_url(f"{session_id}-{i}"))
            await viewer.command({"op": "start", "seconds": 600, "id": 1})
            ends[i] = viewer.state["endsAt"]
            await viewer.close()

        for batch in range(0, 1000, 50):
            await asyncio.gather(*(start(i) for i in range(batch, batch + 50)))
        # Each instance in turn is replaced by a new one.
        for k in range(3):
            servers[k].stop_and_check()
            servers[k] = start_server("--redis", redis.url)

        async def check(i: int) -> None:
            viewer = await Client.connect(servers[(i + 1) % 3].ws_url(f"{session_id}-{i}"))
            assert viewer.state["phase"] == "running" and viewer.state["endsAt"] == ends[i], i
            await viewer.close()

        for batch in range(0, 1000, 50):
            await asyncio.gather(*(check(i) for i in range(batch, batch + 50)))
    finally:
        for server in servers:
            if server.alive():
                server.stop_and_check()
