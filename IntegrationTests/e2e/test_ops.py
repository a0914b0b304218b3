"""End-to-end tests of operating the server: /readyz through start-up and drain, the
JSON log lines and the events they report, configuration from COUNTDOWN_* variables
and flags (flags win), --print-config, --version, and exit 2 on a bad value."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import sys
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from cdclient import Client, ConnectionClosed, http_get, run_async
from opskit import log_lines, wait_event
from rawws import RawWS
from serverproc import REPO_ROOT, server_binary, start_server


def sid() -> str:
    return "t" + uuid.uuid4().hex


def run_cli(*args: str, env: dict[str, str] | None = None, timeout: float = 10) -> subprocess.CompletedProcess:
    return subprocess.run([str(server_binary()), *args], capture_output=True, timeout=timeout,
                          stdin=subprocess.DEVNULL, env={**os.environ, **(env or {})}, cwd=str(REPO_ROOT))


def readyz(srv) -> tuple[int, dict]:
    status, _, body = http_get(srv.host, srv.port, "/readyz")
    return status, json.loads(body)


def wait_readyz(srv, want: int, timeout: float = 5.0) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        status, body = readyz(srv)
        if status == want:
            return body
        assert time.monotonic() < deadline, f"/readyz stayed {status} {body}"
        time.sleep(0.02)


# -- readiness ---------------------------------------------------------------------------
def test_readyz_is_503_until_every_check_passes(tmp_path):
    """With a start-up check pending (--ready-file, standing in for a storage load),
    /readyz answers 503 naming what it waits for while /healthz is already 200; once the
    check passes, 200."""
    gate = tmp_path / "loaded"
    srv = start_server("--ready-file", str(gate))
    try:
        status, body = readyz(srv)
        assert status == 503 and body == {"status": "not_ready", "waiting": ["ready_file"]}
        assert http_get(srv.host, srv.port, "/healthz")[0] == 200
        gate.touch()
        assert readyz(srv) == (200, {"status": "ready"})
    finally:
        srv.stop_and_check()


@run_async
async def test_drain_keeps_serving_with_readyz_503_then_closes_1001():
    """--drain-seconds 2: on SIGTERM /readyz turns 503 (draining) while a viewer keeps
    being served and a new upgrade is refused with 503; after the drain the viewer gets
    1001 and the server exits 0, all within the drain plus 2 s."""
    srv = start_server("--drain-seconds", "2")
    try:
        viewer = await Client.connect(srv.ws_url(sid()))
        assert readyz(srv)[0] == 200
        t0 = time.monotonic()
        srv.proc.send_signal(signal.SIGTERM)
        body = await asyncio.to_thread(wait_readyz, srv, 503)
        assert body["waiting"] == ["draining"]
        await viewer.command({"op": "start", "seconds": 60})
        refused = await RawWS.open(srv.host, srv.port, f"/ws/{sid()}")
        assert refused.status == 503
        refused.close()
        with pytest.raises(ConnectionClosed) as closed:
            while True:
                await viewer.recv(5)
        assert closed.value.rcvd is not None and closed.value.rcvd.code == 1001
        assert time.monotonic() - t0 >= 1.5, "closed before the drain was over"
        rc = await asyncio.to_thread(srv.proc.wait, 4)
        assert rc == 0 and time.monotonic() - t0 < 4.0
        events = [line["event"] for line in log_lines(srv)]
        assert events.index("draining") < events.index("closing_connections") < events.index("stopped")
        refusal = next(l for l in log_lines(srv) if l["event"] == "upgrade_refused")
        assert refusal["cause"] == "draining" and refusal["status"] == 503
    finally:
        srv.kill()


def test_second_signal_ends_the_drain():
    """A second SIGTERM during a long drain stops the server at once (exit 0)."""
    srv = start_server("--drain-seconds", "60")
    try:
        srv.proc.send_signal(signal.SIGTERM)
        wait_readyz(srv, 503)
        t0 = time.monotonic()
        assert srv.terminate(signal.SIGTERM, timeout=3.0) == 0
        assert time.monotonic() - t0 < 3.0
    finally:
        srv.kill()



def test_sigterm_stops_a_server_started_with_it_blocked():
    """A parent that blocks SIGTERM and SIGINT (as a thread of Foundation's Process does) cannot keep the server from stopping on them."""
    blocker = [sys.executable, "-c",
               "import os, signal, sys; "
               "signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM, signal.SIGINT}); "
               "os.execv(sys.argv[1], sys.argv[1:])"]
    for stop in (signal.SIGTERM, signal.SIGINT):
        srv = start_server(prefix=blocker)
        try:
            blocked = int(next(line.split()[1] for line in
                               Path(f"/proc/{srv.proc.pid}/status").read_text().splitlines()
                               if line.startswith("SigBlk:")), 16)
            # The server's own mask no longer blocks it, whatever it was handed.
            assert not blocked & (1 << (stop - 1))
            assert srv.terminate(stop, timeout=10.0) == 0
        finally:
            srv.kill()

# -- logs --------------------------------------------------------------------------------
@run_async
async def test_json_log_lines_report_start_ticks_finish_and_refusals():
    """Every stderr line is one JSON object with ts, level and event. A run shows:
    starting (with the effective configuration), listening, session_running, ticks (at
    debug), session_finished, an upgrade refused with its cause, and at the end stopped."""
    srv = start_server("--log-level", "debug", "--default-seconds", "2")
    session = sid()
    try:
        c = await Client.connect(srv.ws_url(session))
        await c.command({"op": "start"})
        await c.wait_phase("finished", timeout=5)
        bad = await RawWS.open(srv.host, srv.port, "/ws/" + "x" * 65)
        assert bad.status == 404
        bad.close()
        await c.close()
        wait_event(srv, "session_finished", session=session)
        wait_event(srv, "upgrade_refused", cause="bad_session_id")
    finally:
        srv.stop_and_check()
    lines = log_lines(srv)
    for line in lines:
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", line["ts"]), line
        assert line["level"] in ("debug", "info", "warn", "error")
    starting = lines[0]
    assert starting["event"] == "starting"
    assert starting["default_seconds"] == "2" and starting["port"] == "0" and starting["log_level"] == "debug"
    assert "default-seconds" in starting["set_by_flag"].split(",")
    assert {"version", "lws"} <= starting.keys()
    ours = [l for l in lines if l.get("session") == session]
    events = [l["event"] for l in ours]
    assert events[0] == "session_running" and "session_finished" in events, events
    ticks = [l["remaining"] for l in ours if l["event"] == "session_tick"]
    assert ticks == [1], ticks
    refusal = next(l for l in lines if l["event"] == "upgrade_refused")
    assert refusal["status"] == 404 and refusal["peer"] == "127.0.0.1"
    assert lines[-1]["event"] == "stopped"
    assert any(l["event"] == "lws" for l in lines), "lws's own lines should pass through at debug"


@run_async
async def test_flood_close_is_logged():
    """A connection closed for flooding (1008) shows as a flood_closed warning."""
    srv = start_server("--max-commands-per-second", "1")
    try:
        c = await Client.connect(srv.ws_url(sid()))
        t0 = time.monotonic()
        with pytest.raises(ConnectionClosed):
            while time.monotonic() - t0 < 10:
                await c.send({"op": "ping", "t": 0})
                await asyncio.sleep(0.05)
                while True:
                    try:
                        await asyncio.wait_for(c.ws.recv(), 0.001)
                    except asyncio.TimeoutError:
                        break
        line = wait_event(srv, "flood_closed", code=1008)
        assert line["level"] == "warn"
    finally:
        srv.stop_and_check()


@run_async
async def test_controller_keys_never_reach_the_log_even_at_debug():
    """--control key --log-level debug, lws's own lines included: the controller key,
    used in ?key= on a join and on a refused upgrade, never appears on stderr."""
    srv = start_server("--control", "key", "--log-level", "debug")
    try:
        session = sid()
        a = await Client.connect(srv.ws_url(session))
        key = a.snapshot["key"]
        b = await Client.connect(srv.ws_url(session) + "?key=" + key)
        assert b.snapshot["role"] == "controller"
        refused = await RawWS.open(srv.host, srv.port, "/ws/bad%20id?key=" + key)
        assert refused.status == 404
        refused.close()
        await b.close()
        await a.close()
        wait_event(srv, "upgrade_refused")
    finally:
        srv.stop_and_check()
    assert key not in srv.stderr()
    assert key not in srv.listen_line + bytes(srv._extra_stdout).decode()


def test_text_format_on_request():
    """--log-format text: one line per event, timestamp first, then level, event and
    key=value fields; not JSON."""
    srv = start_server("--log-format", "text")
    try:
        deadline = time.monotonic() + 5
        while "listening" not in srv.stderr() and time.monotonic() < deadline:
            time.sleep(0.02)
    finally:
        srv.stop_and_check()
    lines = srv.stderr().splitlines()
    listening = next(l for l in lines if " listening " in l)
    assert re.match(r"^\d{4}-\d\d-\d\dT\S+Z INFO listening url=http://127\.0\.0\.1:\d+/ port=\d+", listening)
    assert not lines[0].startswith("{")


# -- configuration -----------------------------------------------------------------------
def config_table(text: str) -> dict[str, tuple[str, str]]:
    out = {}
    for line in text.splitlines():
        flag, value, source = line.split()
        out[flag] = (value, source)
    return out


def test_print_config_shows_values_and_their_sources():
    """--print-config: every option, its effective value and where it came from; a flag
    beats its variable; a repeatable flag replaces its variable's list."""
    res = run_cli("--print-config", "--default-seconds", "3", "--allow-origin", "https://b.example",
                  env={"COUNTDOWN_DEFAULT_SECONDS": "9", "COUNTDOWN_MAX_SESSIONS": "77",
                       "COUNTDOWN_ALLOW_ORIGIN": "https://a.example", "COUNTDOWN_LOG_LEVEL": "warn"})
    assert res.returncode == 0, res.stderr
    table = config_table(res.stdout.decode())
    assert table["--default-seconds"] == ("3", "flag")
    assert table["--max-sessions"] == ("77", "COUNTDOWN_MAX_SESSIONS")
    assert table["--log-level"] == ("warn", "COUNTDOWN_LOG_LEVEL")
    assert table["--allow-origin"] == ("https://b.example", "flag")
    assert table["--host"] == ("127.0.0.1", "default")
    assert b"listening" not in res.stdout


def test_a_variable_no_option_reads_is_named_at_start():
    """A misspelt COUNTDOWN_* variable is not silently ignored: start-up logs a warning
    naming it (never its value), and the server runs on."""
    srv = start_server(env={"COUNTDOWN_PROT": "secret-9000", "COUNTDOWN_MAX_SESSIONS": "50"})
    try:
        warning = wait_event(srv, "unknown_variables")
    finally:
        srv.stop_and_check()
    assert warning["level"] == "warn"
    assert "COUNTDOWN_PROT" in warning["names"].split(",")
    assert "COUNTDOWN_MAX_SESSIONS" not in warning["names"]
    assert "secret-9000" not in srv.stderr()


@run_async
async def test_variables_configure_the_server_and_flags_win():
    """COUNTDOWN_DEFAULT_SECONDS=2 makes a bare start run 2 s; with --default-seconds 3
    as well, the flag wins."""
    for extra, want in [((), 2), (("--default-seconds", "3"), 3)]:
        srv = start_server(*extra, env={"COUNTDOWN_DEFAULT_SECONDS": "2"})
        try:
            c = await Client.connect(srv.ws_url(sid()))
            await c.command({"op": "start"})
            assert c.state["duration"] == want, (extra, c.state)
            await c.close()
        finally:
            srv.stop_and_check()


@pytest.mark.parametrize(
    "name,bad,allowed",
    [
        ("COUNTDOWN_PORT", "http", "0 to 65535"),
        ("COUNTDOWN_CONTROL", "maybe", "'open', 'key'"),
        ("COUNTDOWN_LOG_FORMAT", "xml", "'json', 'text'"),
        ("COUNTDOWN_LOG_LEVEL", "loud", "'debug', 'info', 'warn', 'error'"),
        ("COUNTDOWN_METRICS", "public", "'auto', 'main', 'off'"),
        ("COUNTDOWN_AUTOBAHN_ECHO", "perhaps", "on or off"),
        ("COUNTDOWN_DRAIN_SECONDS", "-1", "0 to 3600"),
        ("COUNTDOWN_HOST", "", "must not be empty"),
        ("COUNTDOWN_PUBLIC", "/nonexistent", "a directory with an index.html"),
    ],
)
def test_bad_variable_exits_2_naming_it(name, bad, allowed):
    """A bad value in a variable exits 2; the message names the variable, shows the
    value and says what is allowed."""
    res = run_cli("--port", "0", env={name: bad})
    assert res.returncode == 2, res
    err = res.stderr.decode()
    assert name in err and f"'{bad}'" in err or (bad == "" and name in err), err
    assert allowed in err, err


@pytest.mark.parametrize("flag,bad,allowed", [("--log-level", "loud", "'debug'"), ("--metrics", "world", "'off'"),
                                              ("--metrics-port", "99999", "0 to 65535")])
def test_bad_flag_value_exits_2_naming_it(flag, bad, allowed):
    res = run_cli(flag, bad)
    assert res.returncode == 2
    err = res.stderr.decode()
    assert flag in err and f"'{bad}'" in err and allowed in err, err


@pytest.mark.parametrize("bad", ["31", "129", "0", "-1", "64.5", "0x40", "9223372036854775808",
                                 "-9223372036854775809", "1e400", "64\x01", "6" * 4096, ""])
def test_ipv6_prefix_out_of_range_exits_2(bad):
    """--ipv6-prefix takes 32 to 128 bits: anything else, at the edges and beyond, exits 2
    naming the flag and the range (one budget per /31 or wider would lump providers
    together). Loopback has no second IPv6 client address, so how the prefix keys the
    caps is tested in the unit tests (AddressBudgetTests, AdmissionTests)."""
    res = run_cli("--ipv6-prefix", bad)
    assert res.returncode == 2, res
    err = res.stderr.decode()
    assert "--ipv6-prefix" in err and "32 to 128" in err, err


def test_ipv6_prefix_edges_are_taken():
    """32 and 128 are taken, by flag or variable; the default is 64."""
    assert config_table(run_cli("--print-config").stdout.decode())["--ipv6-prefix"] == ("64", "default")
    for value in ("32", "128"):
        res = run_cli("--print-config", env={"COUNTDOWN_IPV6_PREFIX": value})
        assert res.returncode == 0, res.stderr
        assert config_table(res.stdout.decode())["--ipv6-prefix"] == (value, "COUNTDOWN_IPV6_PREFIX")


def test_help_names_every_variable_and_readme_lists_every_flag():
    """--help shows each option's variable; the README's command-line table lists every
    flag with its variable, so the documentation cannot fall behind the option table."""
    options = config_table(run_cli("--print-config").stdout.decode())
    help_text = run_cli("--help").stdout.decode()
    readme = (REPO_ROOT / "README.md").read_text()
    for flag in options:
        variable = "COUNTDOWN_" + flag[2:].upper().replace("-", "_")
        assert flag in help_text and f"[{variable}]" in help_text, flag
        assert re.search(rf"`{flag}[^`]*`\s*\|\s*`{variable}`", readme), f"README lacks {flag} / {variable}"


def test_version_names_the_server_and_libwebsockets():
    res = run_cli("--version")
    assert res.returncode == 0
    out = res.stdout.decode()
    assert re.match(r"countdown-server \d+\.\d+\.\d+\nlibwebsockets 4\.1\.6", out), out
