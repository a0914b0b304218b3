"""The waiting phase over a real WebSocket: wait, then done, fail, cancel or the
timeout; the refusals; the timeout across a SIGKILL restart with SQLite; and on two
cluster instances sharing one redis-server."""

from __future__ import annotations

import asyncio
import shutil
import signal
import tempfile
import time
import uuid
from pathlib import Path

import pytest

from cdclient import Client, norm_state, now_ms, run_async, settle
from opskit import wait_event
from serverproc import start_server
from test_cluster import REDIS_SERVER, Redis


def sid() -> str:
    return "w" + uuid.uuid4().hex[:16]


@pytest.fixture
def data_dir():
    d = tempfile.mkdtemp(prefix="countdown-wait-")
    yield Path(d)
    shutil.rmtree(d, ignore_errors=True)


def assert_waiting(state: dict, label: str, timeout_s: int | None, before: float, after: float) -> None:
    state = norm_state(state)
    assert state["phase"] == "waiting", state
    assert state["spinner"] is True and state["enabled"] is False, state
    assert state["label"] == label, state
    assert state["remaining"] == 0 and state["duration"] == 0 and state["endsAt"] is None, state
    assert state["outcome"] is None, state
    assert before - 50 <= state["startedAt"] <= after + 50, (state, before, after)
    if timeout_s is None:
        assert state["timeoutAt"] is None, state
    else:
        assert state["timeoutAt"] == state["startedAt"] + timeout_s * 1000, state


@run_async
async def test_wait_then_done(server):
    c = await Client.connect(server.ws_url(sid()))
    watcher = await Client.connect(server.ws_url(c.snapshot["session"]))
    before = now_ms()
    patch, ack = await c.command({"op": "wait", "label": "Deploying", "timeoutSeconds": 900, "id": 1})
    after = now_ms()
    assert set(patch) >= {"phase", "spinner", "enabled", "label", "startedAt", "timeoutAt"}, patch
    assert_waiting(c.state, "Deploying", 900, before, after)
    seen = await watcher.wait_phase("waiting")
    assert seen["startedAt"] == c.state["startedAt"]
    patch, _ = await c.command({"op": "done", "label": "Deployed", "id": 2})
    assert patch["outcome"] == "done" and patch["phase"] == "finished", patch
    # Gone from the state: a merge patch's null.
    assert patch["startedAt"] is None and patch["timeoutAt"] is None, patch
    done = await watcher.wait_state(lambda s: s["outcome"] == "done")
    assert done["label"] == "Deployed" and done["spinner"] is False and done["enabled"] is True, done
    # The log says how it ended, as the page does.
    session = c.snapshot["session"]
    wait_event(server, "session_waiting", session=session)
    assert wait_event(server, "session_finished", session=session)["outcome"] == "done"
    await c.close()
    await watcher.close()


@run_async
async def test_wait_then_fail_with_default_labels(server):
    c = await Client.connect(server.ws_url(sid()))
    before = now_ms()
    await c.command({"op": "wait"})
    assert_waiting(c.state, "Waiting", None, before, now_ms())
    await c.command({"op": "fail"})
    assert c.state["phase"] == "finished" and c.state.get("outcome") == "failed", c.state
    assert c.state["label"] == "Failed", c.state
    # A new wait from finished, then a countdown's own end reads as elapsed.
    await c.command({"op": "wait", "label": "again"})
    await c.command({"op": "done"})
    assert c.state["label"] == "Done", c.state
    await c.command({"op": "start", "seconds": 1})
    assert c.state.get("outcome") is None
    finished = await c.wait_phase("finished", timeout=3)
    assert finished["outcome"] == "elapsed", finished
    await c.close()


@run_async
async def test_wait_times_out_at_timeout_at(server):
    c = await Client.connect(server.ws_url(sid()))
    await c.command({"op": "wait", "label": "Build", "timeoutSeconds": 1, "timeoutLabel": "Build timed out"})
    timeout_at = c.state["timeoutAt"]
    finished = await c.wait_phase("finished", timeout=3)
    arrived = now_ms()
    assert finished["outcome"] == "timeout" and finished["label"] == "Build timed out", finished
    assert arrived >= timeout_at - 50, (arrived, timeout_at)
    # A done after the timeout is too late.
    await c.expect_error({"op": "done", "id": 9}, "not_waiting", id=9)
    await c.close()


