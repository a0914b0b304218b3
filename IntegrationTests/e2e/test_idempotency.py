"""Idempotency-Key on POST /api/v1/sessions/{id}/commands (issue 18): a retry with the same
key on the same session gets the first answer byte for byte and is applied once, after a
kill -9 and restart on the same --data, and on another instance of a cluster."""

from __future__ import annotations

import http.client
import shutil
import signal
import sqlite3
import tempfile
from pathlib import Path

import pytest

from apikit import command, read
from serverproc import start_server
from test_cluster import Redis, REDIS_SERVER


@pytest.fixture
def data_dir():
    d = tempfile.mkdtemp(prefix="countdown-idem-")
    yield Path(d)
    shutil.rmtree(d, ignore_errors=True)


def keyed(key: str) -> dict[str, str]:
    return {"Idempotency-Key": key}


def revision(data: Path, session: str) -> int:
    db = sqlite3.connect(f"file:{data}?mode=ro", uri=True)
    try:
        return db.execute("SELECT revision FROM sessions WHERE id = ?", (session,)).fetchone()[0]
    finally:
        db.close()


def test_retry_after_kill_9_gets_the_first_answer(data_dir, session_id):
    """A keyed start, SIGKILL the moment its answer arrives, restart on the same file: the
    retry is answered with the same bytes, the revision moved once, and the run is the first's."""
    data = data_dir / "countdown.db"
    srv = start_server("--data", str(data))
    try:
        start = {"op": "start", "seconds": 300, "label": "Deployed"}
        first = command(srv, session_id, start, keyed("deploy-7f3a/2026-12-01"))
        assert first.status == 200, first.body
        assert first.json["type"] == "ack" and first.json["state"]["phase"] == "running"
        srv.proc.send_signal(signal.SIGKILL)
        srv.proc.wait(timeout=5)
        srv = start_server("--port", str(srv.port), "--data", str(data))
        retry = command(srv, session_id, start, keyed("deploy-7f3a/2026-12-01"))
        assert retry.status == 200
        assert retry.body == first.body
        state = read(srv, session_id).json["state"]
        assert state["endsAt"] == first.json["state"]["endsAt"]
        # The same key for another command is refused and changes nothing.
        other = command(srv, session_id, {"op": "cancel"}, keyed("deploy-7f3a/2026-12-01"))
        assert other.status == 400 and other.json["code"] == "bad_request"
        assert read(srv, session_id).json["state"]["phase"] == "running"
        # Without the key the same start is a new command, and busy.
        assert command(srv, session_id, start).status == 409
    finally:
        srv.stop_and_check()
    assert revision(data, session_id) == 1


def test_refusal_is_remembered_and_other_sessions_are_apart(data_dir, session_id):
    """A keyed cancel of an idle session is 409 not_running; after a start, its retry is the
    same 409, not a cancel. The same key on another session is another command."""
    srv = start_server("--data", str(data_dir / "countdown.db"))
    try:
        first = command(srv, session_id, {"op": "cancel"}, keyed("c-1"))
        assert first.status == 409 and first.json["code"] == "not_running"
        assert command(srv, session_id, {"op": "start", "seconds": 60}).status == 200
        retry = command(srv, session_id, {"op": "cancel"}, keyed("c-1"))
        assert (retry.status, retry.body) == (409, first.body)
        assert read(srv, session_id).json["state"]["phase"] == "running"
        elsewhere = session_id + "-b"
        assert command(srv, elsewhere, {"op": "start", "seconds": 60}, keyed("c-1")).status == 200
    finally:
        srv.stop_and_check()


BAD_KEYS = {"256": "x" * 256, "space": "a b", "tab": "tab\there", "latin1": "é", "del": "del\x7f"}


@pytest.mark.parametrize("value", BAD_KEYS.values(), ids=BAD_KEYS.keys())
def test_bad_keys_are_400(data_dir, session_id, value):
    """An Idempotency-Key outside 1-255 visible ASCII is 400 and applies nothing."""
    srv = start_server("--data", str(data_dir / "countdown.db"))
    try:
        answer = command(srv, session_id, {"op": "start", "seconds": 60},
                         {"Idempotency-Key": value.encode("utf-8").decode("latin-1")})
        assert answer.status == 400
        assert read(srv, session_id).json["state"]["phase"] == "idle"
    finally:
        srv.stop_and_check()


