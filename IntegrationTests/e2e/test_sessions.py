"""End-to-end tests of countdown sessions over WebSocket: shared streams, snapshots,
timing, commands, acks, viewers and subprotocols."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import uuid

from cdclient import Client, norm_state, now_ms, run_async, settle
from serverproc import start_server

FINISHED = "Countdown finished"
TICK_TOLERANCE_MS = 100


def new_id() -> str:
    return "t" + uuid.uuid4().hex


@run_async
async def test_first_snapshot_of_a_new_session(server, session_id):
    """A new session's first message is a snapshot naming the session, with every state
    field at its idle value, one viewer, and a serverTime from the real clock."""
    before = now_ms()
    a = await Client.connect(server.ws_url(session_id))
    snap = a.snapshot
    assert snap["session"] == session_id
    assert abs(snap["serverTime"] - before) < 1000, (snap["serverTime"], before)
    assert norm_state(snap["state"]) == {
        "phase": "idle",
        "spinner": False,
        "enabled": True,
        "label": "Ready",
        "remaining": 0,
        "duration": 0,
        "endsAt": None,
        "viewers": 1,
        "remainingMs": None,
        "stale": False,
        "startedAt": None,
        "timeoutAt": None,
        "outcome": None,
        "level": "normal",
        "overSince": None,
        "overMs": None,
        "overtime": False,
        "warnAtSeconds": None,
        "dangerAtSeconds": None,
        "message": None,
        "blackout": False,
    }
    await a.close()


@run_async
async def test_three_clients_receive_the_same_stream(server, session_id):
    """Three clients on one session: each joiner's snapshot equals what the first client
    built at that seq; after one starts a 3 s countdown all three get exactly the same
    patches (same seqs, same contents) - 3, 2, 1, then the finish patch with label
    "Countdown finished", phase finished, spinner off and the button enabled."""
    url = server.ws_url(session_id)
    a = await Client.connect(url, name="A")
    b = await Client.connect(url, name="B")
    c = await Client.connect(url, name="C")
    # Let the join-time viewer-count patches settle: everyone sees 3 viewers.
    await settle(a, b, c)
    for late in (b, c):
        s = late.snapshot["seq"]
        await a.wait_seq(s)
        assert s in a.history, f"A never had seq {s} (A's seqs: {sorted(a.history)})"
        assert norm_state(late.snapshot["state"]) == a.history[s], (
            f"{late.name}'s snapshot at seq {s} differs from A's state at that seq"
        )

    patch, ack = await a.command({"op": "start", "seconds": 3, "id": "go"})
    start_seq = ack["seq"]
    assert patch["phase"] == "running" and patch["spinner"] is True and patch["enabled"] is False
    assert patch["remaining"] == 3 and patch["label"] == "3" and patch["duration"] == 3
    assert isinstance(patch["endsAt"], int)

    await asyncio.gather(*(cl.wait_phase("finished", timeout=6) for cl in (a, b, c)))
    streams = {cl.name: cl.patches_from(start_seq) for cl in (a, b, c)}
    assert streams["A"] == streams["B"] == streams["C"], streams
    labels = [p["label"] for _, p in streams["A"] if "label" in p]
    assert labels == ["3", "2", "1", FINISHED], labels

    finish = streams["A"][-1][1]
    assert finish["label"] == FINISHED
    assert finish["phase"] == "finished"
    assert finish["spinner"] is False
    assert finish["enabled"] is True
    for cl in (a, b, c):
        st = norm_state(cl.state)
        assert st["remaining"] == 0 and st["endsAt"] is None and st["duration"] == 3, st
        assert not cl.noop_patch_fields, f"{cl.name}: patches carried unchanged fields {cl.noop_patch_fields}"
    for cl in (a, b, c):
        await cl.close()


@run_async
async def test_mid_run_join_snapshot_equals_built_state(server, session_id):
    """A client that joins while a countdown runs gets a snapshot whose state equals what
    the first client built from its snapshot plus patches at the same seq, with remaining
    consistent with serverTime/endsAt; it then stays in step and ends in the same state.
    A client joining after the finish also gets the built state."""
    url = server.ws_url(session_id)
    a = await Client.connect(url, name="A")
    _, ack = await a.command({"op": "start", "seconds": 4})
    await a.wait_state(lambda s: s["remaining"] == 3, timeout=2.5, what="the tick to 3")

    b = await Client.connect(url, name="B")
    snap = b.snapshot
    s = snap["seq"]
    assert s >= ack["seq"]
    await a.wait_seq(s)
    assert s in a.history, f"A never had seq {s} (A's seqs: {sorted(a.history)})"
    assert norm_state(snap["state"]) == a.history[s], (
        f"mid-run snapshot {snap['state']} != A's built state {a.history[s]} at seq {s}"
    )
    st = norm_state(snap["state"])
    assert st["phase"] == "running" and st["spinner"] is True and st["label"] == str(st["remaining"])
    r, ends = st["remaining"], st["endsAt"]
    # remaining r is shown from endsAt - r s until endsAt - (r-1) s.
    assert ends - r * 1000 - TICK_TOLERANCE_MS <= snap["serverTime"] <= ends - (r - 1) * 1000 + TICK_TOLERANCE_MS, (
        snap["serverTime"], st)

    await asyncio.gather(a.wait_phase("finished", timeout=5), b.wait_phase("finished", timeout=5))
    assert b.patches_from(s + 1) == a.patches_from(s + 1)
    assert norm_state(a.state) == norm_state(b.state)

    c = await Client.connect(url, name="C")
    await a.wait_seq(c.snapshot["seq"])
    assert norm_state(c.snapshot["state"]) == a.history[c.snapshot["seq"]]
    assert c.snapshot["state"]["label"] == FINISHED
    for cl in (a, b, c):
        await cl.close()


@run_async
async def test_each_tick_arrives_on_schedule(server, session_id):
    """With a 3 s countdown the patch for remaining = r arrives within 100 ms of
    endsAt - r s (r = 3, 2, 1, each exactly once) and the finish patch within 100 ms of
    endsAt, all measured against the server's own endsAt on the same machine's clock."""
    a = await Client.connect(server.ws_url(session_id))
    mark = len(a.log)
    sent = now_ms()
    await a.send({"op": "start", "seconds": 3, "id": 1})
    await a.wait_phase("finished", timeout=6)
    patches = [(t, m["patch"]) for t, m in a.log[mark:] if m["type"] == "patch"]
    start = [p for _, p in patches if p.get("phase") == "running"]
    assert len(start) == 1, patches
    ends = start[0]["endsAt"]
    assert abs(ends - 3000 - sent) <= TICK_TOLERANCE_MS, f"endsAt {ends} is not start time + 3 s (sent at {sent})"

    seen = []
    finishes = 0
    for arrival, p in patches:
        if p.get("phase") == "finished":
            finishes += 1
            late = arrival - ends
            assert abs(late) <= TICK_TOLERANCE_MS, f"finish arrived {late:+.0f} ms from endsAt"
        elif "remaining" in p:
            r = p["remaining"]
            seen.append(r)
            late = arrival - (ends - r * 1000)
            assert abs(late) <= TICK_TOLERANCE_MS, f"tick remaining={r} arrived {late:+.0f} ms from schedule"
    assert seen == [3, 2, 1], seen
    assert finishes == 1
    await a.close()


@run_async
async def test_seq_increases_and_acks_echo_ids(server, session_id):
    """seq strictly increases; every accepted command is acked with its id echoed with
    its JSON type (string, integer, negative) and the seq of its resulting
    patch, which arrives before the ack; a command without id is acked too; another
    viewer sees exactly the same patches."""
    url = server.ws_url(session_id)
    a = await Client.connect(url, name="A")
    b = await Client.connect(url, name="B")
    await settle(a, b)

    acks = []
    for cmd in (
        {"op": "start", "seconds": 30, "id": "abc"},
        {"op": "cancel", "id": 42},
        {"op": "start", "seconds": 30, "id": 9223372036854775807},
        {"op": "cancel", "id": -3},
        {"op": "start", "seconds": 30},
        {"op": "cancel", "id": ""},
    ):
        patch, ack = await a.command(cmd)  # checks id echo and patch-before-ack
        assert ("phase" in patch) and patch["phase"] == ("running" if cmd["op"] == "start" else "idle"), patch
        if "id" not in cmd:
            assert ack.get("id") is None, ack
        acks.append(ack)
    seqs = [x["seq"] for x in acks]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs), seqs
    assert a.snapshot["seq"] < seqs[0]

    await b.wait_seq(seqs[-1])
    assert b.patches_from(seqs[0]) == a.patches_from(seqs[0])
    all_seqs = [m["seq"] for _, m in a.log if m["type"] in ("snapshot", "patch")]
    assert all(x < y for x, y in zip(all_seqs, all_seqs[1:])), all_seqs
    await a.close()
    await b.close()


@run_async
async def test_finished_label_utf8_and_start_again(server, session_id):
    """finishedLabel "倒計時結束" comes back intact (UTF-8) in the finish patch and in a
    later joiner's snapshot; start works again after finishing and the default label
    returns when none is given; a 64-character label is accepted."""
    url = server.ws_url(session_id)
    a = await Client.connect(url, name="A")
    await a.command({"op": "start", "seconds": 1, "finishedLabel": "倒計時結束", "id": "u"})
    st = await a.wait_phase("finished", timeout=3)
    assert st["label"] == "倒計時結束"
    finish = a.log[-1][1]
    assert finish["type"] == "patch" and finish["patch"]["label"] == "倒計時結束"

    b = await Client.connect(url, name="B")
    assert b.snapshot["state"]["label"] == "倒計時結束"
    assert b.snapshot["state"]["phase"] == "finished"

    patch, _ = await a.command({"op": "start", "seconds": 1, "id": "again"})
    assert patch["phase"] == "running" and patch["label"] == "1" and patch["spinner"] is True
    st = await a.wait_phase("finished", timeout=3)
    assert st["label"] == FINISHED
    await b.wait_seq(a.seq, timeout=3)
    assert norm_state(b.state) == norm_state(a.state)

    label64 = "界" * 64
    await a.command({"op": "start", "seconds": 1, "finishedLabel": label64})
    st = await a.wait_phase("finished", timeout=3)
    assert st["label"] == label64
    for cl in (a, b):
        assert not cl.noop_patch_fields, f"{cl.name}: patches carried unchanged fields {cl.noop_patch_fields}"
        await cl.close()


@run_async
async def test_cancel_stops_the_run_for_everyone(server, session_id):
    """cancel on an idle session -> not_running (id echoed); cancel from another viewer
    takes a running session back to idle for everyone (spinner off, enabled, remaining 0,
    endsAt null, label "Ready"); a second cancel -> not_running; and the cancelled run's
    timer is really gone: a new run started right after ticks and finishes on its own
    schedule with no stray patch from the old one."""
    url = server.ws_url(session_id)
    a = await Client.connect(url, name="A")
    b = await Client.connect(url, name="B")
    await settle(a, b)

    await a.expect_error({"op": "cancel", "id": "c0"}, "not_running", id="c0")

    await a.command({"op": "start", "seconds": 2, "id": "s1"})
    await b.wait_phase("running")
    patch, ack = await b.command({"op": "cancel", "id": "c1"})
    assert patch["phase"] == "idle" and patch["spinner"] is False and patch["enabled"] is True
    assert patch["remaining"] == 0
    assert "endsAt" in patch and patch["endsAt"] is None, patch
    await a.wait_seq(ack["seq"])
    for cl in (a, b):
        st = norm_state(cl.state)
        assert st["phase"] == "idle" and st["label"] == "Ready" and st["endsAt"] is None, st
    await a.expect_error({"op": "cancel", "id": 5}, "not_running", id=5)

    # A new 3 s run: the old 2 s deadline falls inside it and must not fire.
    mark = len(a.log)
    _, ack2 = await a.command({"op": "start", "seconds": 3})
    await a.wait_phase("finished", timeout=6)
    new = [(t, m["patch"]) for t, m in a.log[mark:] if m["type"] == "patch"]
    labels = [p["label"] for _, p in new if "label" in p]
    assert labels == ["3", "2", "1", FINISHED], labels
    ends = new[0][1]["endsAt"]
    assert abs(new[-1][0] - ends) <= TICK_TOLERANCE_MS
    await b.wait_seq(a.seq)
    assert b.patches_from(ack2["seq"]) == a.patches_from(ack2["seq"])
    await a.close()
    await b.close()


@run_async
async def test_start_while_running_is_busy(server, session_id):
    """start while running -> error busy with the id echoed, for the starter and for
    another viewer; the run is unharmed (same duration and endsAt, no extra patches)."""
    url = server.ws_url(session_id)
    a = await Client.connect(url, name="A")
    b = await Client.connect(url, name="B")
    await settle(a, b)

    _, ack = await a.command({"op": "start", "seconds": 30, "id": "s1"})
    await b.wait_seq(ack["seq"])
    running = norm_state(b.state)
    await b.expect_error({"op": "start", "seconds": 5, "id": "s2"}, "busy", id="s2")
    await a.expect_error({"op": "start", "id": 9}, "busy", id=9)
    await a.expect_error({"op": "start", "seconds": 1, "finishedLabel": "x"}, "busy", id=None)

    _, cack = await a.command({"op": "cancel"})
    await b.wait_seq(cack["seq"])
    between = [p for s, p in b.patches_from(ack["seq"] + 1) if s < cack["seq"]]
    for p in between:  # only ticks may come between the start and the cancel
        assert set(p) <= {"remaining", "label"}, f"unexpected patch during the run: {p}"
    assert running["duration"] == 30
    last = b.history[max(k for k in b.history if k < cack["seq"])]
    assert last["duration"] == 30 and last["endsAt"] == running["endsAt"], (running, last)
    await a.close()
    await b.close()


@run_async
async def test_default_seconds_used_when_absent(server, server_default2):
    """start without seconds uses the default: 5 s on a default server, and 2 s on a server
    started with --default-seconds 2 (which then finishes at its endsAt)."""
    a = await Client.connect(server.ws_url(new_id()))
    patch, _ = await a.command({"op": "start", "id": "d5"})
    assert patch["remaining"] == 5 and patch["duration"] == 5 and patch["label"] == "5", patch
    await a.command({"op": "cancel"})
    await a.close()

    b = await Client.connect(server_default2.ws_url(new_id()))
    patch, _ = await b.command({"op": "start", "finishedLabel": "done"})
    assert patch["remaining"] == 2 and patch["duration"] == 2 and patch["label"] == "2", patch
    assert abs(patch["endsAt"] - now_ms() - 2000) <= 200
    st = await b.wait_phase("finished", timeout=4)
    assert st["label"] == "done"
    assert abs(b.log[-1][0] - patch["endsAt"]) <= TICK_TOLERANCE_MS
    await b.close()


@run_async
async def test_two_sessions_do_not_interfere(server):
    """Two sessions run countdowns of different lengths at the same time; each viewer
    sees only its own session's patches and labels, and neither sees the other's
    viewers; afterwards each session's next message is its own reply."""
    sa, sb = new_id(), new_id()
    a = await Client.connect(server.ws_url(sa), name="A")
    b = await Client.connect(server.ws_url(sb), name="B")
    assert a.snapshot["session"] == sa and b.snapshot["session"] == sb
    _, acka = await a.command({"op": "start", "seconds": 2, "finishedLabel": "A done"})
    _, ackb = await b.command({"op": "start", "seconds": 1, "finishedLabel": "B done"})
    await asyncio.gather(a.wait_phase("finished", timeout=4), b.wait_phase("finished", timeout=4))

    la = [p["label"] for _, p in a.patches_from(acka["seq"]) if "label" in p]
    lb = [p["label"] for _, p in b.patches_from(ackb["seq"]) if "label" in p]
    assert la == ["2", "1", "A done"], la
    assert lb == ["1", "B done"], lb
    assert a.state["viewers"] == 1 and b.state["viewers"] == 1
    assert a.state["duration"] == 2 and b.state["duration"] == 1
    # Nothing else is queued for either: the next message each gets is the reply to its own cancel.
    for cl in (a, b):
        await cl.expect_error({"op": "cancel", "id": cl.name}, "not_running", id=cl.name)
        await cl.close()


