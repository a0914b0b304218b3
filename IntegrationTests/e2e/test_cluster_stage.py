"""Issue 20's stage in cluster mode: two instances of the built binary through one real
redis-server. The warning and danger levels turn in the tick patch of that second on
both instances, overtime counts up from the same deadline on both (derived, no Redis
traffic per tick), a stop's time over is the same everywhere, a presenter message and
a blackout sent to one instance reach the other, a viewer link cannot use them in key
mode, and all of it outlives a restart of every instance and of Redis."""

from __future__ import annotations

import asyncio
import math
import statistics

from cdclient import Client, run_async
from serverproc import start_server
from test_cluster import Redis, pair, pytestmark, redis  # noqa: F401 (fixtures; skips without redis-server)

# One frame at 60 Hz, and the most a tick may trail its moment on a loaded machine
# (the level rides in a tick, so it is held to the instance's own ticks as well).
FRAME_MS = 1000 / 60
LOADED_SLACK_MS = 120
# Arrivals are put on each instance's clock (see skew), which leaves the snapshot's own
# transit as the error: a patch may seem this little early.
EARLY_MS = 25


def skew(client: Client) -> float:
    """The instance's clock minus ours, as its snapshot shows it (serverTime, stamped
    as it was sent, less our time of arrival). An instance runs on Redis's clock as it
    measured it over a round trip, up to a round trip ahead of this host's."""
    return client.snapshot["serverTime"] - client.log[0][0]


def patch_arrivals(client: Client, pred) -> list[tuple[float, dict]]:
    """(arrival ms on the instance's clock, patch) of each patch received that
    satisfies `pred`, in order."""
    return [(t + skew(client), m["patch"]) for t, m in client.log if m["type"] == "patch" and pred(m["patch"])]


def first_patch(client: Client, pred) -> tuple[float, dict]:
    found = patch_arrivals(client, pred)
    assert found, f"[{client.name}] no patch matched; patches={[m for _, m in client.log if m['type'] == 'patch']}"
    return found[0]


def tick_lateness(client: Client, ends_at: int) -> list[float]:
    """How late each countdown tick (a patch with `remaining`) arrived after its moment,
    endsAt - remaining s: the instance's own lateness, the yardstick for the level's."""
    return [t - (ends_at - p["remaining"] * 1000) for t, p in patch_arrivals(client, lambda p: "remaining" in p)
            if p.get("remaining", 0) > 0]


def check_clock(client: Client) -> None:
    """The instance ticks on Redis's clock, the same host's as ours: within a little."""
    assert abs(skew(client)) < 250, (client.name, skew(client))


