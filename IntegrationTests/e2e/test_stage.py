"""Issue 20 on one instance over a real WebSocket: warning and danger levels in the tick
patch of their moment, overtime counting up from `overSince`, `stop` and `overMs`, the
presenter message and the blackout, the controller gate in key mode, all of it durable
across a restart with SQLite, and the bad values at their edges."""

from __future__ import annotations

import asyncio
import json
import shutil
import tempfile
import uuid
from pathlib import Path

import pytest

from cdclient import Client, norm_state, now_ms, run_async
from serverproc import start_server
from test_cluster_clock import clock_offset

#: One frame at 60 Hz: how much later than the plain ticks a level tick may arrive.
FRAME_MS = 1000 / 60


def sid(prefix: str = "s") -> str:
    return prefix + uuid.uuid4().hex[:16]


@pytest.fixture(scope="module")
def stage():
    """A server whose rate limit does not answer for the bad-value tests' many commands."""
    srv = start_server("--max-commands-per-second", "1000")
    yield srv
    srv.stop_and_check()


@pytest.fixture
def data_dir():
    d = tempfile.mkdtemp(prefix="countdown-stage-")
    yield Path(d)
    shutil.rmtree(d, ignore_errors=True)


def patch_arrivals(c: Client, since: int) -> list[tuple[float, dict]]:
    """(local arrival ms, patch) of every patch at or after the log index `since`."""
    return [(t, m["patch"]) for t, m in c.log[since:] if m["type"] == "patch"]


async def changed(c: Client, cmd: dict) -> dict:
    """What the command changed in the client's state, less the viewer count: a patch may
    carry unchanged fields and the viewer count along (docs/protocol.md)."""
    before = norm_state(c.state)
    await c.command(cmd)
    after = norm_state(c.state)
    return {k: v for k, v in after.items() if k != "viewers" and before.get(k) != v}


def over_label(seconds: int) -> str:
    """The overtime label the contract spells: +0 … +59, +1:00 … +59:59, +1:00:00."""
    h, m, s = seconds // 3600, seconds % 3600 // 60, seconds % 60
    if seconds < 60:
        return f"+{s}"
    if seconds < 3600:
        return f"+{m}:{s:02d}"
    return f"+{h}:{m:02d}:{s:02d}"


# -- levels ---------------------------------------------------------------------------------
@run_async
async def test_levels_turn_in_the_tick_patch_of_their_moment(stage):
    """The patch that first says warning is the tick showing warnAtSeconds, the one that
    first says danger the tick showing dangerAtSeconds; each arrives (in the server's clock)
    no earlier than its moment and at most a frame later than the plain ticks arrive late."""
    offset = await clock_offset(stage, sid("clock"))
    c = await Client.connect(stage.ws_url(sid()))
    mark = len(c.log)
    await c.command({"op": "start", "seconds": 6, "warnAtSeconds": 4, "dangerAtSeconds": 2})
    assert c.state["warnAtSeconds"] == 4 and c.state["dangerAtSeconds"] == 2, c.state
    assert c.state["overtime"] is False and c.state["level"] == "normal", c.state
    ends_at = c.state["endsAt"]
    await c.wait_phase("finished", timeout=10)
    ticks = [(t + offset, p) for t, p in patch_arrivals(c, mark) if "remaining" in p and p.get("phase") is None]
    by_remaining = {p["remaining"]: (t, p) for t, p in ticks}
    assert set(by_remaining) >= {5, 4, 3, 2, 1}, ticks
    firsts = {}
    for t, p in ticks:
        if "level" in p and p["level"] not in firsts:
            firsts[p["level"]] = (t, p)
    assert firsts["warning"][1]["remaining"] == 4, ticks
    assert firsts["danger"][1]["remaining"] == 2, ticks
    # Nothing says warning before its tick, nor danger before its own.
    assert all(p.get("level") in (None, "normal") for _, p in ticks if p["remaining"] > 4), ticks
    assert by_remaining[3][1].get("level") in (None, "warning"), ticks
    lateness = {r: t - (ends_at - r * 1000) for r, (t, _) in by_remaining.items()}
    plain = max(lateness[r] for r in (5, 3, 1))
    for level, r in (("warning", 4), ("danger", 2)):
        assert lateness[r] >= -2, f"{level} patch came {-lateness[r]:.1f} ms early: {lateness}"
        assert lateness[r] <= plain + FRAME_MS, f"{level} patch {lateness[r]:.1f} ms late, ticks {lateness}"
    # Finished: back to normal, the run's options gone.
    s = norm_state(c.state)
    assert s["level"] == "normal" and s["warnAtSeconds"] is None and s["dangerAtSeconds"] is None, s
    await c.close()