@run_async
async def test_many_sessions_run_at_once(server):
    """Thirty sessions started together with 1 s and 2 s countdowns each tick and finish
    on their own deadline (within 100 ms) with their own label."""
    clients = [await Client.connect(server.ws_url(new_id()), name=f"s{i}") for i in range(30)]
    await asyncio.gather(*(c.command({"op": "start", "seconds": 1 + i % 2, "finishedLabel": c.name})
                           for i, c in enumerate(clients)))
    await asyncio.gather(*(c.wait_phase("finished", timeout=4) for c in clients))
    for i, c in enumerate(clients):
        patches = [(t, m["patch"]) for t, m in c.log if m["type"] == "patch"]
        start = [p for _, p in patches if p.get("phase") == "running"][0]
        assert start["duration"] == 1 + i % 2
        labels = [p["label"] for _, p in patches if "label" in p]
        assert labels == [str(r) for r in range(1 + i % 2, 0, -1)] + [c.name], (c.name, labels)
        late = patches[-1][0] - start["endsAt"]
        assert abs(late) <= TICK_TOLERANCE_MS, f"{c.name} finished {late:+.0f} ms from its endsAt"
    for c in clients:
        await c.close()


@run_async
async def test_viewers_follow_joins_and_leaves(server, session_id):
    """viewers counts open connections: it rises as clients join and falls when they
    close cleanly or drop without a close handshake, each change seen within ~1 s."""
    url = server.ws_url(session_id)
    a = await Client.connect(url, name="A")
    assert a.snapshot["state"]["viewers"] == 1
    b = await Client.connect(url, name="B")
    await asyncio.gather(a.wait_viewers(2), b.wait_viewers(2))
    c = await Client.connect(url, name="C")
    await asyncio.gather(a.wait_viewers(3), b.wait_viewers(3), c.wait_viewers(3))
    await b.close()
    await asyncio.gather(a.wait_viewers(2), c.wait_viewers(2))
    await c.close()
    await a.wait_viewers(1)
    d = await Client.connect(url, name="D")
    await a.wait_viewers(2)
    d.ws.transport.abort()  # vanish without a close frame
    await a.wait_viewers(1)
    await a.close()


