"""Overtime in a cluster costs Redis nothing per tick: both instances derive the `+N`
label from the shared overSince, so while two instances count a session's overtime,
Redis sees no command that names the session but viewer presence's own heartbeat (its
MONITOR stream says so)."""

from __future__ import annotations

import asyncio
import socket
import threading
import uuid
from pathlib import Path

import pytest

from cdclient import Client, run_async
from test_cluster import REDIS_SERVER, pair, redis  # noqa: F401 (fixtures)

pytestmark = pytest.mark.skipif(not Path(REDIS_SERVER).exists(), reason="redis-server is not installed")


class Monitor:
    """Redis's MONITOR stream, read on a thread of its own into `lines`."""

    def __init__(self, port: int):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=5)
        self.sock.sendall(b"MONITOR\r\n")
        self.buffer = b""
        while b"\r\n" not in self.buffer:
            self.buffer += self.sock.recv(4096)
        assert self.buffer.startswith(b"+OK"), self.buffer
        self.buffer = self.buffer.split(b"\r\n", 1)[1]
        self.port = port
        self.lines: list[str] = []
        self.lock = threading.Condition()
        self.sock.settimeout(None)
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        while True:
            try:
                chunk = self.sock.recv(65536)
            except OSError:
                return
            if not chunk:
                return
            self.buffer += chunk
            *done, self.buffer = self.buffer.split(b"\r\n")
            with self.lock:
                self.lines.extend(line.decode(errors="replace") for line in done)
                self.lock.notify_all()

    def _wait(self, found, start: int = 0, timeout: float = 10) -> int:
        """The index of the first line from `start` on that `found` accepts, once the
        stream has carried it."""
        with self.lock:
            scanned = start
            hit: list[int] = []

            def arrived() -> bool:
                nonlocal scanned
                for index in range(scanned, len(self.lines)):
                    if found(self.lines[index]):
                        hit.append(index)
                        return True
                scanned = len(self.lines)
                return False

            assert self.lock.wait_for(arrived, timeout), "not seen in MONITOR"
            return hit[0]

    async def mark(self) -> int:
        """A point in the stream after every command Redis ran before this call: an ECHO on
        a connection of its own, which MONITOR relays in the order Redis ran it. The stream
        reaches this thread later than Redis replies to the instances, so a count of the
        lines read so far could still be short of them."""
        token = f"mark-{uuid.uuid4().hex}"
        with socket.create_connection(("127.0.0.1", self.port), timeout=5) as other:
            other.sendall(f"ECHO {token}\r\n".encode())
            reply = b""
            while reply.count(b"\r\n") < 2:
                reply += other.recv(4096)
        return await asyncio.to_thread(self._wait, lambda line: token in line)

    async def wait_for(self, found, start: int) -> None:
        """Waits until a line after `start` is one `found` accepts."""
        await asyncio.to_thread(self._wait, found, start)

    def since(self, mark: int) -> list[str]:
        with self.lock:
            return self.lines[mark:]

    def close(self) -> None:
        self.sock.close()


def presence(line: str) -> bool:
    """A viewer-presence heartbeat: the renew function, and the expiry it sets on a viewer key."""
    return '"countdown_v3_renew"' in line or ('"PEXPIRE" "countdown:v:' in line)


@run_async
async def test_overtime_ticks_on_both_instances_without_redis_traffic(pair, redis, session_id):
    """Started on A with overtime, the session counts +0, +1, +2, +3 on A and on B, and in
    that window no command to Redis mentions the session; a message sent on B then does."""
    a, b = pair
    on_a = await Client.connect(a.ws_url(session_id), name="A")
    on_b = await Client.connect(b.ws_url(session_id), name="B")
    monitor = Monitor(redis.port)
    try:
        await on_a.command({"op": "start", "seconds": 1, "overtime": True})
        for client in (on_a, on_b):
            await client.wait_state(lambda s: s.get("phase") == "overtime", timeout=10)
        mark = await monitor.mark()
        for client in (on_a, on_b):
            await client.wait_state(lambda s: s.get("label") == "+3", timeout=10)
        end = await monitor.mark()
        # Viewer presence renews its keys on its own heartbeat, ticking or not (an idle
        # session's viewers do the same): that is not the session's state.
        quiet = [line for line in monitor.since(mark)[: end - mark]
                 if session_id in line and not presence(line)]
        assert quiet == [], quiet
        for client in (on_a, on_b):
            labels = [m["patch"]["label"] for _, m in client.log
                      if m["type"] == "patch" and "label" in m["patch"]]
            assert labels[-4:] == ["+0", "+1", "+2", "+3"], (client.name, labels)
            assert client.state["overSince"] == on_a.state["overSince"], client.state
        # The same stream does carry the session's commands: the test can see them.
        mark = await monitor.mark()
        await on_b.command({"op": "message", "text": "Wrap up"})
        await on_a.wait_state(lambda s: s.get("message") == "Wrap up", timeout=10)
        await monitor.wait_for(lambda line: session_id in line and not presence(line), mark)
    finally:
        monitor.close()
        await on_a.close()
        await on_b.close()