@run_async
async def test_levels_and_overtime_tick_alike_on_both_instances(pair, redis, session_id):
    """A 4 s run with warning at 3 s, danger at 2 s and overtime: on A and on B, the
    patch that first says warning carries remaining 3, the one that says danger 2, and
    each arrives at its moment (endsAt - 3 s, - 2 s, on the instance's clock) no later
    than the instance's plain ticks do, and within a frame of the other instance's. At zero both go to overtime
    with overSince = endsAt and count +0, +1, +2 on the seconds after it. A stop on B
    gives both the same overMs."""
    a, b = pair
    va = await Client.connect(a.ws_url(session_id), name="A")
    vb = await Client.connect(b.ws_url(session_id), name="B")
    for client in (va, vb):
        check_clock(client)
        assert client.state["level"] == "normal" and client.state["overtime"] is False, client.state
    patch, _ = await va.command({"op": "start", "seconds": 4, "warnAtSeconds": 3, "dangerAtSeconds": 2,
                                 "overtime": True, "id": 1})
    assert patch["overtime"] is True and patch["warnAtSeconds"] == 3 and patch["dangerAtSeconds"] == 2, patch
    assert patch.get("level", va.state["level"]) == "normal", patch
    await vb.wait_phase("running")
    ends_at = va.state["endsAt"]
    assert vb.state["endsAt"] == ends_at and vb.state["warnAtSeconds"] == 3 and vb.state["dangerAtSeconds"] == 2
    await asyncio.gather(*(c.wait_state(lambda s: s["phase"] == "overtime" and s["label"] == "+2", timeout=10,
                                        what="+2 in overtime") for c in (va, vb)))
    arrivals = {}
    for client in (va, vb):
        own = tick_lateness(client, ends_at)
        assert own, f"[{client.name}] no countdown ticks"
        for level, seconds in (("warning", 3), ("danger", 2)):
            t, p = first_patch(client, lambda p, level=level: p.get("level") == level)
            # In the tick patch of that second, not one of its own.
            assert p.get("remaining") == seconds and p.get("label") == str(seconds), (client.name, p)
            late = t - (ends_at - seconds * 1000)
            assert late >= -EARLY_MS, f"[{client.name}] {level} {late:.1f} ms early"
            assert min(own) - FRAME_MS <= late <= max(own) + FRAME_MS, \
                f"[{client.name}] {level} {late:.1f} ms off; ticks {own}"
            assert late <= LOADED_SLACK_MS + FRAME_MS, f"[{client.name}] {level} {late:.1f} ms late"
            arrivals[(client.name, level)] = t
        t, p = first_patch(client, lambda p: p.get("phase") == "overtime")
        assert p["overSince"] == ends_at and p["level"] == "over" and p["label"] == "+0", (client.name, p)
        assert p.get("remaining", 0) == 0 and client.history[max(client.history)]["endsAt"] is None
        assert -EARLY_MS <= t - ends_at <= LOADED_SLACK_MS + FRAME_MS, f"[{client.name}] overtime {t - ends_at:.1f} ms"
        # Counting up from overSince: +1 at overSince + 1 s, +2 at + 2 s, each once.
        ups = patch_arrivals(client, lambda p: p.get("label", "").startswith("+"))
        assert [p["label"] for _, p in ups] == ["+0", "+1", "+2"], (client.name, ups)
        for k, (t, _) in enumerate(ups):
            late = t - (ends_at + k * 1000)
            assert -EARLY_MS <= late <= LOADED_SLACK_MS + FRAME_MS, f"[{client.name}] +{k} {late:.1f} ms late"
    # Within a frame of each other, beyond how far apart the two instances' every tick
    # of a second is (the machine's own noise; about a millisecond when it is quiet).
    ticks = [{p["label"]: t for t, p in patch_arrivals(c, lambda p: "label" in p)} for c in (va, vb)]
    noise = statistics.median(abs(ticks[0][k] - ticks[1][k]) for k in ticks[0].keys() & ticks[1].keys())
    for level in ("warning", "danger"):
        apart = abs(arrivals[("A", level)] - arrivals[("B", level)])
        assert apart <= FRAME_MS + noise, f"{level} reached A and B {apart:.1f} ms apart (noise {noise:.1f})"
    # Overtime's ticks are derived on each instance: Redis saw no command since the start.
    assert redis.command("HGET", f"countdown:s:{session_id}", "revision") == "1"
    patch, _ = await vb.command({"op": "stop", "id": 2})
    assert patch["phase"] == "finished" and patch["outcome"] == "stopped" and patch["level"] == "normal", patch
    over_ms = patch["overMs"]
    assert 2000 <= over_ms < 4000, patch
    finished = await va.wait_phase("finished")
    assert finished["outcome"] == "stopped" and finished["overMs"] == over_ms, finished
    assert finished["overtime"] is False and finished["overSince"] is None and finished["warnAtSeconds"] is None
    assert finished["label"] == "Countdown finished", finished
    # No run: stop again is not_running on either instance.
    for client in (va, vb):
        await client.expect_error({"op": "stop", "id": 3}, "not_running", id=3)
    await va.close()
    await vb.close()


@run_async
async def test_message_and_blackout_sent_to_a_appear_on_b(pair, redis, session_id):
    """The message and the blackout go through the function like every command: set on
    A, they are in the Redis hash and on B; cleared on B, gone on A; kept across a run
    and its cancel; bad values are refused on both before Redis sees them."""
    # (A patch is the fields that changed, or every field when the cluster's seq
    # jumped past what the instance remembers: either way the state is what counts.)
    a, b = pair
    va = await Client.connect(a.ws_url(session_id), name="A")
    vb = await Client.connect(b.ws_url(session_id), name="B")
    assert va.state["message"] is None and va.state["blackout"] is False
    text = "Wrap up — 倒計時 🎉 "
    patch, _ = await va.command({"op": "message", "text": text, "id": 1})
    assert patch["message"] == text, patch
    await vb.wait_state(lambda s: s["message"] == text, what="the message on B")
    patch, _ = await va.command({"op": "blackout", "on": True, "id": 2})
    assert patch["blackout"] is True, patch
    await vb.wait_state(lambda s: s["blackout"] is True, what="the blackout on B")
    key = f"countdown:s:{session_id}"
    # (redis-cli's output is stripped: the trailing space is counted in bytes.)
    assert redis.command("HGET", key, "message") == text.strip()
    assert redis.command("HSTRLEN", key, "message") == str(len(text.encode()))
    assert redis.command("HGET", key, "blackout") == "1"
    # A run and its cancel keep both.
    await vb.command({"op": "start", "seconds": 30, "id": 3})
    await vb.command({"op": "cancel", "id": 4})
    await va.wait_phase("idle")
    assert va.state["message"] == text and va.state["blackout"] is True, va.state
    # A session opened afresh on B reads them from Redis.
    late = await Client.connect(b.ws_url(session_id), name="late")
    assert late.snapshot["state"]["message"] == text and late.snapshot["state"]["blackout"] is True
    await late.close()
    for frame in ({"op": "message", "text": "a\u0000b", "id": 5}, {"op": "message", "text": "x" * 141, "id": 6},
                  {"op": "message", "text": "", "id": 7}, {"op": "message", "text": 123, "id": 8},
                  {"op": "message", "id": 9}, {"op": "blackout", "on": "yes", "id": 10},
                  {"op": "blackout", "on": 1, "id": 11}, {"op": "blackout", "id": 12}):
        await vb.expect_error(frame, "bad_request", id=frame["id"])
    revision = redis.command("HGET", key, "revision")
    patch, _ = await vb.command({"op": "message", "text": None, "id": 13})
    assert "message" in patch and patch["message"] is None, patch
    patch, _ = await vb.command({"op": "blackout", "on": False, "id": 14})
    assert patch["blackout"] is False, patch
    await va.wait_state(lambda s: s["message"] is None and s["blackout"] is False, what="both cleared on A")
    assert int(redis.command("HGET", key, "revision")) == int(revision) + 2
    assert redis.command("HEXISTS", key, "message") == "0"
    assert redis.command("HEXISTS", key, "blackout") == "0"
    await va.close()
    await vb.close()