@run_async
async def test_a_late_joiner_and_a_pause_keep_the_level(stage):
    """A snapshot taken in the warning stretch says warning; a pause keeps the level and
    a resume carries on; an adjust out of the stretch turns it back to normal in its patch."""
    c = await Client.connect(stage.ws_url(sid()))
    await c.command({"op": "start", "seconds": 3, "warnAtSeconds": 2})
    await c.wait_state(lambda s: s["level"] == "warning", timeout=3)
    late = await Client.connect(stage.ws_url(c.snapshot["session"]))
    assert late.snapshot["state"]["level"] == "warning", late.snapshot
    assert late.snapshot["state"]["dangerAtSeconds"] is None, late.snapshot
    patch, _ = await c.command({"op": "pause"})
    assert c.state["level"] == "warning" and patch.get("level", "warning") == "warning", patch
    patch, _ = await c.command({"op": "adjust", "seconds": 60})
    assert patch["level"] == "normal", patch
    patch, _ = await c.command({"op": "adjust", "seconds": -60})
    assert patch["level"] == "warning", patch
    await c.command({"op": "cancel"})
    assert c.state["level"] == "normal" and c.state.get("warnAtSeconds") is None, c.state
    for x in (c, late):
        await x.close()


# -- overtime -------------------------------------------------------------------------------
@run_async
async def test_overtime_counts_up_from_over_since(stage):
    """At zero the phase becomes overtime with overSince at the deadline and the spinner
    on; the label counts +0, +1, +2, each tick no earlier than overSince + k s; stop
    finishes it as stopped with the time over in overMs."""
    offset = await clock_offset(stage, sid("clock"))
    c = await Client.connect(stage.ws_url(sid()))
    viewer = await Client.connect(stage.ws_url(c.snapshot["session"]))
    await c.command({"op": "start", "seconds": 1, "overtime": True, "finishedLabel": "Time!"})
    assert c.state["overtime"] is True, c.state
    ends_at = c.state["endsAt"]
    mark = len(c.log)
    over = await c.wait_phase("overtime", timeout=3)
    assert over["overSince"] == ends_at and over["endsAt"] is None, over
    assert over["spinner"] is True and over["enabled"] is False and over["remaining"] == 0, over
    assert over["level"] == "over" and over["outcome"] is None, over
    await c.wait_state(lambda s: s["label"] == "+2", timeout=4)
    labels = [(t + offset, p["label"]) for t, p in patch_arrivals(c, mark) if "label" in p]
    assert [label for _, label in labels] == ["+0", "+1", "+2"], labels
    for k, (t, label) in enumerate(labels):
        assert t >= ends_at + k * 1000 - 2, f"{label} came {ends_at + k * 1000 - t:.1f} ms early"
    seen = await viewer.wait_state(lambda s: s["label"] == "+2")
    assert seen["overSince"] == ends_at, seen
    before = now_ms() + offset
    patch, _ = await c.command({"op": "stop"})
    after = now_ms() + offset
    assert patch["phase"] == "finished" and patch["outcome"] == "stopped", patch
    s = norm_state(c.state)
    assert before - ends_at - 5 <= s["overMs"] <= after - ends_at + 5, (s, before, after)
    assert s["overMs"] >= 2000 and s["label"] == "Time!" and s["spinner"] is False, s
    assert s["overSince"] is None and s["overtime"] is False and s["level"] == "normal", s
    stopped = await viewer.wait_state(lambda s: s["outcome"] == "stopped")
    assert stopped["overMs"] == s["overMs"], stopped
    # A new start forgets the time over.
    await c.command({"op": "start", "seconds": 60})
    assert norm_state(c.state)["overMs"] is None, c.state
    for x in (c, viewer):
        await x.close()


