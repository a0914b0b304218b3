"""Sessions survive restarts and crashes (issue 11): the built binary with a real SQLite
file, killed with SIGKILL and restarted, and what reconnecting clients then see."""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import sqlite3
import subprocess
import tempfile
import time
import uuid
from pathlib import Path

import pytest

from cdclient import Client, now_ms, run_async, settle
from serverproc import server_binary, start_server

RESTART_WITHIN_S = 1.0


def sid(prefix: str = "d") -> str:
    return prefix + uuid.uuid4().hex[:16]


@pytest.fixture
def data_dir():
    d = tempfile.mkdtemp(prefix="countdown-data-")
    yield Path(d)
    shutil.rmtree(d, ignore_errors=True)


def crash(srv) -> None:
    """SIGKILL: no drain, no clean close, as a power cut or an OOM kill would."""
    srv.proc.send_signal(signal.SIGKILL)
    srv.proc.wait(timeout=5)


def restart(srv, data: Path, *extra: str):
    """A new process on the same port and the same database."""
    return start_server("--port", str(srv.port), "--data", str(data), *extra)


def rows(data: Path) -> int:
    db = sqlite3.connect(f"file:{data}?mode=ro", uri=True)
    try:
        return db.execute("SELECT count(*) FROM sessions").fetchone()[0]
    finally:
        db.close()


@run_async
async def test_kill_9_restores_every_phase(data_dir):
    """5 s, 60 s and 600 s runs and a paused one, each with a viewer; SIGKILL at second 2,
    restart within 1 s: the same epoch, the original endsAt, the same remainingMs, seqs
    not lower than before, and the 5 s run finished once its deadline has passed."""
    data = data_dir / "countdown.db"
    srv = start_server("--data", str(data))
    ids = {"s5": sid(), "s60": sid(), "s600": sid(), "paused": sid()}
    clients = {k: await Client.connect(srv.ws_url(v), name=k) for k, v in ids.items()}
    epoch = clients["s5"].snapshot["epoch"]
    ends = {}
    for name, seconds in (("s5", 5), ("s60", 60), ("s600", 600), ("paused", 60)):
        patch, _ = await clients[name].command({"op": "start", "seconds": seconds})
        ends[name] = patch["endsAt"]
    await clients["s5"].wait_state(lambda s: s["remaining"] <= 4, 3, "a tick")
    frozen, _ = await clients["paused"].command({"op": "pause"})
    await clients["s60"].wait_state(lambda s: s["remaining"] <= 58, 3, "second 2")
    seen = {k: c.seq for k, c in clients.items()}
    killed_at = time.monotonic()
    crash(srv)
    srv2 = restart(srv, data)
    try:
        assert time.monotonic() - killed_at < RESTART_WITHIN_S + 2.0
        back = {k: await Client.connect(srv2.ws_url(v) + f"?since={seen[k]}", name=k) for k, v in ids.items()}
        for name, c in back.items():
            assert c.snapshot["epoch"] == epoch, (name, c.snapshot)
            assert c.snapshot["seq"] >= seen[name], (name, seen[name], c.snapshot)
        assert back["s60"].snapshot["state"]["endsAt"] == ends["s60"]
        assert back["s600"].snapshot["state"]["endsAt"] == ends["s600"]
        assert back["s60"].snapshot["state"]["phase"] == "running"
        p = back["paused"].snapshot["state"]
        assert p["phase"] == "paused" and p["remainingMs"] == frozen["remainingMs"], p
        s5 = await back["s5"].wait_phase("finished", timeout=6)
        assert now_ms() >= ends["s5"] - 50
        assert s5["endsAt"] is None
        for c in list(back.values()):
            await c.close()
    finally:
        srv2.stop_and_check()


@run_async
async def test_acked_command_survives_kill_9(data_dir):
    """Twenty times: SIGKILL the moment an ack arrives; after the restart that session
    shows the command's effect (durable before ack)."""
    data = data_dir / "countdown.db"
    srv = start_server("--data", str(data))
    try:
        for round_index in range(20):
            session = sid("a")
            c = await Client.connect(srv.ws_url(session))
            ops = [{"op": "start", "seconds": 300, "id": 1}]
            if round_index % 2:
                ops.append({"op": "pause", "id": 2})
            for op in ops:
                await c.send(op)
                reply = await c.reply()
                assert reply["type"] == "ack", reply
            crash(srv)  # the moment the last ack arrived
            expected = c.state
            srv = restart(srv, data)
            d = await Client.connect(srv.ws_url(session))
            got = d.snapshot["state"]
            assert got["phase"] == expected["phase"], (round_index, expected, got)
            assert got.get("endsAt") == expected.get("endsAt"), (round_index, expected, got)
            assert got.get("remainingMs") == expected.get("remainingMs"), (round_index, expected, got)
            await d.close()
    finally:
        srv.stop_and_check()


