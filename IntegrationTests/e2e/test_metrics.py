"""End-to-end tests of GET /metrics: the Prometheus text format, parsed with
prometheus_client's own parser; counters that move by exactly the connections,
refusals, frames and bytes a test made; where /metrics is served; and that its series
do not grow with the sessions."""

from __future__ import annotations

import asyncio
import json
import re
import struct
import uuid

import pytest

from cdclient import Client, http_get, run_async
from opskit import delta, scrape, value, wait_event, wait_scrape
from rawws import OP_CLOSE, RawWS
from serverproc import REPO_ROOT, start_server
from test_handshake import handshake


def sid() -> str:
    return "t" + uuid.uuid4().hex


@pytest.fixture(scope="module")
def quiet():
    """A server of its own, so no other test's traffic moves its counters."""
    srv = start_server()
    yield srv
    srv.stop_and_check()


def test_metrics_parse_and_have_every_family(quiet):
    """/metrics parses with prometheus_client and has the families listed here,
    with HELP and TYPE lines and monotonic-looking histograms."""
    status, headers, body = http_get(quiet.host, quiet.port, "/metrics")
    text = body.decode()
    samples = scrape(quiet.host, quiet.port)
    names = {name for name, _ in samples}
    for family in [
        "countdown_connections_open", "countdown_connections_accepted_total",
        "countdown_upgrades_refused_total", "countdown_frames_sent_total", "countdown_bytes_sent_total",
        "countdown_service_loop_seconds_bucket", "countdown_sessions", "countdown_sessions_created_total",
        "countdown_sessions_forgotten_total", "countdown_commands_in_flight", "countdown_patches_merged_total",
        "countdown_replies_dropped_total",
        "countdown_tick_lateness_seconds_bucket", "process_resident_memory_bytes", "process_start_time_seconds",
        "process_cpu_seconds_total", "process_max_fds", "countdown_build_info", "countdown_ready",
        "countdown_metrics_render_seconds", "countdown_log_lines_total", "countdown_log_lines_dropped_total",
    ]:
        assert family in names, f"{family} missing from /metrics"
    for family in ["countdown_connections_closed_total", "countdown_commands_total"]:
        assert f"# TYPE {family} counter" in text
    assert value(samples, "process_resident_memory_bytes") > 1_000_000
    assert value(samples, "countdown_ready") == 1
    # Histogram buckets are cumulative and end at the count.
    for hist in ["countdown_service_loop_seconds", "countdown_tick_lateness_seconds"]:
        buckets = sorted(
            ((float(dict(labels)["le"]), v) for (name, labels), v in samples.items() if name == hist + "_bucket"))
        counts = [v for _, v in buckets]
        assert counts == sorted(counts) and buckets[-1][0] == float("inf")
        assert buckets[-1][1] == value(samples, hist + "_count")
    assert value(samples, "countdown_service_loop_seconds_count") > 0
    # The longest iteration lies in the histogram's highest non-empty bucket or below.
    longest = value(samples, "countdown_service_loop_max_seconds")
    loop_buckets = sorted((float(dict(labels)["le"]), v) for (name, labels), v in samples.items()
                          if name == "countdown_service_loop_seconds_bucket")
    assert 0 < longest <= next(le for le, v in loop_buckets if v == loop_buckets[-1][1])


def test_every_family_served_is_documented(quiet):
    """Every family /metrics declares (a server with storage, so the store's are there too)
    has a row in one of docs/operating.md's metric tables."""
    _, _, body = http_get(quiet.host, quiet.port, "/metrics")
    families = set(re.findall(r"^# TYPE (\S+) ", body.decode(), re.M))
    assert "countdown_store_commits_total" in families, "the server under test has no storage"
    text = (REPO_ROOT / "docs" / "operating.md").read_text()
    rows = text[text.index("\n## Metrics"):text.index("\n## Graphs worth watching")]
    documented = set()
    for line in rows.split("\n"):
        if line.startswith("| `"):
            documented |= set(re.findall(r"`([a-z_]+)`", line.split("|")[1]))
    missing = sorted(families - documented)
    assert not missing, f"docs/operating.md's metric tables lack {missing}"


def test_process_open_fds_is_sampled(quiet):
    """process_open_fds appears (counted off the service thread) and is plausible."""
    samples = wait_scrape(quiet.host, quiet.port, lambda s: ("process_open_fds", frozenset()) in s,
                          what="process_open_fds")
    assert 3 <= value(samples, "process_open_fds") < 200