@run_async
async def test_viewer_patches_are_rate_limited(server, session_id):
    """Many joins and leaves spread over ~2.5 s produce at most 4 viewer-count patches
    per second for an observer, and the count settles at the true value."""
    url = server.ws_url(session_id)
    obs = await Client.connect(url, name="obs")
    mark = len(obs.log)

    async def drain():
        while True:
            await obs.recv(30)

    drainer = asyncio.create_task(drain())
    others = []
    try:
        for _ in range(24):  # paced joins (not waiting for an event: generating load over time)
            others.append(await Client.connect(url))
            await asyncio.sleep(0.05)
        for cl in others:
            await cl.close()
            await asyncio.sleep(0.05)
    finally:
        drainer.cancel()
        try:
            await drainer
        except (asyncio.CancelledError, AssertionError):
            pass
    await obs.wait_viewers(1)
    times = [t for t, m in obs.log[mark:] if m["type"] == "patch" and "viewers" in m["patch"]]
    assert times, "observer saw no viewer-count patch at all"
    worst = max(sum(1 for u in times if t <= u < t + 900) for t in times)
    assert worst <= 4, f"{worst} viewer patches within 900 ms (at most 4 per second allowed); times={times}"
    await obs.close()


@run_async
async def test_no_subprotocol_works_like_countdown_v1(server, session_id):
    """The handshake selects countdown.v1 when it is offered (also among others); a client
    offering no subprotocol is served the same: it can start, gets the ack, and sees the
    same stream as a countdown.v1 client. A client offering permessage-deflate works too."""
    url = server.ws_url(session_id)
    a = await Client.connect(url, name="v1")
    assert a.ws.subprotocol == "countdown.v1"
    b = await Client.connect(url, subprotocols=None, name="none")
    assert b.ws.subprotocol is None
    c = await Client.connect(url, subprotocols=["other.v9", "countdown.v1"], name="multi")
    assert c.ws.subprotocol == "countdown.v1"
    d = await Client.connect(url, subprotocols=None, name="deflate", compression="deflate")
    await settle(a, b, c, d)

    _, ack = await b.command({"op": "start", "seconds": 1, "id": "np"})
    await asyncio.gather(*(cl.wait_phase("finished", timeout=3) for cl in (a, b, c, d)))
    assert a.patches_from(ack["seq"]) == b.patches_from(ack["seq"]) == c.patches_from(ack["seq"]) \
        == d.patches_from(ack["seq"])
    await d.expect_error("{", "bad_json", id=None)
    for cl in (a, b, c, d):
        await cl.close()


@run_async
async def test_no_subprotocol_is_ours_from_the_first_connection():
    """A client naming no subprotocol is served countdown.v1 even as the first connection
    of a server whose loop is busy: lws binds it to protocol index 0 until its deferred
    protocol init has run, which on libev can come after that first upgrade."""
    # Two busy processes make it likely that the upgrade is serviced before lws's init.
    burners = [
        subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2)
    ]
    try:
        for _ in range(8):
            srv = start_server("--data", ":memory:")
            try:
                c = await Client.connect(srv.ws_url(new_id()), subprotocols=None, name="first")
                assert c.snapshot["state"]["phase"] == "idle"
                await c.command({"op": "start", "seconds": 30})
                await c.close()
            finally:
                srv.stop_and_check()
    finally:
        for b in burners:
            b.kill()
            b.wait()