@run_async
async def test_thousand_sessions_survive_five_crashes(data_dir):
    """1,000 running sessions survive five back-to-back SIGKILL restarts with identical endsAt."""
    data = data_dir / "countdown.db"
    srv = start_server("--data", str(data))
    ids = [sid("r") for _ in range(1000)]

    async def start_one(session: str) -> int:
        c = await Client.connect(srv.ws_url(session), timeout=20)
        patch, _ = await c.command({"op": "start", "seconds": 3600})
        await c.close()
        return patch["endsAt"]

    async def read_one(session: str) -> int:
        c = await Client.connect(srv.ws_url(session), timeout=20)
        ends = c.snapshot["state"]["endsAt"]
        await c.close()
        return ends

    expected = {}
    for batch in range(0, len(ids), 100):
        chunk = ids[batch:batch + 100]
        expected.update(zip(chunk, await asyncio.gather(*(start_one(s) for s in chunk))))
    try:
        for _ in range(5):
            crash(srv)
            srv = restart(srv, data)
        got = {}
        for batch in range(0, len(ids), 100):
            chunk = ids[batch:batch + 100]
            got.update(zip(chunk, await asyncio.gather(*(read_one(s) for s in chunk))))
        assert got == expected
        assert rows(data) == 1000
    finally:
        srv.stop_and_check()


@run_async
async def test_forgotten_sessions_leave_no_rows(data_dir):
    """10,000 sessions that each ran a command, then were left and forgotten, leave the row count at 0."""
    data = data_dir / "countdown.db"
    srv = start_server("--data", str(data), "--forget-after", "1")
    try:
        async def one() -> None:
            c = await Client.connect(srv.ws_url(sid("f")), timeout=20)
            await c.command({"op": "start", "seconds": 1})
            await c.command({"op": "cancel"})
            await c.close()

        for _ in range(100):
            await asyncio.gather(*(one() for _ in range(100)))
        assert rows(data) > 0
        deadline = time.monotonic() + 20
        while rows(data) and time.monotonic() < deadline:
            await asyncio.sleep(0.2)  # polling a file another process writes; no event to await
        assert rows(data) == 0
    finally:
        srv.stop_and_check()


def run_binary(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(server_binary()), "--port", "0", *args], capture_output=True, text=True, timeout=20,
        stdin=subprocess.DEVNULL)


def test_garbage_file_exits_2_unchanged(data_dir):
    """A file that is not a SQLite database: exit 2, a message naming it, the bytes unchanged."""
    data = data_dir / "garbage.db"
    data.write_bytes(os.urandom(8192))
    before = data.read_bytes()
    r = run_binary("--data", str(data))
    assert r.returncode == 2, r
    assert str(data) in r.stderr, r.stderr
    assert data.read_bytes() == before
    assert not (data_dir / "garbage.db-wal").exists()


def test_newer_schema_exits_2_unchanged(data_dir):
    """A database from a newer server (higher user_version): exit 2, the file unchanged."""
    edited_file_exits_2_unchanged(data_dir / "newer.db", ["PRAGMA user_version = 999", "CREATE TABLE future (x)"],
                                  "999")


def edited_file_exits_2_unchanged(data: Path, statements: list[str], complaint: str) -> None:
    """After `statements`, the server exits 2 naming the file and `complaint`, and the
    file is byte for byte as the statements left it."""
    db = sqlite3.connect(data)
    for statement in statements:
        db.execute(statement)
    db.commit()
    db.close()
    before = data.read_bytes()
    r = run_binary("--data", str(data))
    assert r.returncode == 2, r
    assert str(data) in r.stderr and complaint in r.stderr, r.stderr
    assert data.read_bytes() == before


def mount_tmpfs(path: Path, options: str) -> None:
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(path)], capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"mounting a tmpfs was refused here: {r.stderr.strip()}")


def umount(path: Path) -> None:
    subprocess.run(["umount", "-l", str(path)], capture_output=True)


def test_read_only_path_exits_2(data_dir):
    """A database on a read-only mount (root ignores chmod): exit 2 with a clear message, file unchanged."""
    mnt = data_dir / "ro"
    mnt.mkdir()
    mount_tmpfs(mnt, "size=4m")
    try:
        db = sqlite3.connect(mnt / "countdown.db")
        db.execute("PRAGMA user_version = 1")
        db.close()  # an open file keeps the mount from going read-only
        before = (mnt / "countdown.db").read_bytes()
        subprocess.run(["mount", "-o", "remount,ro", str(mnt)], check=True)
        for target in (mnt / "countdown.db", mnt / "new.db"):
            r = run_binary("--data", str(target))
            assert r.returncode == 2, r
            assert str(target) in r.stderr, r.stderr
            assert "read-only" in r.stderr.lower() or "readonly" in r.stderr.lower(), r.stderr
        assert (mnt / "countdown.db").read_bytes() == before
    finally:
        umount(mnt)


