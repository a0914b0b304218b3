"""Cluster mode's trust boundaries, against the built binary and a real redis-server:
a viewer link cannot command a keyed session through a second instance, a label with
NUL never reaches Redis, and a viewer who only watches leaves nothing that lasts."""

from __future__ import annotations

import asyncio
import json
import time

from websockets.asyncio.client import connect as ws_connect

from cdclient import SUBPROTOCOL, Client, http_get, run_async
from serverproc import start_server
from test_cluster import Redis, command_until, pytestmark  # noqa: F401  (skips without redis-server)


def wait_until(what: str, check, within: float = 10.0) -> None:
    """Redis gives no event for a key's deletion: look until `check()` holds."""
    deadline = time.monotonic() + within
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def keys_with_ttl(redis: Redis) -> dict[str, int]:
    keys = [k for k in redis.command("KEYS", "*").splitlines() if k]
    return {k: int(redis.command("PTTL", k)) for k in keys}


@run_async
async def test_viewer_link_cannot_cancel_through_a_second_instance(session_id):
    """Key mode: the host starts on A; a viewer link on B pipelines cancels behind its
    handshake, while B still loads the session. Every one is forbidden, and the run goes on."""
    redis = Redis()
    a = start_server("--redis", redis.url, "--control", "key")
    b = start_server("--redis", redis.url, "--control", "key")
    try:
        host = await Client.connect(a.ws_url(session_id), name="host")
        assert host.snapshot["role"] == "controller"
        _, reply = await host.command({"op": "start", "seconds": 120, "id": 1})
        assert reply["type"] == "ack", reply
        ends_at = host.state["endsAt"]
        # Redis holds every other client's commands for a while, so B's read of the
        # session is certainly still on its way when the commands arrive.
        assert redis.command("CLIENT", "PAUSE", "1500", "ALL") == "OK"
        async with ws_connect(b.ws_url(session_id), subprotocols=[SUBPROTOCOL], proxy=None) as ws:
            # Sent at once, behind the handshake, while B loads the session.
            for n in range(10):
                await ws.send(json.dumps({"op": "cancel", "id": n}))
            await ws.send(json.dumps({"op": "adjust", "seconds": -86400, "id": 10}))
            replies: dict[int, dict] = {}
            snapshot = None
            while len(replies) < 11:
                message = json.loads(await asyncio.wait_for(ws.recv(), 10))
                if message["type"] == "snapshot":
                    snapshot = message
                elif message["type"] in ("ack", "error") and "id" in message:
                    replies[message["id"]] = message
            assert snapshot is not None and snapshot.get("role") != "controller", snapshot
            assert all(r["type"] == "error" and r["code"] == "forbidden" for r in replies.values()), replies
        assert redis.command("HGET", f"countdown:s:{session_id}", "phase") == "running"
        assert int(redis.command("HGET", f"countdown:s:{session_id}", "revision")) == 1
        # The host's run is untouched, on both instances.
        late = await Client.connect(b.ws_url(session_id), name="late viewer")
        assert late.state["phase"] == "running" and late.state["endsAt"] == ends_at, late.state
        assert host.state["phase"] == "running"
        await late.close()
        await host.close()
    finally:
        a.stop_and_check()
        b.stop_and_check()
        redis.stop()


@run_async
async def test_nul_label_is_refused_and_nothing_leaks(session_id):
    """A finishedLabel with U+0000 (and with other control characters) is refused;
    Redis holds no label, and a viewer on the other instance sees nothing change."""
    redis = Redis()
    a = start_server("--redis", redis.url)
    b = start_server("--redis", redis.url)
    try:
        va = await Client.connect(a.ws_url(session_id), name="A")
        vb = await Client.connect(b.ws_url(session_id), name="B")
        for n, label in enumerate(["a\u0000" + "x" * 40, "\u0000", "bell\u0007", "del\u007f"]):
            await va.expect_error({"op": "start", "seconds": 30, "finishedLabel": label, "id": n}, "bad_request",
                                  id=n)
        assert redis.command("HGET", f"countdown:s:{session_id}", "label") == ""
        assert redis.command("HGET", f"countdown:s:{session_id}", "phase") == ""
        # A sound label still round-trips byte-exact.
        _, reply = await va.command({"op": "start", "seconds": 30, "finishedLabel": "倒計時 done", "id": 9})
        assert reply["type"] == "ack", reply
        await vb.wait_phase("running")
        assert redis.command("HGET", f"countdown:s:{session_id}", "label") == "倒計時 done"
        await va.close()
        await vb.close()
    finally:
        a.stop_and_check()
        b.stop_and_check()
        redis.stop()


