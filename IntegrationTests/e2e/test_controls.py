"""End-to-end tests of pause, resume, adjust and `start` with `until`, against the built
binary with Python websockets: the rules of issue 9 as a client meets them."""

from __future__ import annotations

import asyncio
import resource

from cdclient import Client, now_ms, run_async, settle
from serverproc import start_server

TOLERANCE_MS = 50


async def error_for(c: Client, frame: dict, code: str) -> dict:
    await c.send(frame)
    msg = await c.reply()
    assert msg["type"] == "error" and msg["code"] == code, (frame, msg)
    if "id" in frame:
        assert msg["id"] == frame["id"], (frame, msg)
    return msg


@run_async
async def test_pause_wait_resume_keeps_the_frozen_time(server, session_id):
    """Pause freezes remainingMs; after 2 s, resume sets endsAt = resume time + the frozen
    remainingMs (within 50 ms), for the commander and a second viewer alike."""
    a = await Client.connect(server.ws_url(session_id), name="A")
    b = await Client.connect(server.ws_url(session_id), name="B")
    await settle(a, b)
    await a.command({"op": "start", "seconds": 30, "id": 1})
    await a.wait_state(lambda s: s["remaining"] <= 29, 3, "first tick")
    patch, _ = await a.command({"op": "pause", "id": 2})
    paused_at = now_ms()
    assert patch["phase"] == "paused" and patch["spinner"] is False and patch["enabled"] is True
    assert patch["endsAt"] is None
    frozen = patch["remainingMs"]
    assert 27_000 < frozen < 29_100, patch
    state = await b.wait_phase("paused")
    assert state["remainingMs"] == frozen
    # Nothing ticks while paused: no message arrives for B for 2 s.
    seq = b.seq
    try:
        msg = await b.recv(2.0)
        raise AssertionError(f"a paused session sent {msg}")
    except AssertionError as e:
        if "no message within" not in str(e):
            raise
    assert b.seq == seq
    before = now_ms()
    patch, _ = await b.command({"op": "resume", "id": 3})
    after = now_ms()
    assert now_ms() - paused_at >= 2000
    assert patch["phase"] == "running" and patch["remainingMs"] is None
    assert before + frozen - TOLERANCE_MS <= patch["endsAt"] <= after + frozen + TOLERANCE_MS, (
        before, after, frozen, patch)
    await a.wait_state(lambda s: s["endsAt"] == patch["endsAt"])
    for c in (a, b):
        await c.close()


@run_async
async def test_adjust_while_running_and_paused(server, session_id):
    """+60 s while running moves endsAt and duration by exactly 60 000 ms with the new
    remaining at once; -30 s while paused moves remainingMs by 30 000."""
    a = await Client.connect(server.ws_url(session_id))
    await settle(a)
    start, _ = await a.command({"op": "start", "seconds": 100})
    patch, _ = await a.command({"op": "adjust", "seconds": 60})
    assert patch["endsAt"] == start["endsAt"] + 60_000
    assert patch["duration"] == 160
    assert a.state["remaining"] in (159, 160), a.state
    assert "remaining" in patch and "label" in patch
    paused, _ = await a.command({"op": "pause"})
    patch, _ = await a.command({"op": "adjust", "seconds": -30})
    assert patch["remainingMs"] == paused["remainingMs"] - 30_000
    assert a.state["phase"] == "paused" and a.state["duration"] == 130
    await a.close()


@run_async
async def test_adjust_to_zero_finishes(server, session_id):
    """An adjust that leaves nothing finishes the run at once, with the normal finish patch."""
    a = await Client.connect(server.ws_url(session_id))
    await settle(a)
    await a.command({"op": "start", "seconds": 20, "finishedLabel": "done"})
    patch, _ = await a.command({"op": "adjust", "seconds": -20})
    assert patch["phase"] == "finished" and patch["label"] == "done" and patch["endsAt"] is None
    await a.command({"op": "start", "seconds": 20})
    await a.command({"op": "pause"})
    patch, _ = await a.command({"op": "adjust", "seconds": -3600})
    assert patch["phase"] == "finished" and a.state.get("remainingMs") is None
    await a.close()


