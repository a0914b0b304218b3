"""End-to-end tests of the command line and of shutdown: --help, bad flags (exit 2),
--host, and a clean exit 0 on SIGTERM / SIGINT, also with live connections."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from serverproc import PUBLIC_DIR, server_binary, start_server
from cdclient import Client, ConnectionClosed, http_get, run_async

FLAGS = ("--host", "--port", "--public", "--default-seconds")


def run_cli(*args: str, timeout: float = 10) -> subprocess.CompletedProcess:
    binary = server_binary()
    if not binary.exists():
        pytest.fail(f"countdown-server binary not found at {binary}")
    try:
        return subprocess.run([str(binary), *args], capture_output=True, timeout=timeout, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"`countdown-server {' '.join(args)}` did not exit within {timeout}s "
                    f"(stdout {exc.stdout!r}, stderr {exc.stderr!r})")


def test_help_exits_0_and_explains_every_flag():
    """--help exits 0 and its text mentions --host, --port, --public and --default-seconds."""
    res = run_cli("--help")
    assert res.returncode == 0, res
    text = (res.stdout + res.stderr).decode()
    for flag in FLAGS:
        assert flag in text, f"--help does not mention {flag}:\n{text}"
    assert "listening on" not in text


@pytest.mark.parametrize(
    "args",
    [
        ["--port", "abc"],
        ["--nope"],
        ["--default-seconds", "0"],
        ["--default-seconds", "abc"],
        ["--default-seconds", "2.5"],
        ["--default-seconds", "86401"],
        ["--port", "70000"],
        ["--port", "-1"],
        ["--port"],
        ["--public"],
        ["extra-positional"],
        ["--event-loop", "epoll"],
        ["--event-loop"],
        ["--frame-ancestors", ""],
        ["--frame-ancestors", "https://a.example https://b.example"],
        ["--frame-ancestors", "https://a.example; script-src *"],
        ["--frame-ancestors", "*"],
        ["--frame-ancestors", "https://a.example/path"],
        ["--frame-ancestors", "https://a.example:18446744073709551616"],
        ["--frame-ancestors", "https://a.example\x01"],
        ["--frame-ancestors", "https://" + "a" * 4096 + ".example"],
    ],
    ids=lambda a: " ".join(a)[:60] or "none",
)
def test_bad_flag_exits_2_with_message(args):
    """A bad flag or value makes the server print a message on stderr and exit with 2,
    without starting to listen."""
    res = run_cli("--port", "0", "--public", str(PUBLIC_DIR), *args)
    assert res.returncode == 2, f"exit code {res.returncode} for {args}; stderr {res.stderr!r}"
    assert res.stderr.strip(), f"no message on stderr for {args}"
    assert b"listening on" not in res.stdout


def test_host_flag_and_port_0():
    """--host 127.0.0.1 --port 0 binds a free port and the startup line names that host
    and the real port, which answers."""
    srv = start_server("--host", "127.0.0.1")
    try:
        assert srv.host == "127.0.0.1" and srv.port > 0
        assert srv.listen_line == f"countdown-server listening on http://127.0.0.1:{srv.port}/"
        status, _, _ = http_get(srv.host, srv.port, "/healthz")
        assert status == 200
    finally:
        srv.stop_and_check()


@pytest.mark.parametrize("loop", ["libev", "poll"])
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
@run_async
async def test_signal_exits_0_promptly_with_live_connections(sig, loop):
    """With open WebSocket connections and a countdown running, SIGTERM / SIGINT make the
    server exit with code 0 within 3 s, on either event loop, and every client sees its
    connection closed with 1001 "going away"."""
    srv = start_server("--event-loop", loop)
    try:
        a = await Client.connect(srv.ws_url("t" + uuid.uuid4().hex))
        b = await Client.connect(srv.ws_url("t" + uuid.uuid4().hex))
        await a.command({"op": "start", "seconds": 60})
        t0 = time.monotonic()
        rc = await asyncio.to_thread(srv.terminate, sig, 3.0)
        elapsed = time.monotonic() - t0
        assert rc == 0, f"exit code {rc} after {sig!r}\nstderr:\n{srv.stderr()}"
        assert elapsed < 3.0
        for cl in (a, b):
            with pytest.raises(ConnectionClosed) as closed:
                while True:
                    await cl.recv(5)
            assert closed.value.rcvd is not None and closed.value.rcvd.code == 1001, closed.value
    finally:
        srv.kill()


PLUGIN = Path("/usr/lib/x86_64-linux-gnu/libwebsockets-evlib_ev.so")


def hide_plugin_prefix() -> list[str]:
    """A command prefix that runs the server with lws's libev plugin replaced by an empty
    file, in a private mount namespace; skips when this machine cannot do that."""
    if not PLUGIN.exists():
        pytest.skip(f"no {PLUGIN} on this machine")
    script = f"mount --bind /dev/null {PLUGIN} && exec \"$@\""
    prefix = ["unshare", "--user", "--map-root-user", "--mount", "sh", "-c", script, "sh"]
    probe = subprocess.run([*prefix, "true"], capture_output=True)
    if probe.returncode != 0:
        pytest.skip(f"cannot hide the plugin here: {probe.stderr.decode().strip()}")
    return prefix


@run_async
async def test_without_the_libev_plugin_it_warns_and_serves_on_poll():
    """When lws cannot load its libev plugin, the server says so on stderr, falls back
    to poll and still runs countdowns, then stops cleanly."""
    srv = start_server(prefix=hide_plugin_prefix())
    try:
        assert "libev event loop is unavailable" in srv.stderr(), srv.stderr()
        a = await Client.connect(srv.ws_url("t" + uuid.uuid4().hex))
        await a.command({"op": "start", "seconds": 1})
        await a.wait_phase("finished", timeout=5)
        await a.close()
    finally:
        srv.stop_and_check()