@run_async
async def test_full_disk_refuses_commands_and_recovers(data_dir):
    """On a full filesystem commands get `unavailable`, nothing half-applied is shown, a
    running countdown keeps ticking and finishes; once space returns, commands work again."""
    mnt = data_dir / "small"
    mnt.mkdir()
    mount_tmpfs(mnt, "size=2m")
    srv = None
    try:
        srv = start_server("--data", str(mnt / "countdown.db"))
        runner = await Client.connect(srv.ws_url(sid("run")), name="runner")
        other = await Client.connect(srv.ws_url(sid("other")), name="other")
        await runner.command({"op": "start", "seconds": 4})
        filler = mnt / "filler"
        # Unbuffered: a partly written buffer would raise again from close().
        with open(filler, "wb", buffering=0) as f:
            try:
                while True:
                    f.write(b"\0" * 65536)
                    f.flush()
            except OSError:
                pass
        refused = None
        for attempt in range(200):
            seq = other.seq
            await other.send({"op": "start", "seconds": 60, "id": attempt})
            reply = await other.reply()
            if reply["type"] == "error":
                refused = reply
                break
            await other.command({"op": "cancel"})
        assert refused is not None, "no command was refused on a full disk"
        assert refused["code"] == "unavailable" and refused["message"], refused
        assert other.seq == seq and other.state["phase"] != "running"
        # The running countdown keeps ticking and finishes on its own.
        await runner.wait_phase("finished", timeout=8)
        assert srv.alive()
        filler.unlink()
        patch, _ = await other.command({"op": "start", "seconds": 60, "id": "after"}, timeout=10)
        assert patch["phase"] == "running"
        for c in (runner, other):
            await c.close()
    finally:
        if srv is not None:
            srv.stop_and_check()
        umount(mnt)


# Rows the server never writes, each one field off a good running row (issue 16). The values are
# SQL, so that SQLite stores them with the storage class a damaged or hand-edited file would hold.
DAMAGED_ROWS = {
    "ends-at-2-63": ("'running', 60, 9223372036854775808, NULL, NULL, 1, 1, {now}", "ends_at holds real"),
    "ends-at-minus-2-63": ("'running', 60, -9223372036854775808, NULL, NULL, 1, 1, {now}", "endsAt in range"),
    # In range for a record, but a deadline no command could set: seconds left past Int32.
    "ends-at-year-9999": ("'running', 60, 253402300799999, NULL, NULL, 1, 1, {now}", "more than 30 days after"),
    "duration-2-40": ("'running', 1099511627776, {ends}, NULL, NULL, 1, 1, {now}", "duration 1099511627776"),
    "duration-text": ("'running', 'sixty', {ends}, NULL, NULL, 1, 1, {now}", "duration holds text"),
    "updated-at-1e308": ("'running', 60, {ends}, NULL, NULL, 1, 1, 1e308", "updated_at holds real"),
    "label-nul": ("'running', 60, {ends}, NULL, 'Fin' || char(0) || 'i', 1, 1, {now}", "finishedLabel"),
    "phase-bogus": ("'bogus', 60, {ends}, NULL, NULL, 1, 1, {now}", "unknown phase"),
    "paused-and-running": ("'running', 60, {ends}, 5000, NULL, 1, 1, {now}", "no remainingMs"),
}


def insert_damaged_rows(data: Path, now: int) -> None:
    """Through the sqlite3 C API (Python's module), with CHECK constraints off, as a tool
    or a bad disk could leave the file."""
    db = sqlite3.connect(data)
    try:
        db.execute("PRAGMA ignore_check_constraints = ON")
        for name, (values, _) in DAMAGED_ROWS.items():
            db.execute(
                "INSERT INTO sessions (id, phase, duration, ends_at, remaining_ms, finished_label, seq, revision,"
                f" updated_at) VALUES ('{name}', {values.format(now=now, ends=now + 60_000)})")
        db.commit()
    finally:
        db.close()