@run_async
async def test_cancel_while_waiting(server):
    c = await Client.connect(server.ws_url(sid()))
    await c.command({"op": "wait", "timeoutSeconds": 60})
    patch, _ = await c.command({"op": "cancel"})
    assert patch["phase"] == "idle" and patch["startedAt"] is None and patch["timeoutAt"] is None, patch
    assert c.state["label"] == "Ready" and c.state.get("outcome") is None, c.state
    await c.close()


@run_async
async def test_refusals(server):
    c = await Client.connect(server.ws_url(sid()))
    for op in ("done", "fail"):
        await c.expect_error({"op": op, "id": 1}, "not_waiting", id=1)
    await c.command({"op": "start", "seconds": 60})
    await c.expect_error({"op": "wait", "id": 2}, "busy", id=2)
    await c.expect_error({"op": "done", "id": 3}, "not_waiting", id=3)
    await c.command({"op": "pause"})
    await c.expect_error({"op": "wait", "id": 4}, "busy", id=4)
    await c.expect_error({"op": "fail", "id": 5}, "not_waiting", id=5)
    await c.command({"op": "cancel"})
    await c.command({"op": "wait", "timeoutSeconds": 600})
    for frame, code in (
        ({"op": "start", "seconds": 5}, "busy"),
        ({"op": "wait"}, "busy"),
        ({"op": "pause"}, "not_running"),
        ({"op": "adjust", "seconds": 60}, "not_running"),
        ({"op": "resume"}, "not_paused"),
    ):
        await c.expect_error({**frame, "id": 6}, code, id=6)
    # Bad values from a second controller, so that the first one's rate limit is not what answers.
    await c.close()
    c = await Client.connect(server.ws_url(c.snapshot["session"]))
    await settle(c)
    for frame in (
        {"op": "wait", "timeoutSeconds": 0},
        {"op": "done", "label": ""},
        {"op": "fail", "label": "a\u0000b"},
        {"op": "done", "label": "x" * 65},
        {"op": "done", "label": "x" * 4000},
        {"op": "done", "label": 5},
    ):
        await c.expect_error({**frame, "id": 7}, "bad_request", id=7)
    for literal in ("9223372036854775808", "-9223372036854775809", "1e400", "-0", "1.5", "86401"):
        await c.send('{"op":"wait","timeoutSeconds":%s,"id":8}' % literal)
        reply = await c.reply()
        assert reply["type"] == "error" and reply["code"] == "bad_request", (literal, reply)
    assert c.state["phase"] == "waiting", c.state
    await c.close()


@run_async
async def test_key_mode_only_the_controller_waits_and_ends_it():
    """With --control key, wait, done and fail from a viewer are forbidden; the host's work."""
    srv = start_server("--control", "key")
    try:
        session = sid()
        host = await Client.connect(srv.ws_url(session))
        viewer = await Client.connect(srv.ws_url(session))
        assert viewer.snapshot["role"] == "viewer"
        # No viewer-count patch still on its way, so the error is the next message.
        await settle(host, viewer)
        await viewer.expect_error({"op": "wait", "id": 1}, "forbidden", id=1)
        await host.command({"op": "wait", "label": "Deploying"})
        await viewer.wait_phase("waiting")
        for op in ("done", "fail", "cancel"):
            await viewer.expect_error({"op": op, "id": 2}, "forbidden", id=2)
        await host.command({"op": "fail", "label": "Deploy failed"})
        failed = await viewer.wait_state(lambda s: s["outcome"] == "failed")
        assert failed["label"] == "Deploy failed", failed
        await host.close()
        await viewer.close()
    finally:
        srv.stop_and_check()


def crash(srv) -> None:
    srv.proc.send_signal(signal.SIGKILL)
    srv.proc.wait(timeout=5)


