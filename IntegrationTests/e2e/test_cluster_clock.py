"""One clock in a cluster: an instance whose own clock is off (--test-clock-offset-ms)
still ticks, finishes and stamps serverTime on Redis's clock, like the others.

Redis runs on this host, so Redis's clock is this test's clock too."""

from __future__ import annotations

import asyncio
import json
import statistics
import subprocess
from pathlib import Path

import pytest
from websockets.asyncio.client import connect as ws_connect

from cdclient import SUBPROTOCOL, Client, now_ms, run_async
from serverproc import PUBLIC_DIR, server_binary, start_server
from test_cluster import REDIS_SERVER, Redis

pytestmark = pytest.mark.skipif(not Path(REDIS_SERVER).exists(), reason="redis-server is not installed")

OFFSET_MS = 3000
# One frame at 60 Hz.
FRAME_MS = 17


@pytest.fixture
def skewed_pair():
    """Two instances on one redis-server, the second with its clock 3 s ahead."""
    redis = Redis()
    servers = [start_server("--redis", redis.url),
               start_server("--redis", redis.url, "--test-clock-offset-ms", str(OFFSET_MS))]
    yield servers
    for server in servers:
        server.stop_and_check()
    redis.stop()


async def clock_offset(server, session: str) -> float:
    """The server's serverTime minus this host's clock (ms), from the pings with the
    shortest round trip: the server read its clock within that round trip."""
    async with ws_connect(server.ws_url(session), subprotocols=[SUBPROTOCOL], proxy=None) as ws:
        assert json.loads(await asyncio.wait_for(ws.recv(), 5))["type"] == "snapshot"
        samples = []
        for n in range(10):
            sent = now_ms()
            await ws.send(json.dumps({"op": "ping", "t": n}))
            while True:
                message = json.loads(await asyncio.wait_for(ws.recv(), 5))
                if message["type"] == "pong":
                    break
            answered = now_ms()
            assert message["t"] == n, message
            samples.append((answered - sent, message["serverTime"] - (sent + answered) / 2))
        round_trip, offset = min(samples)
        return offset


async def finished_at(client: Client) -> float:
    """This host's time when the client's view turned finished."""
    await client.wait_phase("finished", timeout=10)
    return next(arrival for arrival, m in reversed(client.log)
                if m["type"] == "patch" and m["patch"].get("phase") == "finished")


@run_async
async def test_an_instance_with_its_clock_3s_off_stamps_and_finishes_on_redis_time(skewed_pair,
                                                                                   session_id):
    a, b = skewed_pair
    # serverTime: both instances agree with each other, and with Redis's (this host's) clock.
    offsets = [await clock_offset(server, f"{session_id}-ping") for server in (a, b)]
    assert abs(offsets[0] - offsets[1]) <= FRAME_MS, offsets
    for offset in offsets:
        assert abs(offset) <= FRAME_MS, offsets
    # A countdown started on either instance finishes on both within a frame of each other,
    # and at its endsAt, never early (the instance 3 s ahead would finish 3 s early).
    for starter in (0, 1):
        sid = f"{session_id}-{starter}"
        viewers = [await Client.connect(server.ws_url(sid), name=name)
                   for server, name in ((a, "A"), (b, "B+3s"))]
        await viewers[starter].command({"op": "start", "seconds": 3, "id": 1})
        ends_at = viewers[starter].state["endsAt"]
        assert abs(ends_at - (now_ms() + 3000)) < 500, ends_at
        times = await asyncio.gather(*(finished_at(v) for v in viewers))
        # Within a frame of each other, beyond how far apart the two instances' ticks of
        # the same second arrive here (this machine's own noise, this one process reading
        # both): the instance 3 s ahead would be 3000 ms off.
        ticks = [{m["patch"]["remaining"]: arrival for arrival, m in v.log
                  if m["type"] == "patch" and "remaining" in m["patch"] and "phase" not in m["patch"]}
                 for v in viewers]
        noise = statistics.median(abs(ticks[0][k] - ticks[1][k]) for k in ticks[0].keys() & ticks[1].keys())
        assert abs(times[0] - times[1]) <= FRAME_MS + noise, (times, ends_at, noise)
        for t in times:
            assert ends_at - FRAME_MS <= t <= ends_at + 100, (times, ends_at)
        # Ticks were on Redis's clock too: each "remaining" patch came at endsAt - remaining s.
        for v in viewers:
            for arrival, m in v.log:
                left = m.get("patch", {}).get("remaining") if m["type"] == "patch" else None
                if left is not None and m["patch"].get("phase") is None:
                    due = ends_at - left * 1000
                    assert due - FRAME_MS <= arrival <= due + 100, (v.name, left, arrival, due)
        for v in viewers:
            await v.close()


def test_the_offset_flag_is_test_only_and_bounded():
    """The flag shifts the clock by whole milliseconds within a day, and refuses past it."""
    for value in ("86400001", "-86400001", "1e3", "", "9223372036854775808"):
        done = subprocess.run([str(server_binary()), "--port", "0", "--public", str(PUBLIC_DIR),
                               "--test-clock-offset-ms", value], capture_output=True, text=True, timeout=10)
        assert done.returncode == 2, (value, done)
        assert "--test-clock-offset-ms" in done.stderr, done.stderr
    shown = subprocess.run([str(server_binary()), "--test-clock-offset-ms", "-250", "--print-config"],
                           capture_output=True, text=True, timeout=10)
    assert shown.returncode == 0 and "-250" in shown.stdout, shown
