"""The SQLite outbox end to end (issue 19): the built binary with a real database file and
a webhook receiver in the test on a loopback port, signatures checked with the PyPI
`standardwebhooks` package. An event recorded with its change survives a `kill -9` before
its delivery, and a countdown that elapses while the server is down is reported at
start-up, once."""

from __future__ import annotations

import shutil
import signal
import sqlite3
import tempfile
import time
import uuid
from datetime import datetime, timezone
from pathlib import Path

import pytest

from cdclient import Client, run_async
from hookkit import SECRET, TIMEOUT, Receiver, of, receiver  # noqa: F401 (receiver: a fixture)
from serverproc import start_server


def sid(prefix: str = "w") -> str:
    return prefix + uuid.uuid4().hex[:16]


@pytest.fixture
def data_dir():
    d = tempfile.mkdtemp(prefix="countdown-hooks-")
    yield Path(d)
    shutil.rmtree(d, ignore_errors=True)


def server(data_dir: Path, receiver: Receiver, *extra: str):
    secret_file = data_dir / "secret"
    secret_file.write_text(SECRET + "\n")
    return start_server(
        "--data", str(data_dir / "countdown.db"), "--webhook", receiver.url,
        "--webhook-secret-file", str(secret_file), "--test-webhook-backoff-ms", "100", *extra)


def crash(srv) -> None:
    srv.proc.send_signal(signal.SIGKILL)
    srv.proc.wait(timeout=5)


def outbox_rows(data_dir: Path) -> int:
    db = sqlite3.connect(f"file:{data_dir / 'countdown.db'}?mode=ro", uri=True)
    try:
        return db.execute("SELECT count(*) FROM outbox").fetchone()[0]
    finally:
        db.close()


def wait_outbox_empty(data_dir: Path) -> None:
    """Until every event is settled: a 2xx the receiver sent is not yet one the server
    read, and an event stopped between the two is sent again (at least once)."""
    deadline = time.monotonic() + TIMEOUT
    while outbox_rows(data_dir) and time.monotonic() < deadline:
        time.sleep(0.1)  # another process's file; no event to await
    assert outbox_rows(data_dir) == 0


@run_async
async def test_kill_9_between_a_finish_and_its_delivery(data_dir, receiver):
    """A wait is done, and a 1 s run elapses, while the receiver answers 500 to every
    finish; the server is killed with SIGKILL after both were refused; after the restart
    the same events (same webhook-id, same body) arrive and are taken with a 2xx, and the
    outbox empties."""
    done, elapsed = sid("d"), sid("e")
    receiver.answer = lambda e: 500 if e["body"]["type"] == "session.finished" else 200
    srv = server(data_dir, receiver)
    try:
        c = await Client.connect(srv.ws_url(done))
        await c.command({"op": "wait", "label": "Deploying"})
        await c.command({"op": "done", "label": "Deployed"})
        await c.close()
        d = await Client.connect(srv.ws_url(elapsed))
        await d.command({"op": "start", "seconds": 1})
        await d.close()
        refused = receiver.wait_for(
            lambda ev: of(ev, done, "session.finished", 500) and of(ev, elapsed, "session.finished", 500),
            "refused finishes")
    finally:
        crash(srv)
    first = {s: of(refused, s, "session.finished")[0] for s in (done, elapsed)}
    assert first[done]["body"]["data"]["outcome"] == "done", first
    assert first[elapsed]["body"]["data"]["outcome"] == "elapsed", first
    assert of(refused, done, "session.waiting", 200), refused
    receiver.answer = lambda e: 200
    srv = server(data_dir, receiver, "--port", str(srv.port))
    try:
        events = receiver.wait_for(
            lambda ev: of(ev, done, "session.finished", 200) and of(ev, elapsed, "session.finished", 200),
            "finishes after the restart")
        for session in (done, elapsed):
            delivered = of(events, session, "session.finished", 200)[0]
            assert delivered["id"] == first[session]["id"]
            assert delivered["body"] == first[session]["body"]
            assert delivered["body"]["data"]["state"]["phase"] == "finished"
        assert of(events, done, "session.finished", 200)[0]["body"]["data"]["state"]["label"] == "Deployed"
        wait_outbox_empty(data_dir)
    finally:
        srv.stop_and_check()


@run_async
async def test_countdown_that_elapses_while_down_is_sent_at_start_up(data_dir, receiver):
    """A 3 s run and a wait with a 3 s timeout are started, the server is killed with
    SIGKILL at once, and restarted with its clock 10 s on: each session's
    session.finished (elapsed, timeout) arrives, stamped at its own deadline, once; a
    clean restart after that records neither again."""
    run, wait, marker = sid("r"), sid("t"), sid("m")
    srv = server(data_dir, receiver)
    try:
        a = await Client.connect(srv.ws_url(run))
        started, _ = await a.command({"op": "start", "seconds": 3})
        b = await Client.connect(srv.ws_url(wait))
        waiting, _ = await b.command({"op": "wait", "timeoutSeconds": 3, "timeoutLabel": "Too slow"})
        receiver.wait_for(lambda ev: of(ev, run, "session.started") and of(ev, wait, "session.waiting"),
                          "started and waiting")
    finally:
        crash(srv)
    srv = server(data_dir, receiver, "--port", str(srv.port), "--test-clock-offset-ms", "10000")
    try:
        events = receiver.wait_for(
            lambda ev: of(ev, run, "session.finished") and of(ev, wait, "session.finished"),
            "finishes at start-up")
        elapsed = of(events, run, "session.finished")[0]["body"]
        timed_out = of(events, wait, "session.finished")[0]["body"]
        assert elapsed["data"]["outcome"] == "elapsed", elapsed
        assert timed_out["data"]["outcome"] == "timeout", timed_out
        assert timed_out["data"]["state"]["label"] == "Too slow", timed_out
        assert iso_ms(elapsed["timestamp"]) == started["endsAt"], (elapsed, started)
        assert iso_ms(timed_out["timestamp"]) == waiting["timeoutAt"], (timed_out, waiting)
        wait_outbox_empty(data_dir)
    finally:
        srv.stop_and_check()
    # Stored finished: the next start records no finish for either.
    srv = server(data_dir, receiver, "--port", str(srv.port), "--test-clock-offset-ms", "20000")
    try:
        m = await Client.connect(srv.ws_url(marker))
        await m.command({"op": "start", "seconds": 60})
        events = receiver.wait_for(lambda ev: of(ev, marker, "session.started"), "the marker")
        # Settled and stopped cleanly, so not even a repeat under the same webhook-id.
        finishes = of(events, run, "session.finished") + of(events, wait, "session.finished")
        assert len(finishes) == 2, [e["body"] for e in finishes]
        await m.close()
    finally:
        srv.stop_and_check()