@run_async
async def test_timeout_survives_kill_9(data_dir):
    """A wait survives SIGKILL with SQLite: still waiting after the restart, with the
    original startedAt and timeoutAt, and it times out then."""
    data = data_dir / "countdown.db"
    srv = start_server("--data", str(data))
    session = sid()
    c = await Client.connect(srv.ws_url(session))
    await c.command({"op": "wait", "label": "Deploying", "timeoutSeconds": 3, "timeoutLabel": "Too slow"})
    started, timeout_at = c.state["startedAt"], c.state["timeoutAt"]
    crash(srv)
    srv2 = start_server("--port", str(srv.port), "--data", str(data))
    try:
        back = await Client.connect(srv2.ws_url(session))
        state = back.state
        assert state["phase"] == "waiting" and state["label"] == "Deploying", state
        assert (state["startedAt"], state["timeoutAt"]) == (started, timeout_at), state
        finished = await back.wait_phase("finished", timeout=6)
        assert now_ms() >= timeout_at - 50
        assert finished["outcome"] == "timeout" and finished["label"] == "Too slow", finished
        await back.close()
    finally:
        srv2.stop_and_check()


@run_async
async def test_timeout_passed_while_down_is_finished(data_dir):
    """A wait whose timeoutAt passed while the server was down comes back finished,
    timed out: the restarted server's clock runs 10 s ahead (--test-clock-offset-ms),
    as if it had been down that long."""
    data = data_dir / "countdown.db"
    srv = start_server("--data", str(data))
    session = sid()
    c = await Client.connect(srv.ws_url(session))
    await c.command({"op": "wait", "timeoutSeconds": 5})
    crash(srv)
    srv2 = start_server("--port", str(srv.port), "--data", str(data), "--test-clock-offset-ms", "10000")
    try:
        back = await Client.connect(srv2.ws_url(session))
        state = back.state
        assert state["phase"] == "finished" and state["outcome"] == "timeout", state
        assert state["label"] == "Timed out" and state["startedAt"] is None, state
        await back.close()
    finally:
        srv2.stop_and_check()


@pytest.fixture
def cluster_pair():
    if not Path(REDIS_SERVER).exists():
        pytest.skip("redis-server is not installed")
    redis = Redis()
    servers = [start_server("--redis", redis.url) for _ in range(2)]
    yield servers
    for server in servers:
        server.stop_and_check()
    redis.stop()


@run_async
async def test_two_instances_wait_and_time_out_together(cluster_pair):
    """A wait made on one instance shows on the other with the same times, both finish
    at the shared timeoutAt, and a done sent to the other instance ends the next one."""
    a, b = cluster_pair
    session = sid()
    va = await Client.connect(a.ws_url(session), name="A")
    vb = await Client.connect(b.ws_url(session), name="B")
    await va.command({"op": "wait", "label": "CI", "timeoutSeconds": 2})
    seen = await vb.wait_phase("waiting")
    assert (seen["startedAt"], seen["timeoutAt"], seen["label"]) == (
        va.state["startedAt"], va.state["timeoutAt"], "CI"), (seen, va.state)
    timeout_at = va.state["timeoutAt"]
    ends = await asyncio.gather(va.wait_phase("finished", timeout=5), vb.wait_phase("finished", timeout=5))
    for end in ends:
        assert end["outcome"] == "timeout" and end["label"] == "Timed out", end
    assert now_ms() >= timeout_at - 50
    # A wait ended from the other instance (a new session: Redis's clock, which
    # orders commands, may be a few ms behind the instance that showed the timeout),
    # and the first instance refuses a fail once that done has applied.
    await va.close()
    await vb.close()
    session = sid()
    va = await Client.connect(a.ws_url(session), name="A")
    vb = await Client.connect(b.ws_url(session), name="B")
    await va.command({"op": "wait", "timeoutSeconds": 60})
    await vb.wait_phase("waiting")
    patch, _ = await vb.command({"op": "done", "label": "Green"})
    assert patch["outcome"] == "done"
    done = await va.wait_state(lambda s: s["outcome"] == "done")
    assert done["label"] == "Green", done
    await va.send({"op": "fail", "id": 3})
    refused = await va.reply()
    assert refused["type"] == "error" and refused["code"] == "not_waiting", refused
    await va.close()
    await vb.close()