@run_async
async def test_adjust_in_overtime_moves_the_deadline(stage):
    """adjust in overtime moves overSince: back past now it counts again (clock style past
    a minute and an hour); forward past now it runs again; more than a day over is refused;
    pause, resume, start, wait, done answer as the contract says."""
    c = await Client.connect(stage.ws_url(sid()))
    await c.command({"op": "start", "seconds": 1, "overtime": True})
    first = (await c.wait_phase("overtime", timeout=3))["overSince"]
    patch, _ = await c.command({"op": "adjust", "seconds": -65})
    assert patch["overSince"] == first - 65_000 and patch.get("phase", "overtime") == "overtime", patch
    assert c.state["phase"] == "overtime" and c.state["label"] in (over_label(65), over_label(66)), c.state
    await c.command({"op": "adjust", "seconds": -3600})
    assert c.state["label"] in (over_label(3665), over_label(3666)), c.state
    await c.expect_error({"op": "adjust", "seconds": -86400, "id": 1}, "bad_request", id=1)
    for frame, code in (({"op": "pause"}, "not_running"), ({"op": "resume"}, "not_paused"),
                        ({"op": "start", "seconds": 5}, "busy"), ({"op": "wait"}, "busy"),
                        ({"op": "done"}, "not_waiting"), ({"op": "fail"}, "not_waiting")):
        await c.expect_error({**frame, "id": 2}, code, id=2)
    patch, _ = await c.command({"op": "adjust", "seconds": 3700})
    s = norm_state(c.state)
    assert s["phase"] == "running" and s["endsAt"] == first - 65_000 - 3_600_000 + 3_700_000, s
    assert s["overSince"] is None and s["level"] == "normal" and 1 <= s["remaining"] <= 35, s
    # An adjust to below zero of an overtime run goes into overtime with the rest over.
    at = now_ms()
    await c.command({"op": "adjust", "seconds": -(s["remaining"] + 10)})
    s = norm_state(c.state)
    assert s["phase"] == "overtime" and s["label"] in ("+10", "+11"), s
    assert abs(s["overSince"] - (at - 10_000)) < 1500, (s, at)
    # cancel in overtime: idle.
    await c.command({"op": "cancel"})
    s = norm_state(c.state)
    assert s["phase"] == "idle" and s["overSince"] is None and s["overtime"] is False, s
    await c.close()


@run_async
async def test_stop_and_where_it_is_refused(stage):
    """stop while running or paused finishes stopped with overMs 0 and the server's finish
    text; idle, waiting and finished sessions answer not_running; without overtime a run
    still finishes elapsed at zero."""
    c = await Client.connect(stage.ws_url(sid()))
    await c.expect_error({"op": "stop", "id": 1}, "not_running", id=1)
    await c.command({"op": "start", "seconds": 60})
    patch, _ = await c.command({"op": "stop"})
    assert patch["outcome"] == "stopped" and patch["overMs"] == 0, patch
    assert c.state["label"] == "Countdown finished", c.state
    await c.expect_error({"op": "stop", "id": 2}, "not_running", id=2)
    await c.command({"op": "start", "seconds": 60, "overtime": True})
    await c.command({"op": "pause"})
    patch, _ = await c.command({"op": "stop"})
    assert patch["outcome"] == "stopped" and patch["overMs"] == 0, patch
    await c.command({"op": "wait"})
    await c.expect_error({"op": "stop", "id": 3}, "not_running", id=3)
    await c.command({"op": "cancel"})
    await c.command({"op": "start", "seconds": 1})
    done = await c.wait_phase("finished", timeout=3)
    assert done["outcome"] == "elapsed" and done["overMs"] is None, done
    await c.close()