def test_a_4kb_key_is_refused_and_the_server_stays_up(data_dir, session_id):
    """A 4 KB Idempotency-Key overflows lws's header buffer: the connection is refused
    (400/431 or closed), nothing is applied, and the server keeps serving."""
    srv = start_server("--data", str(data_dir / "countdown.db"))
    try:
        try:
            status = command(srv, session_id, {"op": "start", "seconds": 60},
                             {"Idempotency-Key": "x" * 4096}).status
        except (http.client.HTTPException, ConnectionError):
            status = None
        assert status in (None, 400, 431)
        assert read(srv, session_id).json["state"]["phase"] == "idle"
    finally:
        srv.stop_and_check()


@pytest.mark.skipif(not Path(REDIS_SERVER).exists(), reason="redis-server is not installed")
def test_retry_on_another_instance_gets_the_first_answer(session_id):
    """Two instances on one Redis: a keyed start on one, retried on the other (and on the
    first again), gets the first answer's bytes; the session's revision in Redis moved once."""
    redis = Redis()
    servers = [start_server("--redis", redis.url) for _ in range(2)]
    try:
        start = {"op": "start", "seconds": 120}
        first = command(servers[0], session_id, start, keyed("ci-run-991"))
        assert first.status == 200, first.body
        for server in (servers[1], servers[0], servers[1]):
            retry = command(server, session_id, start, keyed("ci-run-991"))
            assert (retry.status, retry.body) == (200, first.body)
        assert redis.command("HGET", f"countdown:s:{session_id}", "revision").strip() == "1"
        ttl = int(redis.command("PTTL", f"countdown:idem:{session_id}:ci-run-991").strip())
        assert 86_400_000 - 60_000 < ttl <= 86_400_000
        assert read(servers[1], session_id).json["state"]["phase"] == "running"
    finally:
        for server in servers:
            server.stop_and_check()
        redis.stop()


def idempotency_rows(data: Path) -> dict[str, int]:
    """Rows of the idempotency table by session."""
    db = sqlite3.connect(f"file:{data}?mode=ro", uri=True)
    try:
        return dict(db.execute("SELECT session, count(*) FROM idempotency GROUP BY session"))
    finally:
        db.close()


# A rate that never binds, so that every 429 here is a key refused.
UNLIMITED_RATE = ("--max-commands-per-second", "100000")


def send_new_keys(server, session: str, count: int, prefix: str) -> list[str]:
    """`count` keyed cancels with new keys: each answer's code, 'key_refused' for a 429
    that names the key limits."""
    codes = []
    for n in range(count):
        answer = command(server, session, {"op": "cancel"}, keyed(f"{prefix}-{n}"))
        if answer.status == 429 and "Idempotency-Key" in answer.json["message"]:
            codes.append("key_refused")
        else:
            codes.append(answer.json.get("code", "ack"))
    return codes