async def raw_viewer(srv, session: str) -> tuple[RawWS, bytes]:
    ws = await RawWS.open(srv.host, srv.port, f"/ws/{session}")
    assert ws.status == 101, ws.handshake.raw
    snapshot = await ws.recv_message(5)
    assert snapshot is not None
    return ws, snapshot[1] if isinstance(snapshot, tuple) else snapshot


@run_async
async def test_connection_counters_move_by_exactly_what_the_test_did(quiet):
    """Three viewers on three sessions, each sent its snapshot and one pong; two close
    with 1000 and one with 4000; two upgrades are refused (bad session id, foreign
    origin). accepted, open, closed{code}, refused{cause}, frames and bytes sent move by
    exactly that, and session ids never appear as label values."""
    before = scrape(quiet.host, quiet.port)
    sessions = [sid() for _ in range(3)]
    viewers = []
    sent_bytes = 0
    for session in sessions:
        ws = await RawWS.open(quiet.host, quiet.port, f"/ws/{session}")
        assert ws.status == 101
        _, opcode, snapshot = await ws.recv_frame(5)
        await ws.send_json({"op": "ping", "t": 1})
        _, _, pong = await ws.recv_frame(5)
        assert json.loads(pong)["type"] == "pong"
        sent_bytes += len(snapshot) + len(pong)
        viewers.append(ws)
    bad_id = await RawWS.open(quiet.host, quiet.port, "/ws/not%20valid")
    foreign = await RawWS.open(quiet.host, quiet.port, f"/ws/{sid()}", origin="http://evil.example")
    assert (bad_id.status, foreign.status) == (404, 403)
    for ws in (bad_id, foreign):
        ws.close()

    mid = scrape(quiet.host, quiet.port)
    assert delta(before, mid, "countdown_connections_accepted_total") == 3
    assert delta(before, mid, "countdown_connections_open") == 3
    assert delta(before, mid, "countdown_frames_sent_total") == 6
    assert delta(before, mid, "countdown_bytes_sent_total") == sent_bytes

    for ws, code in zip(viewers, (1000, 1000, 4000)):
        await ws.send_frame(OP_CLOSE, struct.pack("!H", code))
        assert await ws.wait_closed(5)
        ws.close()
    after = wait_scrape(quiet.host, quiet.port,
                        lambda s: delta(before, s, "countdown_connections_open") == 0, what="all closed")
    assert delta(before, after, "countdown_connections_closed_total", code="1000") == 2
    assert delta(before, after, "countdown_connections_closed_total", code="4000") == 1
    closed = sum(v for (n, _), v in after.items() if n == "countdown_connections_closed_total") - sum(
        v for (n, _), v in before.items() if n == "countdown_connections_closed_total")
    assert closed == 3
    assert delta(before, after, "countdown_upgrades_refused_total", cause="bad_session_id") == 1
    assert delta(before, after, "countdown_upgrades_refused_total", cause="origin") == 1
    for cause in ("per_ip", "total_cap", "bad_version", "bad_key", "draining", "session_cap"):
        assert delta(before, after, "countdown_upgrades_refused_total", cause=cause) == 0
    assert delta(before, after, "countdown_connections_accepted_total") == 3
    labels = {v for (_, ls), _ in after.items() for _, v in ls}
    assert not labels & set(sessions), "a session id became a label value"


@run_async
async def test_server_close_codes_and_handshake_refusals_are_counted(quiet):
    """A binary frame closes with 1003 (counted under code 1003); a bad version and a
    bad key count as bad_version and bad_key."""
    before = scrape(quiet.host, quiet.port)
    ws = await RawWS.open(quiet.host, quiet.port, f"/ws/{sid()}")
    await ws.recv_frame(5)
    await ws.send_frame(0x2, b"\x00")
    # This client never answers the close: lws hangs up once its 5 s wait for that ends.
    assert await ws.wait_closed(10)
    ws.close()
    assert (await handshake(quiet, version="8"))[0] == 426
    assert (await handshake(quiet, key="short"))[0] == 400
    after = wait_scrape(quiet.host, quiet.port,
                        lambda s: delta(before, s, "countdown_connections_closed_total", code="1003") == 1,
                        what="the 1003 close")
    assert delta(before, after, "countdown_upgrades_refused_total", cause="bad_version") == 1
    assert delta(before, after, "countdown_upgrades_refused_total", cause="bad_key") == 1


