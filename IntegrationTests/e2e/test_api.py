"""The HTTP API (/api/v1) against the built binary, with http.client (through
apikit, which validates every response against Public/openapi.json) and with
Debian's curl: reads, commands through the one command path, statuses,
tokens, controller keys, CORS, limits and cluster mode."""

from __future__ import annotations

import http.client
import json
import socket
import sqlite3
import subprocess
import tempfile
import time
from pathlib import Path

import pytest
from openapi_spec_validator import validate as validate_spec
from openapi_spec_validator.readers import read_from_filename

from apikit import command, read, request
from cdclient import Client, run_async
from opskit import scrape
from serverproc import ServerProcess, server_binary, start_server, PUBLIC_DIR
from test_cluster import Redis, REDIS_SERVER

TOKEN = "ci-token-0123456789abcdef"
OTHER_TOKEN = "deck-token-fedcba9876543210"
DECK = "https://deck.example"


def token_file(*tokens: str) -> str:
    path = Path(tempfile.mkdtemp(prefix="countdown-tokens-")) / "tokens"
    path.write_text("\n" + "\n\n".join(tokens) + "\n")
    return str(path)


@pytest.fixture(scope="module")
def api():
    # Every test here comes from 127.0.0.1: the rate limit per address is tested on its own server.
    srv = start_server("--api-token-file", token_file(TOKEN, OTHER_TOKEN), "--allow-origin", DECK,
                       "--max-commands-per-second", "100000")
    yield srv
    srv.stop_and_check()


@pytest.fixture(scope="module")
def keyed():
    srv = start_server("--control", "key", "--api-token-file", token_file(TOKEN),
                       "--max-commands-per-second", "100000")
    yield srv
    srv.stop_and_check()


def data_file(server: ServerProcess) -> str:
    return server.args[server.args.index("--data") + 1]


def rows(server: ServerProcess, session: str) -> int:
    with sqlite3.connect(f"file:{data_file(server)}?mode=ro", uri=True) as db:
        return db.execute("SELECT COUNT(*) FROM sessions WHERE id = ?", (session,)).fetchone()[0]


def sessions_live(server: ServerProcess) -> float:
    samples = scrape(server.host, server.port)
    return sum(v for (name, _), v in samples.items() if name == "countdown_sessions")


def curl(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["curl", "-sS", "--max-time", "5", *args], capture_output=True, text=True, timeout=10)


# -- the document -----------------------------------------------------------------------------
def test_openapi_document_is_valid_and_served(api):
    """The document validates as OpenAPI 3.1 and is what the server serves."""
    spec, _ = read_from_filename(str(PUBLIC_DIR / "openapi.json"))
    validate_spec(spec)
    answer = request(api, "GET", "/api/v1/openapi.json")
    assert answer.status == 200
    assert answer.json == json.loads((PUBLIC_DIR / "openapi.json").read_text())
    for path in ("/api/v1/sessions/{id}", "/api/v1/sessions/{id}/commands", "/api/v1/sessions/{id}/events",
                 "/api/v1/sessions", "/api/v1/openapi.json"):
        assert path in answer.json["paths"], path
    head = request(api, "HEAD", "/api/v1/openapi.json", check=False)
    assert head.status == 200 and head.body == b"" and int(head.header("content-length")) == len(answer.body)


# -- reads --------------------------------------------------------------------------------------
def test_read_of_an_unknown_session_is_idle_and_creates_nothing(api, session_id):
    """An unopened session reads as idle, and the read creates no hub slot and no row."""
    before = sessions_live(api)
    answer = read(api, session_id)
    assert answer.status == 200
    assert set(answer.json) == {"type", "session", "epoch", "seq", "serverTime", "state"}
    assert answer.json["type"] == "snapshot" and answer.json["session"] == session_id
    assert answer.json["state"]["phase"] == "idle"
    assert sessions_live(api) == before
    assert rows(api, session_id) == 0


