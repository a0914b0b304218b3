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