@run_async
async def test_elapsing_while_up_is_recorded_once(data_dir, receiver):
    """A 1 s run elapses while the server runs: one session.finished (elapsed) arrives,
    and a restart after it does not record another."""
    session, marker = sid("e"), sid("m")
    srv = server(data_dir, receiver)
    try:
        c = await Client.connect(srv.ws_url(session))
        started, _ = await c.command({"op": "start", "seconds": 1})
        await c.wait_phase("finished", timeout=5)
        events = receiver.wait_for(lambda ev: of(ev, session, "session.finished"), "the finish")
        finish = of(events, session, "session.finished")[0]
        assert finish["body"]["data"]["outcome"] == "elapsed"
        assert iso_ms(finish["body"]["timestamp"]) == started["endsAt"]
        await c.close()
        wait_outbox_empty(data_dir)
    finally:
        srv.stop_and_check()
    srv = server(data_dir, receiver, "--port", str(srv.port))
    try:
        m = await Client.connect(srv.ws_url(marker))
        await m.command({"op": "start", "seconds": 60})
        events = receiver.wait_for(lambda ev: of(ev, marker, "session.started"), "the marker")
        assert of(events, session, "session.finished") == [finish]
        await m.close()
    finally:
        srv.stop_and_check()


def iso_ms(text: str) -> int:
    """`2026-12-01T18:30:00.250Z` as epoch ms."""
    moment = datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=timezone.utc)
    return round(moment.timestamp() * 1000)


@run_async
async def test_stage_events_and_the_overtime_cap_on_the_sqlite_path(data_dir, receiver):
    """stop reports session.finished (stopped, with overMs), message and blackout their
    own types, and reaching overtime nothing; an overtime run (adjusted to 20 s short of
    the day's cap) that passes the cap while the server is down finishes at start-up as
    stopped, stamped at overSince + 1 day, with overMs a day, once."""
    talk, capped = sid("s"), sid("c")
    srv = server(data_dir, receiver)
    try:
        c = await Client.connect(srv.ws_url(talk))
        await c.command({"op": "message", "text": "Wrap up"})
        await c.command({"op": "blackout", "on": True})
        await c.command({"op": "start", "seconds": 1, "overtime": True})
        await c.wait_phase("overtime", timeout=3)
        stop, _ = await c.command({"op": "stop"})
        await c.close()
        d = await Client.connect(srv.ws_url(capped))
        started, _ = await d.command({"op": "start", "seconds": 1, "overtime": True})
        await d.wait_phase("overtime", timeout=3)
        moved, _ = await d.command({"op": "adjust", "seconds": -86_380})
        assert moved["overSince"] == started["endsAt"] - 86_380_000, moved
        await d.close()
        events = receiver.wait_for(
            lambda ev: all(of(ev, talk, t) for t in ("session.message", "session.blackout", "session.finished")),
            "the message, the blackout and the stop's finish")
    finally:
        crash(srv)
    message = of(events, talk, "session.message")[0]["body"]
    assert message["data"]["state"]["message"] == "Wrap up", message
    blackout = of(events, talk, "session.blackout")[0]["body"]
    assert blackout["data"]["state"]["blackout"] is True, blackout
    finished = of(events, talk, "session.finished")[0]["body"]
    assert finished["data"]["outcome"] == "stopped", finished
    assert finished["data"]["state"]["overMs"] == stop["overMs"] > 0, (finished, stop)
    # Reaching overtime is no command and no finish: nothing is reported for it.
    assert not of(events, capped, "session.finished"), events
    day = 86_400_000
    srv = server(data_dir, receiver, "--port", str(srv.port), "--test-clock-offset-ms", "30000")
    try:
        events = receiver.wait_for(lambda ev: of(ev, capped, "session.finished"), "the capped overtime")
        body = of(events, capped, "session.finished")[0]["body"]
        assert body["data"]["outcome"] == "stopped", body
        assert body["data"]["state"]["overMs"] == day, body
        assert iso_ms(body["timestamp"]) == moved["overSince"] + day, (body, moved)
        wait_outbox_empty(data_dir)
    finally:
        srv.stop_and_check()
    srv = server(data_dir, receiver, "--port", str(srv.port), "--test-clock-offset-ms", "40000")
    try:
        back = await Client.connect(srv.ws_url(capped))
        assert back.snapshot["state"]["outcome"] == "stopped", back.snapshot
        await back.close()
        wait_outbox_empty(data_dir)
    finally:
        srv.stop_and_check()
    assert len(of(receiver.events, capped, "session.finished")) == 1, receiver.events