@run_async
async def test_command_counters_move_by_exactly_the_commands_sent(quiet):
    """start ok, start busy, cancel ok, cancel not_running, and one bad_request: each
    countdown_commands_total{op,result} moves by exactly one; one session created."""
    before = scrape(quiet.host, quiet.port)
    c = await Client.connect(quiet.ws_url(sid()))
    await c.command({"op": "start", "seconds": 60})
    await c.expect_error({"op": "start", "seconds": 60}, "busy")
    await c.command({"op": "cancel"})
    await c.expect_error({"op": "cancel"}, "not_running")
    await c.close()
    after = scrape(quiet.host, quiet.port)
    for op, result in [("start", "ok"), ("start", "busy"), ("cancel", "ok"), ("cancel", "not_running")]:
        assert delta(before, after, "countdown_commands_total", op=op, result=result) == 1, (op, result)
    total = sum(v for (n, _), v in after.items() if n == "countdown_commands_total") - sum(
        v for (n, _), v in before.items() if n == "countdown_commands_total")
    assert total == 4
    assert delta(before, after, "countdown_sessions_created_total") == 1


async def make_sessions(srv, count: int, batch: int = 200) -> None:
    """Creates `count` sessions, each with a 1-day countdown so none is forgotten."""
    async def one(session: str) -> None:
        ws = await RawWS.open(srv.host, srv.port, f"/ws/{session}")
        assert ws.status == 101
        await ws.recv_frame(5)
        await ws.send_json({"op": "start", "seconds": 86400})
        ws.close()

    prefix = uuid.uuid4().hex[:8]
    for first in range(0, count, batch):
        await asyncio.gather(*(one(f"m{prefix}-{i}") for i in range(first, min(count, first + batch))))


@run_async
async def test_metrics_do_not_grow_with_thousands_of_sessions():
    """/metrics has the same series with 3000 live sessions as with 30: nothing in it is
    per session, so its render is no O(sessions) pass. The render time is reported in the
    next scrape; how long it takes is measured by bench/metrics_render.py, not here."""
    def running(samples) -> float:
        return value(samples, "countdown_sessions", phase="running")

    srv = start_server("--max-connections-per-ip", "5000", "--max-sessions-per-address", "5000")
    try:
        await make_sessions(srv, 30)
        few = wait_scrape(srv.host, srv.port, lambda m: running(m) == 30, what="30 running")
        await make_sessions(srv, 2970)
        many = wait_scrape(srv.host, srv.port, lambda m: running(m) == 3000, timeout=30,
                           what="3000 running")
        assert set(many) == set(few), set(many) ^ set(few)
        assert 0 < value(many, "countdown_metrics_render_seconds") < float("inf")
    finally:
        srv.stop_and_check()


def test_metrics_placement():
    """auto (default): on a loopback --host the main port serves /metrics; with a
    --metrics-port only that port does, bound to loopback. --metrics off: 404.
    /healthz and /readyz are on the metrics port too; other paths there are 404."""
    off = start_server("--metrics", "off")
    try:
        assert http_get(off.host, off.port, "/metrics")[0] == 404
        assert http_get(off.host, off.port, "/readyz")[0] == 200
    finally:
        off.stop_and_check()

    split = start_server("--metrics-port", "0")
    try:
        line = wait_event(split, "listening")
        port = line["metrics_port"]
        assert line["metrics_host"] == "127.0.0.1"
        assert http_get(split.host, split.port, "/metrics")[0] == 404
        assert http_get("127.0.0.1", port, "/metrics")[0] == 200
        assert http_get("127.0.0.1", port, "/healthz")[0] == 200
        assert http_get("127.0.0.1", port, "/readyz")[0] == 200
        assert http_get("127.0.0.1", port, "/")[0] == 404
        assert http_get("127.0.0.1", port, "/index.html")[0] == 404
        assert value(scrape("127.0.0.1", port), "countdown_ready") == 1
        upgrade = asyncio.run(RawWS.open("127.0.0.1", port, f"/ws/{sid()}"))
        assert upgrade.status == 404, "the metrics port serves no WebSocket"
        upgrade.close()
    finally:
        split.stop_and_check()


def test_metrics_not_on_a_public_main_port_by_default():
    """Listening on every address (0.0.0.0), the main port does not answer /metrics
    unless --metrics main says so."""
    public = start_server("--host", "0.0.0.0")
    try:
        assert http_get("127.0.0.1", public.port, "/metrics")[0] == 404
        assert wait_event(public, "listening")["metrics"] == "off"
    finally:
        public.stop_and_check()
    forced = start_server("--host", "0.0.0.0", "--metrics", "main")
    try:
        assert http_get("127.0.0.1", forced.port, "/metrics")[0] == 200
    finally:
        forced.stop_and_check()