@run_async
async def test_damaged_rows_are_set_aside_and_the_rest_served(data_dir):
    """A file holding rows with endsAt ±2^63 or in the year 9999, duration 2^40, text in an integer column, a NUL
    in the label and phase 'bogus': the server starts (no trap), logs each session by id with
    a reason, moves them to damaged_sessions, and serves the good session as it was."""
    data = data_dir / "countdown.db"
    srv = start_server("--data", str(data))
    good = sid("good")
    c = await Client.connect(srv.ws_url(good))
    patch, _ = await c.command({"op": "start", "seconds": 600})
    await c.close()
    srv.stop_and_check()
    insert_damaged_rows(data, int(now_ms()))

    srv2 = restart(srv, data)
    try:
        back = await Client.connect(srv2.ws_url(good))
        assert back.snapshot["state"]["phase"] == "running", back.snapshot
        assert back.snapshot["state"]["endsAt"] == patch["endsAt"]
        await back.close()
        log = srv2.stderr()
        for name, (_, reason) in DAMAGED_ROWS.items():
            line = next((ln for ln in log.splitlines() if "session_set_aside" in ln and f'"{name}"' in ln), None)
            assert line is not None and reason in line, (name, reason, log)
        # The id is free again: a viewer of it gets a fresh idle session.
        fresh = await Client.connect(srv2.ws_url("phase-bogus"))
        assert fresh.snapshot["state"]["phase"] == "idle", fresh.snapshot
        await fresh.close()
    finally:
        srv2.stop_and_check()
    db = sqlite3.connect(f"file:{data}?mode=ro", uri=True)
    try:
        moved = {r[0]: r[1] for r in db.execute("SELECT id, reason FROM damaged_sessions")}
        kept = [r[0] for r in db.execute("SELECT id FROM sessions")]
    finally:
        db.close()
    assert sorted(moved) == sorted(DAMAGED_ROWS), moved
    assert all(moved.values()), moved
    assert good in kept and not set(kept) & set(DAMAGED_ROWS), kept
    # Set aside once: the next start finds nothing more to log.
    srv3 = restart(srv, data)
    try:
        assert "session_set_aside" not in srv3.stderr()
    finally:
        srv3.stop_and_check()


def test_missing_column_exits_2_unchanged(data_dir):
    """A sessions table that lacks a column: exit 2, a message naming the file and the
    column, the file unchanged."""
    data = data_dir / "countdown.db"
    srv = start_server("--data", str(data))
    srv.stop_and_check()
    edited_file_exits_2_unchanged(data, ["ALTER TABLE sessions DROP COLUMN updated_at"], "lacks updated_at")


@run_async
async def test_second_server_on_the_same_file_exits_1(data_dir):
    """Two servers in one directory: the second (by another spelling of the path too) exits 1
    with a message naming the file and the first server's pid; the first still serves and
    commands as before, and once it stops the file can be opened again."""
    data = data_dir / "countdown.db"
    first = start_server("--data", str(data))
    try:
        for spelling in (str(data), str(data_dir / "." / "countdown.db")):
            r = run_binary("--data", spelling)
            assert r.returncode == 1, r
            assert spelling in r.stderr and f"pid {first.proc.pid}" in r.stderr, r.stderr
        c = await Client.connect(first.ws_url(sid()))
        patch, _ = await c.command({"op": "start", "seconds": 60})
        assert patch["phase"] == "running"
        await c.close()
    finally:
        first.stop_and_check()
    again = restart(first, data)
    again.stop_and_check()


@run_async
async def test_controller_key_survives_restart_and_crash(data_dir):
    """--control key with storage: after SIGTERM and restart, and after SIGKILL and restart,
    the controller link from before still controls and a visitor without it is a viewer
    (what docs/operating.md says a restart does); with --data :memory: a restart hands out a new key."""
    data = data_dir / "countdown.db"
    srv = start_server("--data", str(data), "--control", "key")
    session = sid("key")
    host = await Client.connect(srv.ws_url(session))
    key = host.snapshot["key"]
    assert host.snapshot["role"] == "controller"
    await host.command({"op": "start", "seconds": 600})
    for stop in (lambda s: s.stop_and_check(), crash):
        stop(srv)
        srv = restart(srv, data, "--control", "key")
        visitor = await Client.connect(srv.ws_url(session))
        assert visitor.snapshot["role"] == "viewer" and "key" not in visitor.snapshot, visitor.snapshot
        back = await Client.connect(srv.ws_url(session) + f"?key={key}")
        assert back.snapshot["role"] == "controller", back.snapshot
        patch, _ = await back.command({"op": "pause"} if back.snapshot["state"]["phase"] == "running"
                                      else {"op": "resume"})
        assert patch["phase"] in ("paused", "running")
        for c in (visitor, back):
            await c.close()
    srv.stop_and_check()

    memory = start_server("--data", ":memory:", "--control", "key")
    first = await Client.connect(memory.ws_url(session))
    old = first.snapshot["key"]
    await first.close()
    memory.stop_and_check()
    memory = start_server("--port", str(memory.port), "--data", ":memory:", "--control", "key")
    try:
        again = await Client.connect(memory.ws_url(session) + f"?key={old}")
        assert again.snapshot["role"] == "controller" and again.snapshot["key"] != old, again.snapshot
        await again.close()
    finally:
        memory.stop_and_check()