@run_async
async def test_view_only_keys_expire_and_forgotten_keys_go(session_id):
    """A viewer who only watches leaves keys that all expire within minutes; once the
    session is commanded, then forgotten (--forget-after), its keys are deleted."""
    redis = Redis()
    a = start_server("--redis", redis.url, "--forget-after", "1")
    try:
        viewer = await Client.connect(a.ws_url(session_id), name="watcher")
        wait_until("the viewer count in Redis", lambda: redis.command("EXISTS", f"countdown:v:{session_id}") == "1")
        shared = {"countdown:epoch", "countdown:instances"}
        left = {k: ttl for k, ttl in keys_with_ttl(redis).items() if k not in shared}
        assert left, "the view wrote nothing at all"
        assert all(0 < ttl <= 180_000 for ttl in left.values()), left
        # A command makes the session last; a forgotten one leaves nothing.
        _, reply = await viewer.command({"op": "start", "seconds": 60, "id": 1})
        assert reply["type"] == "ack", reply
        assert int(redis.command("PTTL", f"countdown:s:{session_id}")) > 86_400_000
        _, reply = await viewer.command({"op": "cancel", "id": 2})
        assert reply["type"] == "ack", reply
        await viewer.close()
        wait_until("the session's keys deleted", lambda: redis.command(
            "EXISTS", f"countdown:s:{session_id}", f"countdown:v:{session_id}") == "0")
    finally:
        a.stop_and_check()
        redis.stop()


@run_async
async def test_damaged_hash_and_message_are_logged_and_the_rest_carries_on(session_id):
    """A session hash written straight into Redis with an endsAt of 2^63-1, and a
    damaged message on the changes channel: the instance logs the session, resets the
    hash (idle), and serves that session and every other one on."""
    redis = Redis()
    a = start_server("--redis", redis.url)
    try:
        damaged = session_id + "-damaged"
        redis.command("HSET", f"countdown:s:{damaged}", "phase", "running", "duration", "5",
                      "endsAt", "9223372036854775807", "revision", "4")
        viewer = await Client.connect(a.ws_url(damaged), name="damaged")
        assert viewer.state["phase"] == "idle", viewer.state
        assert redis.command("HGET", f"countdown:s:{damaged}", "phase") == "idle"
        assert redis.command("HGET", f"countdown:s:{damaged}", "revision") == "5"
        other = await Client.connect(a.ws_url(session_id), name="other")
        epoch = redis.command("GET", "countdown:epoch")
        redis.command("PUBLISH", "countdown:changes:0",
                      f"{epoch} 99 {session_id} 9 50 running 5 -9223372036854775808 - 1")
        _, reply = await other.command({"op": "start", "seconds": 30, "id": 1})
        assert reply["type"] == "ack", reply
        _, reply = await viewer.command({"op": "start", "seconds": 30, "id": 2})
        assert reply["type"] == "ack", reply
        wait_until("both damages logged", lambda: f'"redis_record_damaged","session":"{session_id}"' in a.stderr())
        log = a.stderr()
        assert f'"event":"redis_record_reset","session":"{damaged}"' in log, log
        metrics = http_get(a.host, a.port, "/metrics")[2].decode()
        assert "countdown_redis_damaged_records_total 2" in metrics
        await viewer.close()
        await other.close()
    finally:
        a.stop_and_check()
        redis.stop()


@run_async
async def test_rotated_key_stops_working_on_every_instance(session_id):
    """Key mode: the host rotates the key on A. A controller on B holding the old key
    is a viewer from then on, the old key makes a viewer on B, and the new one a controller."""
    redis = Redis()
    a = start_server("--redis", redis.url, "--control", "key")
    b = start_server("--redis", redis.url, "--control", "key")
    try:
        host = await Client.connect(a.ws_url(session_id), name="host")
        old_key = host.snapshot["key"]
        co = await Client.connect(b.ws_url(session_id) + f"?key={old_key}", name="co-host on B")
        assert co.snapshot["role"] == "controller", co.snapshot
        # A rotation's new key comes in a snapshot and the ack, not in a patch.
        await host.send({"op": "rotate_key", "id": 1})
        reply = await host.reply()
        assert reply["type"] == "ack" and reply.get("key") not in (None, old_key), reply
        new_key = reply["key"]
        assert redis.command("HGET", f"countdown:s:{session_id}", "key") != ""
        # Idle: a controller's cancel is not_running, a viewer's forbidden.
        await command_until(co, "cancel", "forbidden", within=5)
        stale = await Client.connect(b.ws_url(session_id) + f"?key={old_key}", name="old key on B")
        fresh = await Client.connect(b.ws_url(session_id) + f"?key={new_key}", name="new key on B")
        assert stale.snapshot.get("role") == "viewer", stale.snapshot
        assert fresh.snapshot.get("role") == "controller", fresh.snapshot
        _, reply = await fresh.command({"op": "start", "seconds": 30, "id": 2})
        assert reply["type"] == "ack", reply
        await host.wait_phase("running")
        for client in (host, co, stale, fresh):
            await client.close()
    finally:
        a.stop_and_check()
        b.stop_and_check()
        redis.stop()