def test_new_keys_past_the_limits_are_refused_and_rows_stay_bounded(data_dir, session_id):
    """From one address: 300 new keys on one session past its limit of 20, then one key on
    each of 60 more sessions past the address's limit of 50. Past each limit the answer is
    429 naming the key limits and nothing is applied or stored: the table holds the limits'
    rows, also after a restart; another session's earlier key still replays its first
    answer, and a held key's retry is still answered."""
    data = data_dir / "countdown.db"
    limits = ("--max-idempotency-keys-per-session", "20", "--max-idempotency-keys-per-address", "50")
    srv = start_server("--data", str(data), *limits, *UNLIMITED_RATE)
    try:
        start = {"op": "start", "seconds": 600}
        theirs = command(srv, session_id + "-theirs", start, keyed("theirs"))
        assert theirs.status == 200, theirs.body
        codes = send_new_keys(srv, session_id, 300, "flood")
        assert codes == ["not_running"] * 20 + ["key_refused"] * 280
        elsewhere = [send_new_keys(srv, f"{session_id}-{n}", 1, "one")[0] for n in range(60)]
        assert elsewhere == ["not_running"] * 29 + ["key_refused"] * 31
        rows = idempotency_rows(data)
        assert rows[session_id] == 20 and sum(rows.values()) == 50, rows
        # Nothing refused was applied: the flooded session is still idle.
        assert read(srv, session_id).json["state"]["phase"] == "idle"
        retry = command(srv, session_id, {"op": "cancel"}, keyed("flood-3"))
        assert retry.status == 409 and retry.json["code"] == "not_running"
        srv.stop_and_check()
        srv = start_server("--port", str(srv.port), "--data", str(data), *limits, *UNLIMITED_RATE)
        assert send_new_keys(srv, session_id + "-after", 1, "after") == ["key_refused"]
        replay = command(srv, session_id + "-theirs", start, keyed("theirs"))
        assert (replay.status, replay.body) == (200, theirs.body)
    finally:
        srv.stop_and_check()
    assert sum(idempotency_rows(data).values()) == 50
    assert revision(data, session_id + "-theirs") == 1


@pytest.mark.skipif(not Path(REDIS_SERVER).exists(), reason="redis-server is not installed")
def test_new_keys_past_the_limits_are_refused_in_a_cluster(session_id):
    """Two instances on one Redis, one address: new keys on one session past its limit of
    10, sent to both instances in turn, are refused with 429 and stored nowhere, so Redis
    holds 10 idempotency hashes for it (SCAN) and 200 more new keys add no idempotency key
    at all; another session's earlier key still replays on either instance, applied once."""
    redis = Redis()
    limits = ("--max-idempotency-keys-per-session", "10")
    servers = [start_server("--redis", redis.url, *limits, *UNLIMITED_RATE) for _ in range(2)]
    try:
        start = {"op": "start", "seconds": 600}
        theirs = command(servers[1], session_id + "-theirs", start, keyed("theirs"))
        assert theirs.status == 200, theirs.body
        codes = [send_new_keys(servers[n % 2], session_id, 1, f"flood{n}")[0] for n in range(20)]
        assert codes == ["not_running"] * 10 + ["key_refused"] * 10
        def idempotency_keys() -> list[str]:
            return sorted(redis.command("--scan", "--pattern", "countdown:idem*").split())

        before = idempotency_keys()
        codes = [send_new_keys(servers[n % 2], session_id, 1, f"more{n}")[0] for n in range(200)]
        assert codes == ["key_refused"] * 200
        assert idempotency_keys() == before
        held = redis.command("--scan", "--pattern", f"countdown:idem:{session_id}:*").split()
        assert len(held) == 10, held
        for server in servers:
            replay = command(server, session_id + "-theirs", start, keyed("theirs"))
            assert (replay.status, replay.body) == (200, theirs.body)
        assert redis.command("HGET", f"countdown:s:{session_id}-theirs", "revision").strip() == "1"
    finally:
        for server in servers:
            server.stop_and_check()
        redis.stop()


def test_ipv6_clients_hold_keys_by_their_prefix(data_dir, session_id):
    """Behind a trusted proxy: keys from four addresses of one IPv6 /64 count against one
    per-address limit of 3, so the fourth is refused 429 and stored nowhere; another /64
    has its own budget."""
    data = data_dir / "countdown.db"
    srv = start_server("--data", str(data), "--trusted-proxy", "127.0.0.1",
                       "--max-idempotency-keys-per-address", "3", *UNLIMITED_RATE)
    try:
        def cancel(n: int, address: str):
            return command(srv, f"{session_id}-{n}", {"op": "cancel"},
                           {**keyed("k"), "X-Forwarded-For": address})

        codes = [cancel(n, f"2001:db8:7:7::{n + 1}").status for n in range(4)]
        assert codes == [409, 409, 409, 429]
        assert cancel(9, "2001:db8:7:8::1").status == 409
    finally:
        srv.stop_and_check()
    assert sum(idempotency_rows(data).values()) == 4