# -- message and blackout -------------------------------------------------------------------
@run_async
async def test_message_and_blackout_set_clear_and_outlive_runs(stage):
    """message and blackout reach every viewer in one patch each, in any phase; start,
    cancel and a finish keep them; text null and on false clear them."""
    c = await Client.connect(stage.ws_url(sid()))
    assert c.snapshot["state"]["message"] is None and c.snapshot["state"]["blackout"] is False
    viewer = await Client.connect(stage.ws_url(c.snapshot["session"]))
    assert await changed(c, {"op": "message", "text": "Wrap up"}) == {"message": "Wrap up"}
    assert await changed(c, {"op": "blackout", "on": True}) == {"blackout": True}
    seen = await viewer.wait_state(lambda s: s["blackout"] is True)
    assert seen["message"] == "Wrap up", seen
    await c.command({"op": "start", "seconds": 1})
    await c.wait_phase("finished", timeout=3)
    await c.command({"op": "wait"})
    await c.command({"op": "cancel"})
    assert c.state["message"] == "Wrap up" and c.state["blackout"] is True, c.state
    # 140 scalars of four UTF-8 bytes each, and text that is not ASCII, are messages.
    longest = "\U0001F600" * 140
    assert await changed(c, {"op": "message", "text": longest}) == {"message": longest}
    assert await changed(c, {"op": "message", "text": "Fragen? 質問"}) == {"message": "Fragen? 質問"}
    assert await changed(c, {"op": "message", "text": None}) == {"message": None}
    assert await changed(c, {"op": "blackout", "on": False}) == {"blackout": False}
    seen = await viewer.wait_state(lambda s: s["blackout"] is False and s["message"] is None)
    late = await Client.connect(stage.ws_url(c.snapshot["session"]))
    assert late.snapshot["state"]["message"] is None and late.snapshot["state"]["blackout"] is False
    for x in (c, viewer, late):
        await x.close()


@run_async
async def test_key_mode_viewers_cannot_stop_message_or_blackout():
    """With --control key a viewer's stop, message and blackout are forbidden and change
    nothing; the controller's are applied."""
    srv = start_server("--control", "key")
    try:
        host = await Client.connect(srv.ws_url(sid()))
        viewer = await Client.connect(srv.ws_url(host.snapshot["session"]))
        assert viewer.snapshot["role"] == "viewer"
        await host.command({"op": "start", "seconds": 60, "overtime": True, "warnAtSeconds": 30})
        await viewer.wait_seq(host.seq)
        for n, frame in enumerate(({"op": "stop"}, {"op": "message", "text": "hi"},
                                   {"op": "blackout", "on": True},
                                   {"op": "start", "seconds": 5, "overtime": True})):
            await viewer.expect_error({**frame, "id": n}, "forbidden", id=n)
        s = norm_state(viewer.state)
        assert s["phase"] == "running" and s["message"] is None and s["blackout"] is False, s
        await host.command({"op": "message", "text": "hi"})
        await host.command({"op": "blackout", "on": True})
        await host.command({"op": "stop"})
        s = await viewer.wait_state(lambda s: s["outcome"] == "stopped")
        assert s["message"] == "hi" and s["blackout"] is True, s
        for x in (host, viewer):
            await x.close()
    finally:
        srv.stop_and_check()


# -- durability -----------------------------------------------------------------------------
@run_async
async def test_overtime_message_and_blackout_survive_a_restart(data_dir):
    """With --data, SIGTERM and a restart: overtime comes back counting from the same
    overSince (a label that agrees with the time since it), the run's levels, the message
    and the blackout as they were; then a SIGKILL and restart keeps a stopped finish."""
    data = data_dir / "countdown.db"
    srv = start_server("--data", str(data))
    session = sid("dur")
    c = await Client.connect(srv.ws_url(session))
    await c.command({"op": "message", "text": "Take questions"})
    await c.command({"op": "blackout", "on": True})
    await c.command({"op": "start", "seconds": 1, "overtime": True, "warnAtSeconds": 60,
                     "dangerAtSeconds": 30})
    over_since = (await c.wait_phase("overtime", timeout=3))["overSince"]
    await c.close()
    srv.stop_and_check()
    srv = start_server("--port", str(srv.port), "--data", str(data))
    try:
        back = await Client.connect(srv.ws_url(session))
        s = norm_state(back.snapshot["state"])
        served = back.snapshot["serverTime"]
        assert s["phase"] == "overtime" and s["overSince"] == over_since and s["level"] == "over", s
        over = (served - over_since) // 1000
        assert s["label"] in (over_label(over), over_label(over - 1)), (s, served)
        assert s["message"] == "Take questions" and s["blackout"] is True, s
        assert s["overtime"] is True and s["warnAtSeconds"] == 60 and s["dangerAtSeconds"] == 30, s
        shown = int(s["label"][1:])
        await back.wait_state(lambda x: x["label"] == f"+{shown + 1}", timeout=3)
        await back.command({"op": "stop"})
        over_ms = back.state["overMs"]
        await back.close()
        srv.proc.kill()
        srv.proc.wait(timeout=5)
        srv = start_server("--port", str(srv.port), "--data", str(data))
        again = await Client.connect(srv.ws_url(session))
        s = norm_state(again.snapshot["state"])
        assert s["outcome"] == "stopped" and s["overMs"] == over_ms, s
        assert s["message"] == "Take questions" and s["blackout"] is True, s
        await again.close()
    finally:
        srv.stop_and_check()