@run_async
async def test_command_is_applied_durably_and_fanned_out(api, session_id):
    """A POSTed start reaches a WebSocket viewer; the ack carries seq and state; the row is stored; a read agrees."""
    viewer = await Client.connect(api.ws_url(session_id))
    answer = command(api, session_id, {"op": "start", "seconds": 60, "id": "deploy-1"})
    assert answer.status == 200, answer.body
    ack = answer.json
    assert ack["type"] == "ack" and ack["id"] == "deploy-1" and ack["state"]["phase"] == "running"
    # Durable before the answer: the row is there when the ack is.
    assert rows(api, session_id) == 1
    await viewer.wait_seq(ack["seq"])
    assert viewer.state["phase"] == "running" and viewer.state["endsAt"] == ack["state"]["endsAt"]
    snap = read(api, session_id).json
    assert snap["seq"] >= ack["seq"] and snap["state"]["endsAt"] == ack["state"]["endsAt"]
    assert snap["state"]["viewers"] >= 1
    await viewer.close()


def test_conflicts_are_409_with_the_websockets_codes(api, session_id):
    """busy, not_running and not_paused come back as 409 with the WebSocket's error objects."""
    assert command(api, session_id, {"op": "pause"}).json["code"] == "not_running"
    assert command(api, session_id, {"op": "resume"}).status == 409
    assert command(api, session_id, {"op": "start", "seconds": 30}).status == 200
    busy = command(api, session_id, {"op": "start", "seconds": 30, "id": 5})
    assert busy.status == 409 and busy.json == {**busy.json, "type": "error", "code": "busy", "id": 5}
    assert command(api, session_id, {"op": "resume"}).json["code"] == "not_paused"
    assert command(api, session_id, {"op": "cancel"}).status == 200


@run_async
async def test_a_ci_job_waits_then_says_done_or_failed(api, session_id):
    """The seed's case over HTTP: wait shows everyone the spinner, done and fail end it
    with their outcome, and done outside a wait is 409 not_waiting."""
    viewer = await Client.connect(api.ws_url(session_id))
    waiting = command(api, session_id, {"op": "wait", "label": "Deploying", "timeoutSeconds": 900}, token=TOKEN)
    assert waiting.status == 200, waiting.body
    state = waiting.json["state"]
    assert state["phase"] == "waiting" and state["spinner"] is True and state["label"] == "Deploying"
    assert state["timeoutAt"] - state["startedAt"] == 900_000
    await viewer.wait_phase("waiting")
    done = command(api, session_id, {"op": "done", "label": "Deployed"}, token=TOKEN)
    assert done.json["state"]["phase"] == "finished" and done.json["state"]["outcome"] == "done"
    await viewer.wait_state(lambda s: s.get("outcome") == "done", what="the outcome")
    again = command(api, session_id, {"op": "done"}, token=TOKEN)
    assert again.status == 409 and again.json["code"] == "not_waiting"
    assert command(api, session_id, {"op": "wait"}, token=TOKEN).status == 200
    failed = command(api, session_id, {"op": "fail", "label": "Deploy failed"}, token=TOKEN)
    assert failed.json["state"]["outcome"] == "failed" and failed.json["state"]["label"] == "Deploy failed"
    await viewer.close()


def test_each_transaction_closes_its_connection(api, session_id):
    """Every answer says connection: close and ends its connection; a client that
    reconnects (http.client does) carries reads and commands one after another."""
    conn = http.client.HTTPConnection(api.host, api.port, timeout=5)
    for op in ({"op": "start", "seconds": 30}, {"op": "pause"}, {"op": "resume"}, {"op": "cancel"}):
        answer = command(conn, session_id, op)
        assert answer.status == 200 and answer.header("connection") == "close"
        assert conn.sock is None, "the connection was kept"
        assert read(conn, session_id).status == 200
    conn.close()


