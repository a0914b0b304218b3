"""The HTTP API's reads in cluster mode (issue 18): GET of a session held by another
instance reads it from Redis and creates nothing; the list covers every commanded session
of the cluster, from the index the command function keeps (never SCAN or KEYS)."""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

import pytest

from apikit import command, read, request
from serverproc import start_server
from test_cluster import Redis, REDIS_SERVER

TOKEN = "list-token-0123456789abcdef"

pytestmark = pytest.mark.skipif(not Path(REDIS_SERVER).exists(), reason="redis-server is not installed")


@pytest.fixture(scope="module")
def cluster():
    tokens = Path(tempfile.mkdtemp(prefix="countdown-tokens-")) / "tokens"
    tokens.write_text(TOKEN + "\n")
    redis = Redis()
    servers = [start_server("--redis", redis.url, "--api-token-file", str(tokens),
                            "--max-commands-per-second", "100000") for _ in range(2)]
    yield redis, servers
    for server in servers:
        server.stop_and_check()
    redis.stop()


def wait_keys(redis, pred, timeout: float = 10.0) -> set[str]:
    deadline = time.monotonic() + timeout
    while True:
        keys = set(redis.command("KEYS", "*").splitlines())
        if pred(keys):
            return keys
        assert time.monotonic() < deadline, f"keys never matched: {sorted(keys)}"
        time.sleep(0.02)


def test_read_of_a_session_held_elsewhere(cluster, session_id):
    """A run started on one instance reads, on the other (which never held it), as running
    with the same endsAt; reading it there and reading a session nobody has made create nothing."""
    redis, (a, b) = cluster
    started = command(a, session_id, {"op": "start", "seconds": 90})
    assert started.status == 200, started.body
    # A's presence writes the session's viewer count on its own timer: the keys are
    # taken once that is in, so that only what B's read might add is compared.
    keys = wait_keys(redis, lambda k: f"countdown:v:{session_id}" in k)
    there = read(b, session_id).json
    assert there["type"] == "snapshot" and there["session"] == session_id
    assert there["state"]["phase"] == "running"
    assert there["state"]["endsAt"] == started.json["state"]["endsAt"]
    nobody = read(b, session_id + "-none").json
    assert nobody["state"]["phase"] == "idle"
    assert set(redis.command("KEYS", "*").splitlines()) == keys


def test_list_covers_the_cluster_in_id_order(cluster):
    """Sessions commanded on either instance are listed by both, in id order, paged by
    after and limit, with next null on the last page."""
    redis, (a, b) = cluster
    prefix = "cl" + str(int(time.time() * 1000))
    names = [f"{prefix}-{i}" for i in range(5)]
    for index, name in enumerate(names):
        assert command((a, b)[index % 2], name, {"op": "start", "seconds": 60}).status == 200
    auth = {"Authorization": f"Bearer {TOKEN}"}
    for server in (a, b):
        seen, after = [], prefix
        while True:
            page = request(server, "GET", f"/api/v1/sessions?after={after}&limit=2", headers=auth).json
            seen += [s for s in page["sessions"] if s["id"].startswith(prefix)]
            if page["next"] is None:
                break
            after = page["next"]
        assert [s["id"] for s in seen] == names
        assert all(s["phase"] == "running" and isinstance(s["endsAt"], int) for s in seen)
    whole = request(a, "GET", f"/api/v1/sessions?after={prefix}&limit=1000", headers=auth).json
    assert [s["id"] for s in whole["sessions"] if s["id"].startswith(prefix)] == names
    assert whole["next"] is None
    assert int(redis.command("ZCARD", "countdown:sessions").strip()) >= len(names)


def test_reads_without_redis_are_503(session_id):
    """With Redis gone, a read of a session not held here and the list are 503 with
    Retry-After (the document describes both), and the server stays up."""
    tokens = Path(tempfile.mkdtemp(prefix="countdown-tokens-")) / "tokens"
    tokens.write_text(TOKEN + "\n")
    redis = Redis()
    server = start_server("--redis", redis.url, "--api-token-file", str(tokens))
    try:
        redis.stop()
        gone = read(server, session_id)
        assert gone.status == 503 and gone.json["code"] == "unavailable"
        assert gone.header("retry-after") == "1"
        listed = request(server, "GET", "/api/v1/sessions?limit=10", headers={"Authorization": f"Bearer {TOKEN}"})
        assert listed.status == 503 and listed.header("retry-after") == "1"
    finally:
        server.stop_and_check()
        redis.stop()