@run_async
async def test_overtime_passed_while_down_is_still_overtime(data_dir):
    """A run with overtime whose deadline passes while the server is down comes back in
    overtime (not finished) with overSince at the deadline."""
    data = data_dir / "countdown.db"
    srv = start_server("--data", str(data))
    session = sid("down")
    c = await Client.connect(srv.ws_url(session))
    await c.command({"op": "start", "seconds": 1, "overtime": True})
    ends_at = c.state["endsAt"]
    await c.close()
    srv.proc.kill()
    srv.proc.wait(timeout=5)
    while now_ms() < ends_at + 300:
        await asyncio.sleep((ends_at + 300 - now_ms()) / 1000)
    srv = start_server("--port", str(srv.port), "--data", str(data))
    try:
        back = await Client.connect(srv.ws_url(session))
        s = norm_state(back.snapshot["state"])
        assert s["phase"] == "overtime" and s["overSince"] == ends_at, s
        await back.close()
    finally:
        srv.stop_and_check()


# -- bad values -----------------------------------------------------------------------------
RAW_NUMBERS = ["9223372036854775808", "-9223372036854775809", "18446744073709551616", "1e400", "1e308",
               "5.5", "-0", "0", "86401", "-1", "null", '"5"', "true"]


@run_async
async def test_bad_values_are_refused_at_the_edges(stage):
    """Every bad start option, message text and blackout flag is bad_request and changes
    nothing: ±2^63, 2^64, 1e400, 1e308, -0, a fraction, a string, null; danger not below
    warn; a message that is absent, empty, 141 scalars, 4 KB, with NUL or another control
    character, or not a string; on that is not a bool."""
    c = await Client.connect(stage.ws_url(sid()))
    frames: list[str] = []
    for field in ("warnAtSeconds", "dangerAtSeconds"):
        frames += [f'{{"op":"start","seconds":60,"{field}":{n}}}' for n in RAW_NUMBERS]
    frames += [f'{{"op":"start","seconds":60,"overtime":{v}}}' for v in ("1", "0", '"yes"', "null", "[]")]
    frames += ['{"op":"start","seconds":60,"warnAtSeconds":30,"dangerAtSeconds":30}',
               '{"op":"start","seconds":60,"warnAtSeconds":30,"dangerAtSeconds":31}',
               '{"op":"start","seconds":60,"warnAtSeconds":1,"dangerAtSeconds":86400}']
    texts = ['""', json.dumps("x" * 141), json.dumps("\U0001F600" * 141), json.dumps("a" * 4000),
             json.dumps("a\u0000b"), json.dumps("a\u001fb"), json.dumps("a\u007fb"), json.dumps("\n"),
             "123", "true", "[]", '{"a":1}']
    frames += [f'{{"op":"message","text":{t}}}' for t in texts] + ['{"op":"message"}']
    frames += [f'{{"op":"blackout","on":{v}}}' for v in ('"yes"', "1", "0", "null", '"true"', "[]")]
    frames += ['{"op":"blackout"}']
    for n, frame in enumerate(frames):
        assert len(frame.encode()) < 4096, frame[:64]
        framed = frame[:-1] + f',"id":{n}}}'
        msg = await c.expect_error(framed, "bad_request", id=n)
        assert msg["message"], msg
    s = norm_state(c.state)
    assert s["phase"] == "idle" and s["message"] is None and s["blackout"] is False, s
    # The edges that are in range are taken.
    await c.command({"op": "start", "seconds": 60, "warnAtSeconds": 86400, "dangerAtSeconds": 86399})
    assert c.state["level"] == "danger", c.state
    await c.command({"op": "cancel"})
    await c.command({"op": "start", "seconds": 60, "warnAtSeconds": 2, "dangerAtSeconds": 1, "overtime": False})
    assert c.state["level"] == "normal" and c.state["overtime"] is False, c.state
    await c.close()