@run_async
async def test_start_until_has_exactly_that_deadline(server, session_id):
    """`start` with `until` runs to exactly that epoch ms; out of range or with seconds too is bad_request."""
    a = await Client.connect(server.ws_url(session_id))
    await settle(a)
    until = int(now_ms()) + 3_725_000
    patch, _ = await a.command({"op": "start", "until": until})
    assert patch["endsAt"] == until
    assert patch["remaining"] in (3724, 3725) and patch["duration"] == patch["remaining"]
    await a.command({"op": "cancel"})
    await error_for(a, {"op": "start", "until": int(now_ms()) + 500, "id": 1}, "bad_request")
    await error_for(a, {"op": "start", "until": int(now_ms()) + 31 * 86_400_000, "id": 2}, "bad_request")
    await error_for(a, {"op": "start", "until": until, "seconds": 5, "id": 3}, "bad_request")
    await error_for(a, {"op": "start", "until": "soon", "id": 4}, "bad_request")
    await a.close()


@run_async
async def test_each_error_code_of_the_new_commands(server, session_id):
    """not_running, not_paused, busy, and bad_request for every malformed adjust; cancel
    while paused goes back to idle."""
    a = await Client.connect(server.ws_url(session_id))
    await settle(a)
    await error_for(a, {"op": "pause", "id": 1}, "not_running")
    await error_for(a, {"op": "adjust", "seconds": 5, "id": 2}, "not_running")
    await error_for(a, {"op": "resume", "id": 3}, "not_paused")
    await a.command({"op": "start", "seconds": 60})
    await error_for(a, {"op": "resume", "id": 4}, "not_paused")
    for bad in ("5", 5.5, None, 0, 86_401, -86_401, True):
        await error_for(a, {"op": "adjust", "seconds": bad, "id": 5}, "bad_request")
    await error_for(a, {"op": "adjust", "id": 6}, "bad_request")
    await a.command({"op": "pause"})
    await error_for(a, {"op": "start", "seconds": 5, "id": 7}, "busy")
    await error_for(a, {"op": "pause", "id": 8}, "not_running")
    patch, _ = await a.command({"op": "cancel"})
    assert patch["phase"] == "idle" and a.state.get("remainingMs") is None
    await a.close()


@run_async
async def test_joining_while_paused_shows_the_frozen_value(server, session_id):
    """A viewer that joins a paused session gets a snapshot with the frozen remainingMs, and
    it does not change while it watches."""
    a = await Client.connect(server.ws_url(session_id))
    await settle(a)
    await a.command({"op": "start", "seconds": 90})
    paused, _ = await a.command({"op": "pause"})
    late = await Client.connect(server.ws_url(session_id), name="late")
    assert late.snapshot["state"]["phase"] == "paused"
    assert late.snapshot["state"]["remainingMs"] == paused["remainingMs"]
    assert late.snapshot["state"]["endsAt"] is None
    assert late.snapshot["state"]["label"] == str(late.snapshot["state"]["remaining"])
    for c in (a, late):
        await c.close()


@run_async
async def test_key_mode_guards_the_new_commands(session_id):
    """With --control key, a viewer's pause, resume and adjust are forbidden; the controller's work."""
    srv = start_server("--control", "key")
    try:
        owner = await Client.connect(srv.ws_url(session_id), name="owner")
        key = owner.snapshot["key"]
        viewer = await Client.connect(srv.ws_url(session_id), name="viewer")
        assert viewer.snapshot["role"] == "viewer"
        await settle(owner, viewer)
        await owner.command({"op": "start", "seconds": 60})
        for op in ({"op": "pause"}, {"op": "resume"}, {"op": "adjust", "seconds": 60}):
            await error_for(viewer, {**op, "id": 9}, "forbidden")
        await owner.command({"op": "pause"})
        second = await Client.connect(srv.ws_url(session_id) + f"?key={key}", name="second")
        assert second.snapshot["role"] == "controller"
        await second.command({"op": "adjust", "seconds": 60})
        await second.command({"op": "resume"})
        for c in (owner, viewer, second):
            await c.close()
    finally:
        srv.stop_and_check()


@run_async
async def test_two_thousand_viewers_from_one_address_join(session_id):
    """With default flags, 2,000 viewers from one address (an audience behind one NAT) all join."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < 2200:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 4096), hard))
    srv = start_server()
    clients: list[Client] = []
    try:
        url = srv.ws_url(session_id)
        for batch in range(20):
            clients += await asyncio.gather(*(Client.connect(url, timeout=20) for _ in range(100)))
        assert len(clients) == 2000
        last = clients[-1]
        await last.wait_viewers(2000, timeout=10)
    finally:
        await asyncio.gather(*(c.close() for c in clients), return_exceptions=True)
        srv.stop_and_check()