@run_async
async def test_viewer_link_on_b_cannot_stop_message_or_blackout(session_id):
    """Key mode: the host starts an overtime run on A; a viewer link on B gets forbidden
    for stop, message and blackout and Redis's record stays as the host left it; the
    controller link on B may stop."""
    redis = Redis()
    a = start_server("--redis", redis.url, "--control", "key")
    b = start_server("--redis", redis.url, "--control", "key")
    try:
        host = await Client.connect(a.ws_url(session_id), name="host")
        assert host.snapshot["role"] == "controller"
        await host.command({"op": "start", "seconds": 120, "overtime": True, "warnAtSeconds": 60, "id": 1})
        viewer = await Client.connect(b.ws_url(session_id), name="viewer on B")
        assert viewer.snapshot.get("role") == "viewer", viewer.snapshot
        for n, frame in enumerate(({"op": "stop"}, {"op": "message", "text": "Hijacked"},
                                   {"op": "message", "text": None}, {"op": "blackout", "on": True})):
            await viewer.expect_error({**frame, "id": n}, "forbidden", id=n)
        key = f"countdown:s:{session_id}"
        assert redis.command("HGET", key, "revision") == "1"
        assert redis.command("HGET", key, "phase") == "running"
        assert redis.command("HEXISTS", key, "message") == "0" and redis.command("HEXISTS", key, "blackout") == "0"
        co = await Client.connect(b.ws_url(session_id) + f"?key={host.snapshot['key']}", name="co-host on B")
        assert co.snapshot["role"] == "controller", co.snapshot
        patch, _ = await co.command({"op": "stop", "id": 9})
        assert patch["outcome"] == "stopped" and patch["overMs"] == 0, patch
        await host.wait_phase("finished")
        await viewer.wait_phase("finished")
        for client in (host, viewer, co):
            await client.close()
    finally:
        a.stop_and_check()
        b.stop_and_check()
        redis.stop()


@run_async
async def test_overtime_message_and_blackout_outlive_every_instance_and_redis(session_id):
    """A run that went into overtime, with a message and a blackout: both instances are
    stopped, Redis is restarted from its append-only file, and two new instances
    started; they find the run still in overtime from the same overSince, counting on
    (+k for k whole seconds since), with its level times, message and blackout kept."""
    redis = Redis(appendonly=True)
    first = [start_server("--redis", redis.url) for _ in range(2)]
    try:
        va = await Client.connect(first[0].ws_url(session_id), name="A")
        await va.command({"op": "start", "seconds": 1, "overtime": True, "dangerAtSeconds": 1, "id": 1})
        ends_at = va.state["endsAt"]
        await va.command({"op": "message", "text": "Take questions", "id": 2})
        await va.command({"op": "blackout", "on": True, "id": 3})
        await va.wait_state(lambda s: s["phase"] == "overtime", timeout=5, what="overtime")
        await va.close()
    finally:
        for server in first:
            assert server.terminate() == 0
    redis.stop()
    redis.start()
    again = [start_server("--redis", redis.url) for _ in range(2)]
    try:
        for n, server in enumerate(again):
            client = await Client.connect(server.ws_url(session_id), name=f"new {n}")
            state = client.snapshot["state"]
            over = math.floor((client.snapshot["serverTime"] - ends_at) / 1000)
            assert state["phase"] == "overtime" and state["overSince"] == ends_at, state
            assert state["label"] in (f"+{over}", f"+{over + 1}"), (state, over)
            assert state["level"] == "over" and state["dangerAtSeconds"] == 1, state
            assert state["message"] == "Take questions" and state["blackout"] is True, state
            # Counting on: the next second's label comes from overSince.
            patch = await client.until(lambda m: m["type"] == "patch" and "label" in m["patch"], timeout=3)
            label = patch["patch"]["label"]
            arrived = client.log[-1][0] + skew(client)
            k = int(label[1:])
            assert -EARLY_MS <= arrived - (ends_at + k * 1000) <= LOADED_SLACK_MS + FRAME_MS, (label, arrived - ends_at)
            await client.close()
        assert redis.command("HGET", f"countdown:s:{session_id}", "revision") == "3"
    finally:
        for server in again:
            server.stop_and_check()
        redis.stop()