# -- refusals before the hub --------------------------------------------------------------------
def test_content_type_is_required(api, session_id):
    """text/plain, a form post and no type at all are 415; a charset parameter is fine."""
    body = json.dumps({"op": "cancel"})
    for headers in ({"Content-Type": "text/plain"}, {"Content-Type": "application/x-www-form-urlencoded"}, {}):
        answer = request(api, "POST", f"/api/v1/sessions/{session_id}/commands", body, headers)
        assert answer.status == 415, headers
    ok = request(api, "POST", f"/api/v1/sessions/{session_id}/commands", body,
                 {"Content-Type": "application/json; charset=utf-8"})
    assert ok.status in (200, 409)
    # curl's -d is a form post.
    form = curl("-o", "/dev/null", "-w", "%{http_code}", "-d", body, f"{api.http_base}/api/v1/sessions/{session_id}/commands")
    assert form.stdout == "415"


def test_body_over_4096_bytes_is_413(api, session_id):
    """4096 bytes are taken; 4097 are refused with 413 before the body is read, and the server stays up."""
    base = '{"op":"cancel"}'
    exact = base + " " * (4096 - len(base))
    assert request(api, "POST", f"/api/v1/sessions/{session_id}/commands", exact,
                   {"Content-Type": "application/json"}).status == 409
    over = exact + " "
    answer = request(api, "POST", f"/api/v1/sessions/{session_id}/commands", over,
                     {"Content-Type": "application/json"})
    assert answer.status == 413
    # A length that claims less than is sent is cut where it says; one that claims more waits for it.
    with socket.create_connection((api.host, api.port), timeout=5) as raw:
        raw.sendall(b"POST /api/v1/sessions/" + session_id.encode() + b"/commands HTTP/1.1\r\nHost: x\r\n"
                    b"Content-Type: application/json\r\nContent-Length: 99999999999999999999\r\n\r\n")
        assert raw.recv(100).startswith(b"HTTP/1.1 413")
    assert read(api, session_id).status == 200


def test_a_chunked_body_is_refused_and_not_taken_for_a_request(api, session_id):
    """A chunked POST (no Content-Length) is 411 and the connection closes, so the
    chunk is never read as a second request."""
    smuggled = b"GET /api/v1/sessions/" + session_id.encode() + b" HTTP/1.1\r\nHost: x\r\n\r\n"
    body = b"%x\r\n" % len(smuggled) + smuggled + b"\r\n0\r\n\r\n"
    with socket.create_connection((api.host, api.port), timeout=5) as raw:
        raw.sendall(b"POST /api/v1/sessions/" + session_id.encode() + b"/commands HTTP/1.1\r\nHost: x\r\n"
                    b"Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n" + body)
        answer = b""
        while chunk := raw.recv(4096):
            answer += chunk
    assert answer.startswith(b"HTTP/1.1 411") and answer.count(b"HTTP/1.1") == 1, answer


@pytest.mark.parametrize("body", [
    '{"op":"start","seconds":9223372036854775808}',
    '{"op":"start","seconds":-9223372036854775809}',
    '{"op":"start","seconds":18446744073709551616}',
    '{"op":"start","seconds":1e400}',
    '{"op":"start","seconds":1e308}',
    '{"op":"start","seconds":-0}',
    '{"op":"adjust","seconds":9223372036854775807}',
    '{"op":"start","seconds":5,"finishedLabel":"a\\u0000b"}',
    '{"op":"start","seconds":5,"finishedLabel":"' + "x" * 4000 + '"}',
    '{"op":"start\u0000"}',
    '{"op":"start","op":"cancel"}',
    '[]',
    '',
    '{',
    '{"op":"ping","t":1}',
    '{"op":"auth","key":"k"}',
])
def test_bad_values_are_400_and_the_server_stays_up(api, session_id, body):
    """Edge values answer 400 with bad_json or bad_request; nothing changes and the server keeps serving."""
    answer = request(api, "POST", f"/api/v1/sessions/{session_id}/commands", body.encode(),
                     {"Content-Type": "application/json"})
    assert answer.status == 400, answer.body
    assert answer.json["code"] in ("bad_json", "bad_request")
    assert read(api, session_id).json["state"]["phase"] == "idle"


def test_a_nul_in_the_path_is_refused(api):
    """A %00 in a path or in the session id is refused (lws 4.1.6 drops some spellings
    itself, with no status), never routed; the server serves on."""
    for target in ("/api/v1/sessions/a%00b", "/api/v1/sessions/%00/commands", "/api/v1%00/openapi.json"):
        with socket.create_connection((api.host, api.port), timeout=5) as raw:
            raw.sendall(f"GET {target} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
            head = raw.recv(200)
        assert head == b"" or head.startswith(b"HTTP/1.1 4"), head
    assert request(api, "GET", "/api/v1/openapi.json").status == 200


def test_unknown_routes_and_methods(api, session_id):
    """Unknown paths are 404; a wrong method is 405 with Allow; a bad list query is 400.
    (The document has no operation for a path or method that does not exist, so those
    answers are checked here by hand: an error object.)"""
    for path in ("/api/v1/nothing", f"/api/v1/sessions/{'x' * 65}", "/api/v1/sessions/a/b/c/d"):
        missing = request(api, "GET", path, check=False)
        assert missing.status == 404 and missing.json["type"] == "error", path
    wrong = request(api, "GET", f"/api/v1/sessions/{session_id}/commands", check=False)
    assert wrong.status == 405 and wrong.header("allow") == "POST, OPTIONS" and wrong.json["type"] == "error"
    assert request(api, "POST", f"/api/v1/sessions/{session_id}", {"op": "cancel"}, check=False).status == 405
    assert request(api, "DELETE", f"/api/v1/sessions/{session_id}", check=False).status == 405
    auth = {"Authorization": f"Bearer {TOKEN}"}
    for query in ("limit=0", "limit=1001", "limit=1e3", "after=a%20b", "limit=1&limit=2", "x=1"):
        assert request(api, "GET", f"/api/v1/sessions?{query}", headers=auth).status == 400, query
    bad_key = request(api, "POST", f"/api/v1/sessions/{session_id}/commands", {"op": "cancel"},
                      {"Idempotency-Key": "k" * 256})
    assert bad_key.status == 400


def test_rate_limit_is_per_address_with_retry_after(session_id):
    """Past --max-commands-per-second from one address, even on new connections: 429 with Retry-After."""
    srv = start_server("--max-commands-per-second", "3")
    try:
        statuses = [command(srv, session_id, {"op": "cancel"}) for _ in range(6)]
        limited = [a for a in statuses if a.status == 429]
        assert limited, [a.status for a in statuses]
        assert limited[0].json["code"] == "rate_limited"
        assert int(limited[0].header("retry-after")) >= 1
    finally:
        srv.stop_and_check()


def test_rate_limit_counts_forwarded_clients_apart_and_a_token_across_them(session_id):
    """Behind a trusted proxy each forwarded client has its own budget; a token's
    commands share one budget whichever client sends them."""
    srv = start_server("--max-commands-per-second", "3", "--trusted-proxy", "127.0.0.1",
                       "--api-token-file", token_file(TOKEN))
    try:
        def from_client(index: int, token: str | None = None):
            return command(srv, session_id, {"op": "cancel"}, {"X-Forwarded-For": f"198.51.100.{index}"}, token)
        assert all(from_client(i).status != 429 for i in range(1, 9))
        tokened = [from_client(i, TOKEN).status for i in range(20, 28)]
        assert 429 in tokened and tokened.index(429) >= 3, tokened
    finally:
        srv.stop_and_check()


def test_answer_to_a_closed_connection_is_dropped(api, session_id):
    """Clients that hang up before their answer cost nothing: the commands apply and the server serves on."""
    for index in range(30):
        with socket.create_connection((api.host, api.port), timeout=5) as raw:
            body = json.dumps({"op": "start" if index % 2 == 0 else "cancel", "seconds": 30}).encode()
            raw.sendall(b"POST /api/v1/sessions/" + session_id.encode() + b"/commands HTTP/1.1\r\nHost: x\r\n"
                        b"Content-Type: application/json\r\nContent-Length: " + str(len(body)).encode()
                        + b"\r\n\r\n" + body)
    # lws may or may not have read each request before its hang-up; either way the
    # server serves on, and the session takes commands.
    assert command(api, session_id, {"op": "cancel"}).status in (200, 409)
    assert command(api, session_id, {"op": "start", "seconds": 5}).status in (200, 409)
    assert read(api, session_id).json["state"]["phase"] == "running"


# -- origins and CORS --------------------------------------------------------------------------
def test_cors_for_listed_origins_only(api, session_id):
    """A listed origin gets Access-Control-Allow-Origin and a preflight; others get none, and their commands 403."""
    pre = request(api, "OPTIONS", f"/api/v1/sessions/{session_id}/commands",
                  headers={"Origin": DECK, "Access-Control-Request-Method": "POST",
                           "Access-Control-Request-Headers": "content-type, authorization"})
    assert pre.status == 204
    assert pre.header("access-control-allow-origin") == DECK
    assert "POST" in pre.header("access-control-allow-methods")
    allowed = {h.strip() for h in pre.header("access-control-allow-headers").split(",")}
    assert {"content-type", "authorization", "idempotency-key", "last-event-id"} <= allowed
    assert int(pre.header("access-control-max-age")) > 0
    evil = request(api, "OPTIONS", f"/api/v1/sessions/{session_id}/commands",
                   headers={"Origin": "https://evil.example", "Access-Control-Request-Method": "POST"})
    assert evil.header("access-control-allow-origin") is None
    ok = command(api, session_id, {"op": "cancel"}, {"Origin": DECK})
    assert ok.status == 409 and ok.header("access-control-allow-origin") == DECK
    refused = command(api, session_id, {"op": "start", "seconds": 5}, {"Origin": "https://evil.example"})
    assert refused.status == 403 and refused.json["code"] == "forbidden"
    assert refused.header("access-control-allow-origin") is None
    assert read(api, session_id).json["state"]["phase"] == "idle"
    # The page's own origin needs no listing.
    own = command(api, session_id, {"op": "cancel"}, {"Origin": api.http_base})
    assert own.status == 409


# -- tokens and the list ------------------------------------------------------------------------
def test_list_needs_a_token_and_pages_by_id(api):
    """No token is 401, a wrong one 403; a token lists live sessions in id order, paged by after."""
    assert request(api, "GET", "/api/v1/sessions").status == 401
    assert request(api, "GET", "/api/v1/sessions", headers={"Authorization": "Bearer wrong-token-0123456789"}).status == 403
    prefix = "list" + str(int(time.time() * 1000))
    names = [f"{prefix}-{i:02d}" for i in (3, 1, 4, 0, 2)]
    for name in names:
        assert command(api, name, {"op": "start", "seconds": 60}, token=OTHER_TOKEN).status == 200
    auth = {"Authorization": f"Bearer {TOKEN}"}
    seen = []
    after = prefix
    while True:
        page = request(api, "GET", f"/api/v1/sessions?after={after}&limit=2", headers=auth).json
        seen += [s for s in page["sessions"] if s["id"].startswith(prefix)]
        if page["next"] is None or not page["next"].startswith(prefix):
            break
        after = page["next"]
    assert [s["id"] for s in seen] == sorted(names)
    assert all(s["phase"] == "running" and isinstance(s["endsAt"], int) for s in seen)
    listed = curl("-H", f"Authorization: Bearer {TOKEN}", f"{api.http_base}/api/v1/sessions?after={prefix}&limit=1000")
    assert [s["id"] for s in json.loads(listed.stdout)["sessions"] if s["id"].startswith(prefix)] == sorted(names)


def test_a_token_that_is_not_one_is_refused_in_open_mode(api, session_id):
    """In open mode a bearer that is not a token is refused, not ignored, so a typo shows."""
    answer = command(api, session_id, {"op": "start", "seconds": 5}, token="not-a-token-0123456789")
    assert answer.status == 403


@pytest.mark.parametrize("content,needle", [
    ("short\n", "at least 16"),
    ("has a space in it 0123\n", "no spaces"),
    ("\n\n", "no token"),
])
def test_bad_token_files_refuse_to_start(content, needle):
    """A token file that is too short, has spaces or is empty stops the server with a clear message."""
    path = Path(tempfile.mkdtemp()) / "tokens"
    path.write_text(content)
    result = subprocess.run([str(server_binary()), "--port", "0", "--api-token-file", str(path)],
                            capture_output=True, text=True, timeout=10)
    assert result.returncode == 2 and needle in result.stderr, result.stderr
    missing = subprocess.run([str(server_binary()), "--port", "0"], capture_output=True, text=True, timeout=10,
                             env={"COUNTDOWN_API_TOKEN_FILE": "/nonexistent/tokens"})
    assert missing.returncode == 2 and "COUNTDOWN_API_TOKEN_FILE" in missing.stderr


@run_async
async def test_key_mode_token_and_controller_key(keyed, session_id):
    """Key mode: no bearer is 403; the session's controller key works as Bearer for that session only;
    a viewer cannot command; a token commands any session."""
    assert command(keyed, session_id, {"op": "start", "seconds": 60}).status == 403
    host = await Client.connect(keyed.ws_url(session_id))
    key = host.snapshot["key"]
    ok = command(keyed, session_id, {"op": "start", "seconds": 60}, token=key)
    assert ok.status == 200 and ok.json["state"]["phase"] == "running"
    await host.wait_seq(ok.json["seq"])
    wrong = ("1" if key[0] == "0" else "0") + key[1:]
    assert command(keyed, session_id, {"op": "pause"}, token=wrong).json["code"] == "forbidden"
    assert command(keyed, "other" + session_id[1:], {"op": "start", "seconds": 5}, token=key).status == 403
    assert command(keyed, session_id, {"op": "pause"}, token=TOKEN).status == 200
    # A token may also command a session nobody has opened.
    fresh = command(keyed, "fresh" + session_id[1:], {"op": "start", "seconds": 5}, token=TOKEN)
    assert fresh.status == 200
    # rotate_key by HTTP answers the new key; the old one stops working.
    rotated = command(keyed, session_id, {"op": "rotate_key"}, token=key)
    assert rotated.status == 200 and rotated.json["key"] != key
    assert command(keyed, session_id, {"op": "resume"}, token=key).status == 403
    assert command(keyed, session_id, {"op": "resume"}, token=rotated.json["key"]).status == 200
    await host.close()
    # Neither a token nor a key is ever logged.
    for secret in (TOKEN, key, rotated.json["key"]):
        assert secret not in keyed.stderr()


@run_async
async def test_a_refused_key_creates_no_session(keyed, session_id):
    """Key mode: a bearer that is no token, POSTed to a session that does not exist, is refused
    with 403 and creates nothing: no session (the metric), no row, no key; so the session's first
    visitor still becomes its controller, and is shown its key."""
    created = scrape(keyed.host, keyed.port)[("countdown_sessions_created_total", frozenset())]
    for junk in ("0123456789abcdef", "x" * 16, "f" * 32):
        refused = command(keyed, session_id, {"op": "start", "seconds": 60}, token=junk)
        assert refused.status == 403 and refused.json["code"] == "forbidden", refused.json
    assert scrape(keyed.host, keyed.port)[("countdown_sessions_created_total", frozenset())] == created
    assert rows(keyed, session_id) == 0
    visitor = await Client.connect(keyed.ws_url(session_id))
    assert visitor.snapshot["role"] == "controller" and len(visitor.snapshot["key"]) == 32, visitor.snapshot
    ok = command(keyed, session_id, {"op": "start", "seconds": 60}, token=visitor.snapshot["key"])
    assert ok.status == 200, ok.json
    await visitor.close()


def test_curl_drives_a_session(api, session_id):
    """Debian's curl can start, read and cancel a session."""
    url = f"{api.http_base}/api/v1/sessions/{session_id}"
    started = curl("-H", "Content-Type: application/json", "-d", '{"op":"start","seconds":90}', f"{url}/commands")
    assert json.loads(started.stdout)["state"]["phase"] == "running"
    assert json.loads(curl(url).stdout)["state"]["duration"] == 90
    failed = curl("-o", "/dev/null", "-w", "%{http_code}", "-H", "Content-Type: application/json",
                  "-d", '{"op":"resume"}', f"{url}/commands")
    assert failed.stdout == "409"


# -- cluster mode ---------------------------------------------------------------------------------
@pytest.mark.skipif(not Path(REDIS_SERVER).exists(), reason="redis-server is not installed")
@run_async
async def test_cluster_reads_create_nothing_and_commands_with_token_and_key(session_id):
    """Cluster, key mode: a read writes no Redis key; a token's POST on one instance and the
    controller key's on the other are both ordered and seen everywhere."""
    redis = Redis()
    tokens = token_file(TOKEN)
    servers = [start_server("--redis", redis.url, "--control", "key", "--api-token-file", tokens) for _ in range(2)]
    try:
        # The instances' heartbeats add countdown:instances on their own timer: the
        # keys are taken once it is there, so only what the read might add is compared.
        deadline = time.monotonic() + 10
        while "countdown:instances" not in (before := set(redis.command("KEYS", "*").splitlines())):
            assert time.monotonic() < deadline, f"no heartbeat: {sorted(before)}"
            time.sleep(0.02)
        assert read(servers[0], session_id).json["state"]["phase"] == "idle"
        assert set(redis.command("KEYS", "*").splitlines()) == before
        viewer = await Client.connect(servers[1].ws_url(session_id))
        key = viewer.snapshot["key"]
        ok = command(servers[0], session_id, {"op": "start", "seconds": 60}, token=TOKEN)
        assert ok.status == 200, ok.body
        await viewer.wait_phase("running")
        paused = command(servers[0], session_id, {"op": "pause"}, token=key)
        assert paused.status == 200, paused.body
        await viewer.wait_phase("paused")
        wrong = ("1" if key[0] == "0" else "0") + key[1:]
        assert command(servers[1], session_id, {"op": "resume"}, token=wrong).status == 403
        await viewer.close()
    finally:
        for server in servers:
            server.stop_and_check()
        redis.stop()


@pytest.mark.skipif(not Path(REDIS_SERVER).exists(), reason="redis-server is not installed")
@run_async
async def test_cluster_a_refused_key_creates_no_session(session_id):
    """Cluster, key mode: a bearer that is no token, POSTed on A to a session that exists
    nowhere, is refused with 403 and writes nothing for it to Redis, so the first visitor, on
    B, becomes its controller; that controller's key then commands it through A."""
    redis = Redis()
    servers = [start_server("--redis", redis.url, "--control", "key") for _ in range(2)]
    try:
        for junk in ("0123456789abcdef", "x" * 16):
            refused = command(servers[0], session_id, {"op": "start", "seconds": 60}, token=junk)
            assert refused.status == 403 and refused.json["code"] == "forbidden", refused.json
        assert [k for k in redis.command("KEYS", "*").splitlines() if session_id in k] == []
        visitor = await Client.connect(servers[1].ws_url(session_id))
        assert visitor.snapshot["role"] == "controller" and len(visitor.snapshot["key"]) == 32
        ok = command(servers[0], session_id, {"op": "start", "seconds": 60}, token=visitor.snapshot["key"])
        assert ok.status == 200, ok.json
        await visitor.wait_phase("running")
        await visitor.close()
    finally:
        for server in servers:
            server.stop_and_check()
        redis.stop()

