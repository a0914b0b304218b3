"""The `countdown` command-line client against the real server: its commands and their exit
codes, `watch` on a terminal (tmux, read back with capture-pane) and through a pipe, `run`
wrapping a command while a WebSocket viewer watches, Ctrl-C during `run`, and a server that
cannot be reached."""

from __future__ import annotations

import asyncio
import os
import queue
import re
import shlex
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

import pytest

from apikit import command as api_command, read as api_read
from cdclient import Client, run_async
from serverproc import REPO_ROOT, start_server

TMUX = "/usr/bin/tmux"
SPINNER = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"


def cli_binary() -> str:
    path = Path(os.environ.get("COUNTDOWN_BIN") or REPO_ROOT / ".build" / "debug" / "countdown")
    if not path.exists():
        pytest.fail(f"countdown binary not found at {path} (run `swift build`)")
    return str(path.resolve())


def cli(*args: str, env: dict[str, str] | None = None, timeout: float = 20) -> subprocess.CompletedProcess:
    """Runs `countdown ARGS` to its end, output captured (so never on a terminal)."""
    full_env = {k: v for k, v in os.environ.items() if k != "COUNTDOWN_TOKEN"}
    full_env.update(env or {})
    return subprocess.run([cli_binary(), *args], capture_output=True, text=True, timeout=timeout,
                          env=full_env, stdin=subprocess.DEVNULL)


def page_url(server, session: str) -> str:
    return f"{server.http_base}/?session={session}"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_until(pred, timeout: float = 10.0, what: str = ""):
    """Polls `pred` (an outside process's screen or a file cannot be awaited otherwise)."""
    deadline = time.monotonic() + timeout
    while True:
        value = pred()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what or pred}")
        time.sleep(0.05)


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie (exited, not yet reaped by its parent) is no longer running.
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0] != "Z"
    except (FileNotFoundError, IndexError):
        return False


# The pane's first process: runs the command (same process group, so it stays in the
# terminal's foreground), and writes its status where the test reads it, "-N" for signal N.
# tmux's own pane_dead_status can lag behind the exit by seconds.
PANE_WRAPPER = """
import signal, subprocess, sys
signal.signal(signal.SIGINT, lambda *_: None)  # a handler, not SIG_IGN: exec resets it
status = subprocess.call(sys.argv[2:])
with open(sys.argv[1] + ".tmp", "w") as f:
    f.write(str(status))
import os
os.rename(sys.argv[1] + ".tmp", sys.argv[1])
"""


class Tmux:
    """One command in a pane of a tmux server of its own, on a terminal 100 columns wide. The
    pane stays after the command ends, so its last screen can be read."""

    def __init__(self, command: list[str], env: dict[str, str] | None = None, width: int = 100):
        if not Path(TMUX).exists():
            pytest.skip("tmux is not installed")
        self.socket = "cdcli-" + uuid.uuid4().hex[:12]
        self.status_file = Path(tempfile.mkdtemp(prefix="cdcli-")) / "status"
        prefix = ["env", "-u", "COUNTDOWN_TOKEN", "-u", "NO_COLOR"] + [f"{k}={v}" for k, v in (env or {}).items()]
        line = "exec " + shlex.join(prefix + [sys.executable, "-c", PANE_WRAPPER, str(self.status_file)]
                                    + command)
        self._tmux("-f", "/dev/null", "new-session", "-d", "-s", "t", "-x", str(width), "-y", "12", line,
                   ";", "set-option", "-g", "remain-on-exit", "on")

    def _tmux(self, *args: str) -> str:
        return subprocess.run([TMUX, "-L", self.socket, *args], check=True, capture_output=True,
                              text=True, timeout=10).stdout

    def screen(self, escapes: bool = False, history: bool = False) -> str:
        """The pane as shown; with `history`, also what scrolled off (a dead pane's last
        screen is pushed there)."""
        return self._tmux("capture-pane", "-p", *(["-e"] if escapes else []),
                          *(["-S", "-"] if history else []), "-t", "t")

    def lines(self) -> list[str]:
        return [l for l in self.screen().splitlines() if l.strip()]

    def wait_screen(self, pattern: str, timeout: float = 10.0) -> str:
        rx = re.compile(pattern)
        try:
            return wait_until(lambda: (s := self.screen()) and rx.search(s) and s, timeout, pattern)
        except AssertionError:
            raise AssertionError(f"screen never matched {pattern!r}:\n{self.screen()}") from None

    def keys(self, *keys: str) -> None:
        self._tmux("send-keys", "-t", "t", *keys)

    def status(self) -> int | None:
        """The command's exit status once it has ended (-N: killed by signal N), else None."""
        try:
            return int(self.status_file.read_text())
        except FileNotFoundError:
            return None

    def close(self) -> None:
        subprocess.run([TMUX, "-L", self.socket, "kill-server"], capture_output=True, timeout=10)


@pytest.fixture
def tmux_panes():
    made: list[Tmux] = []

    def make(*args, **kwargs) -> Tmux:
        t = Tmux(*args, **kwargs)
        made.append(t)
        return t

    yield make
    for t in made:
        t.close()


# -- commands ----------------------------------------------------------------------------
def test_commands_print_the_result(server, session_id):
    """Each command prints the state it left, takes the page's URL or a base URL plus
    --session, and a refusal is an error in words with its code and exit status 1."""
    url = page_url(server, session_id)
    r = cli("start", url, "--seconds", "3725", "--finish-label", "Lunch")
    assert (r.returncode, r.stdout, r.stderr) == (0, "running  1:02:05\n", "")
    state = api_read(server, session_id).json["state"]
    assert (state["phase"], state["duration"]) == ("running", 3725)

    r = cli("adjust", f"{server.http_base}/", "--session", session_id, "--seconds", "-3600")
    assert (r.returncode, r.stdout) == (0, "running  2:05\n"), r.stderr
    r = cli("pause", url)
    assert r.returncode == 0 and r.stdout.startswith("paused  2:0"), r
    r = cli("resume", url)
    assert r.returncode == 0 and r.stdout.startswith("running  2:0"), r

    r = cli("start", url, "--seconds", "5")
    assert r.returncode == 1 and r.stdout == "", r
    assert r.stderr.startswith("countdown: busy: ") and "already" in r.stderr, r.stderr
    r = cli("done", url)
    assert r.returncode == 1 and "not_waiting" in r.stderr, r

    assert cli("cancel", url).stdout == "idle  Ready\n"
    r = cli("wait", url, "--label", "Deploying", "--timeout", "900")
    assert (r.returncode, r.stdout) == (0, "waiting  Deploying\n"), r.stderr
    r = cli("fail", url, "--label", "Deploy failed")
    assert (r.returncode, r.stdout) == (0, "finished  Deploy failed  failed\n"), r.stderr


def test_start_until_a_time_of_day(server, session_id):
    """--until HH:MM counts down to the next such local time, within a day."""
    target = time.localtime(time.time() + 2 * 3600)
    r = cli("start", page_url(server, session_id), "--until", time.strftime("%H:%M", target))
    assert r.returncode == 0, r.stderr
    state = api_read(server, session_id).json["state"]
    left = state["endsAt"] / 1000 - time.time()
    assert 2 * 3600 - 61 <= left <= 2 * 3600, left
    assert state["endsAt"] % 60_000 == 0
    r = cli("start", page_url(server, "x" + session_id), "--until", "25:00")
    assert r.returncode == 2 and "--until" in r.stderr, r


def read_request(conn: socket.socket) -> tuple[bytes, dict[str, str], bytes] | None:
    """One HTTP request off `conn`: its head, its headers (names lowercased) and its body as
    Content-Length says; None when the peer hangs up first."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        if not chunk:
            return None
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    headers = {}
    for line in head.decode("latin-1").split("\r\n")[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    while len(body) < int(headers.get("content-length", "0")):
        body += conn.recv(65536)
    return head, headers, body


class LoopbackPeer:
    """A listener on a free loopback port that reads one request off each connection, on a
    thread of its own, and hands it to `_answer`."""

    def __init__(self):
        self.listener = socket.socket()
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(16)
        self.port = self.listener.getsockname()[1]
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._one, args=(conn,), daemon=True).start()

    def _one(self, conn: socket.socket):
        with conn:
            request = read_request(conn)
            if request is not None:
                self._answer(conn, *request)

    def _answer(self, conn: socket.socket, head: bytes, headers: dict[str, str], body: bytes):
        raise NotImplementedError

    def close(self):
        self.listener.close()


class DroppingProxy(LoopbackPeer):
    """A loopback proxy in front of the server that passes the first request on but hangs up
    instead of relaying its answer (a reply lost on the way back), then relays the rest. It
    keeps each request's Idempotency-Key."""

    def __init__(self, server):
        self.server = server
        self.keys: list[str | None] = []
        super().__init__()

    def _answer(self, conn: socket.socket, head: bytes, headers: dict[str, str], body: bytes):
        self.keys.append(headers.get("idempotency-key"))
        first = len(self.keys) == 1
        with socket.create_connection((self.server.host, self.server.port)) as up:
            up.sendall(head + b"\r\n\r\n" + body)
            answer = b""
            while True:
                chunk = up.recv(65536)
                answer += chunk
                if not chunk or (b"\r\n\r\n" in answer and answer.endswith(b"}")):
                    break
        if not first:
            conn.sendall(answer)


def test_a_lost_reply_is_retried_with_the_same_key(server, session_id):
    """A command whose answer is lost is sent again with the same Idempotency-Key, so it
    applies once: the retry is answered from the first try, not refused as busy."""
    proxy = DroppingProxy(server)
    try:
        r = cli("start", f"http://127.0.0.1:{proxy.port}/?session={session_id}", "--seconds", "100")
    finally:
        proxy.close()
    assert (r.returncode, r.stdout) == (0, "running  1:40\n"), r.stderr
    assert len(proxy.keys) == 2 and proxy.keys[0] and proxy.keys[0] == proxy.keys[1], proxy.keys
    assert api_read(server, session_id).json["state"]["duration"] == 100


@pytest.mark.parametrize(
    "args,status,words",
    [
        (["--seconds", "1e400"], 2, "whole number"),
        (["--seconds", "1e308"], 2, "whole number"),
        (["--seconds", "9223372036854775808"], 2, "whole number"),
        (["--seconds", "-9223372036854775809"], 2, "whole number"),
        (["--seconds", "18446744073709551616"], 2, "whole number"),
        (["--seconds", "-0"], 1, "bad_request"),
        (["--seconds", "86401"], 1, "bad_request"),
        (["--seconds", "9223372036854775807"], 1, "bad_request"),
        (["--finish-label", "x" * 4096], 1, "bad_request"),
        (["--finish-label", "a\tb"], 1, "bad_request"),
        (["--token", "not-here"], 2, "COUNTDOWN_TOKEN"),
        (["--session", "a/b"], 2, "session"),
        (["--session", "s" * 65], 2, "session"),
    ],
)
def test_bad_values(server, session_id, args, status, words):
    """Values the command line cannot spell are usage errors (2) and send nothing; values it
    can spell but the server refuses come back as the server's bad_request (1); the session is
    untouched either way."""
    url = f"{server.http_base}/" if "--session" in args else page_url(server, session_id)
    r = cli("start", url, *args)
    assert r.returncode == status, r
    assert words in r.stderr and r.stdout == "", r
    assert api_read(server, session_id).json["state"]["phase"] == "idle"


def test_usage_errors_exit_2():
    """A wrong command line exits 2 with the reason and where the usage is."""
    for args in ([], ["start"], ["frobnicate", "http://127.0.0.1:1/"], ["run", "http://h/"],
                 ["start", "ftp://h/?session=a"], ["pause", "http://h/?session=a", "--session", "b"]):
        r = cli(*args)
        assert r.returncode == 2 and r.stderr.startswith("countdown: "), (args, r)
    r = cli("--help")
    assert r.returncode == 0 and "exit status" in r.stdout


def test_token_from_environment_or_file(tmp_path, session_id):
    """With --control key a command needs the token: COUNTDOWN_TOKEN or --token-file works,
    none is forbidden (1), and the token never has to be an argument; watch needs none."""
    token = "tok-" + uuid.uuid4().hex
    tokens = tmp_path / "tokens"
    tokens.write_text(token + "\n")
    srv = start_server("--control", "key", "--api-token-file", str(tokens))
    try:
        url = page_url(srv, session_id)
        r = cli("start", url, "--seconds", "60")
        assert r.returncode == 1 and "forbidden" in r.stderr, r
        assert cli("pause", url, env={"COUNTDOWN_TOKEN": "wrong-" + token}).returncode == 1
        r = cli("start", url, "--seconds", "60", env={"COUNTDOWN_TOKEN": token})
        assert r.returncode == 0, r.stderr
        r = cli("pause", url, "--token-file", str(tokens))
        assert r.returncode == 0, r.stderr
        r = cli("resume", url, "--token-file", str(tmp_path / "missing"))
        assert r.returncode == 2 and "token file" in r.stderr, r
        assert api_read(srv, session_id).json["state"]["phase"] == "paused"
        # watch is a viewer: it needs no token, even with --control key.
        proc = subprocess.Popen([cli_binary(), "watch", url], stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
        try:
            out = LineReader(proc)
            wait_until(lambda: any(l.startswith("paused  ") for l in out.lines), 10, "paused line")
        finally:
            proc.kill()
            proc.wait()
    finally:
        srv.stop_and_check()


# -- watch -------------------------------------------------------------------------------
def test_watch_on_a_terminal_redraws_one_line(server, session_id, tmux_panes):
    """On a terminal, watch keeps one line redrawn in place: the braille spinner turning while
    waiting, the label and the time elapsed, in colour; then the outcome once finished."""
    pane = tmux_panes([cli_binary(), "watch", page_url(server, session_id)])
    pane.wait_screen(r"Ready")
    assert api_command(server, session_id, {"op": "wait", "label": "Deploying"}).status == 200
    first = pane.wait_screen(rf"[{SPINNER}] Deploying  0:0\d")
    glyph = re.search(rf"[{SPINNER}]", first).group(0)
    # The spinner turns: the same line, another frame, a moment later.
    wait_until(lambda: re.search(rf"[{SPINNER}]", pane.screen()).group(0) != glyph, 3, "spinner turns")
    assert len(pane.lines()) == 1, pane.screen()
    coloured = pane.screen(escapes=True)
    assert "\x1b[36m" in coloured, coloured
    assert api_command(server, session_id, {"op": "done"}).status == 200
    pane.wait_screen(r"✔ Done  done")
    assert api_command(server, session_id, {"op": "start", "seconds": 3725}).status == 200
    pane.wait_screen(rf"[{SPINNER}] 1:02:0[45]")
    assert len(pane.lines()) == 1, pane.screen()
    assert pane.status() is None


def test_watch_no_color(server, session_id, tmux_panes):
    """NO_COLOR set: the same line on a terminal, without any colour sequence."""
    pane = tmux_panes([cli_binary(), "watch", page_url(server, session_id)], env={"NO_COLOR": "1"})
    assert api_command(server, session_id, {"op": "wait", "label": "Build"}).status == 200
    pane.wait_screen(rf"[{SPINNER}] Build  0:0\d")
    screen = pane.screen(escapes=True)
    assert not re.search(r"\x1b\[[0-9;]*m", screen.replace("\x1b[0m", "")), repr(screen)
    assert api_command(server, session_id, {"op": "fail"}).status == 200
    pane.wait_screen(r"✖ Failed  failed")
    assert not re.search(r"\x1b\[3\dm", pane.screen(escapes=True))


def test_watch_exit_on_finish_in_tmux(server, session_id, tmux_panes):
    """--exit-on-finish on a terminal: the last line stays, and the status is 1 for failed."""
    pane = tmux_panes([cli_binary(), "watch", page_url(server, session_id), "--exit-on-finish"])
    pane.wait_screen(r"Ready")
    assert api_command(server, session_id, {"op": "wait"}).status == 200
    pane.wait_screen(rf"[{SPINNER}] Waiting")
    assert api_command(server, session_id, {"op": "fail", "label": "Broke"}).status == 200
    status = wait_until(lambda: pane.status() is not None, 5, "watch exits") and pane.status()
    assert status == 1, status
    assert "✖ Broke  failed" in pane.screen(history=True)


def test_ctrl_c_ends_watch(server, session_id, tmux_panes):
    """Ctrl-C ends watch as an interrupt, leaving its last line on the screen."""
    pane = tmux_panes([cli_binary(), "watch", page_url(server, session_id)])
    assert api_command(server, session_id, {"op": "wait", "label": "Stopping"}).status == 200
    pane.wait_screen(rf"[{SPINNER}] Stopping")
    pane.keys("C-c")
    wait_until(lambda: pane.status() is not None, 5, "watch ends")
    assert pane.status() == -signal.SIGINT
    assert "Stopping  0:0" in pane.screen(history=True)


class LineReader:
    """A child's stdout read line by line on a thread, so a test can await each line."""

    def __init__(self, proc: subprocess.Popen):
        self.proc = proc
        self.lines: list[str] = []
        self.raw = bytearray()
        self._cond = threading.Condition()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            with self._cond:
                self.raw += line
                self.lines.append(line.decode("utf-8").rstrip("\n"))
                self._cond.notify_all()

    def wait_line(self, text: str, timeout: float = 10.0) -> int:
        with self._cond:
            ok = self._cond.wait_for(lambda: text in self.lines, timeout)
        assert ok, f"no line {text!r} in {self.lines}"
        return self.lines.index(text)


def watch_a_run_to_its_finish(server, session_id: str, url: str, *options: str) -> LineReader:
    """`watch URL --exit-on-finish OPTIONS` through a pipe while a 2 s run elapses: one line
    per change, and exit 0 at the finish. Returns what it printed."""
    proc = subprocess.Popen([cli_binary(), "watch", url, "--exit-on-finish", *options],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
    try:
        out = LineReader(proc)
        out.wait_line("idle  Ready")
        assert api_command(server, session_id, {"op": "start", "seconds": 2}).status == 200
        out.wait_line("finished  Countdown finished  elapsed")
        assert proc.wait(5) == 0
        assert out.lines == ["idle  Ready", "running  2", "running  1",
                             "finished  Countdown finished  elapsed"], out.lines
        return out
    finally:
        proc.kill()
        proc.wait()


def test_watch_through_a_pipe(server, session_id):
    """Through a pipe: one plain line per change (no spinner, colour or carriage return),
    and --exit-on-finish exits 0 when the countdown elapses."""
    out = watch_a_run_to_its_finish(server, session_id, page_url(server, session_id))
    assert b"\x1b" not in out.raw and b"\r" not in out.raw


@pytest.mark.parametrize("op,status", [("done", 0), ("fail", 1)])
def test_watch_exit_status_of_a_wait(server, session_id, op, status):
    """--exit-on-finish: 0 when a wait ends done, 1 when it fails."""
    proc = subprocess.Popen([cli_binary(), "watch", page_url(server, session_id), "--exit-on-finish"],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
    try:
        out = LineReader(proc)
        out.wait_line("idle  Ready")
        assert api_command(server, session_id, {"op": "wait", "label": "CI"}).status == 200
        out.wait_line("waiting  CI")
        assert api_command(server, session_id, {"op": op}).status == 200
        assert proc.wait(5) == status, out.lines
    finally:
        proc.kill()
        proc.wait()


def test_watch_reconnects_across_a_restart(tmp_path, session_id):
    """The stream is followed across a server restart on the same port: the line says it is
    reconnecting, then shows the session again."""
    port = free_port()
    db = tmp_path / "c.db"
    args = ("--port", str(port), "--data", str(db))
    srv = start_server(*args)
    srv.port = port
    proc = subprocess.Popen([cli_binary(), "watch", f"http://127.0.0.1:{port}/?session={session_id}"],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
    try:
        out = LineReader(proc)
        assert api_command(srv, session_id, {"op": "wait", "label": "Across"}).status == 200
        out.wait_line("waiting  Across")
        srv.stop_and_check()
        out.wait_line("waiting  Across  (reconnecting…)")
        srv = start_server(*args)
        assert api_command(srv, session_id, {"op": "done"}).status == 200
        out.wait_line("finished  Done  done", timeout=20)
    finally:
        proc.kill()
        proc.wait()
        srv.stop_and_check()


# -- run ---------------------------------------------------------------------------------
async def _run_watched(server, session_id, *run_args: str):
    viewer = await Client.connect(server.ws_url(session_id))
    proc = await asyncio.create_subprocess_exec(
        cli_binary(), "run", page_url(server, session_id), *run_args,
        stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    waiting = await viewer.wait_state(lambda s: s["phase"] == "waiting", 10, "waiting")
    began = time.monotonic()
    finished = await viewer.wait_state(lambda s: s["phase"] == "finished", 15, "finished")
    took = time.monotonic() - began
    out, err = await proc.communicate()
    await viewer.close()
    return proc.returncode, waiting, finished, took, out.decode(), err.decode()


@run_async
async def test_run_exits_with_the_commands_status(server, session_id):
    """run sends wait, runs the command, then fail: a viewer sees waiting, then failed with
    the status, and run exits with the command's 3."""
    rc, waiting, finished, took, out, err = await _run_watched(
        server, session_id, "--label", "Job", "--", "sh", "-c", "sleep 2; echo hello; exit 3")
    assert rc == 3, err
    assert (waiting["label"], waiting["spinner"]) == ("Job", True)
    assert (finished["outcome"], finished["label"]) == ("failed", "exit 3")
    assert took >= 1.9, took
    assert out == "hello\n" and err == ""


@run_async
async def test_run_success_is_done(server, session_id):
    """A command that succeeds finishes the wait as done, and run exits 0; --timeout sets
    the wait's timeout."""
    viewer = await Client.connect(server.ws_url(session_id))
    proc = await asyncio.create_subprocess_exec(
        cli_binary(), "run", page_url(server, session_id), "--timeout", "600", "--", "sleep", "1",
        stdin=asyncio.subprocess.DEVNULL)
    waiting = await viewer.wait_state(lambda s: s["phase"] == "waiting", 10, "waiting")
    assert waiting["timeoutAt"] - waiting["startedAt"] == 600_000
    finished = await viewer.wait_state(lambda s: s["phase"] == "finished", 10, "finished")
    assert (finished["outcome"], finished["label"]) == ("done", "Done")
    assert await proc.wait() == 0
    await viewer.close()


@run_async
async def test_ctrl_c_during_run(server, session_id, tmp_path, tmux_panes):
    """Ctrl-C on the terminal during run: the wait fails as "interrupted", the command gets
    the interrupt (once, from the terminal) and stops, and run dies of SIGINT as it did."""
    pidfile = tmp_path / "pid"
    viewer = await Client.connect(server.ws_url(session_id))
    # Python handles SIGINT from its first line, so no interrupt can land between writing the
    # pid and sleeping (a shell would hold it until its `sleep` ended).
    child_code = f"import os, time; open({str(pidfile)!r}, 'w').write(str(os.getpid())); time.sleep(30)"
    pane = tmux_panes([cli_binary(), "run", page_url(server, session_id), "--label", "Long", "--",
                       sys.executable, "-c", child_code])
    await viewer.wait_state(lambda s: s["phase"] == "waiting", 10, "waiting")
    await asyncio.to_thread(wait_until, lambda: pidfile.exists() and pidfile.read_text().strip(), 5)
    child = int(pidfile.read_text())
    pane.keys("C-c")
    finished = await viewer.wait_state(lambda s: s["phase"] == "finished", 10, "finished")
    assert (finished["outcome"], finished["label"]) == ("failed", "interrupted")
    await asyncio.to_thread(wait_until, lambda: pane.status() is not None, 5, "run ends")
    assert pane.status() == -signal.SIGINT
    assert not pid_alive(child)
    await viewer.close()


@run_async
async def test_sigterm_is_passed_on(server, session_id, tmp_path):
    """A SIGTERM sent to run alone (no terminal) is passed on to the command; the wait fails
    as "interrupted" and run dies of SIGTERM."""
    pidfile = tmp_path / "pid"
    viewer = await Client.connect(server.ws_url(session_id))
    proc = subprocess.Popen(
        [cli_binary(), "run", page_url(server, session_id), "--",
         "sh", "-c", f"echo $$ > {pidfile}; exec sleep 30"],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
    try:
        await viewer.wait_state(lambda s: s["phase"] == "waiting", 10, "waiting")
        await asyncio.to_thread(wait_until, lambda: pidfile.exists() and pidfile.read_text().strip(), 5)
        child = int(pidfile.read_text())
        proc.send_signal(signal.SIGTERM)
        finished = await viewer.wait_state(lambda s: s["phase"] == "finished", 10, "finished")
        assert (finished["outcome"], finished["label"]) == ("failed", "interrupted")
        assert await asyncio.to_thread(proc.wait, 10) == -signal.SIGTERM
        assert not pid_alive(child)
    finally:
        proc.kill()
        proc.wait()
        await viewer.close()


def test_run_without_an_applied_wait_sends_nothing(server, session_id):
    """When the wait is refused (someone else's wait is on), the command still runs with a
    warning, and its end does not finish the other wait."""
    assert api_command(server, session_id, {"op": "wait", "label": "Theirs"}).status == 200
    r = cli("run", page_url(server, session_id), "--", "sh", "-c", "exit 0")
    assert r.returncode == 0
    assert "warning" in r.stderr and "busy" in r.stderr, r.stderr
    state = api_read(server, session_id).json["state"]
    assert (state["phase"], state["label"]) == ("waiting", "Theirs")


# -- an unreachable server -----------------------------------------------------------------
def test_unreachable_server(tmp_path):
    """Nothing listening: commands and watch exit 3 saying so; run still runs its command,
    with a warning, and exits with the command's status."""
    url = f"http://127.0.0.1:{free_port()}/?session=gone"
    r = cli("start", url, "--seconds", "5")
    assert r.returncode == 3 and "cannot be reached" in r.stderr, r
    r = cli("watch", url)
    assert r.returncode == 3 and "cannot be reached" in r.stderr, r
    marker = tmp_path / "ran"
    began = time.monotonic()
    r = cli("run", url, "--", "sh", "-c", f"echo yes > {marker}; exit 4")
    assert r.returncode == 4, r
    assert marker.read_text() == "yes\n"
    assert "warning" in r.stderr and "running the command anyway" in r.stderr, r.stderr
    assert time.monotonic() - began < 15


def test_silent_server_holds_the_command_back_briefly(tmp_path):
    """A server that takes the connection and never answers holds the command back for a few
    seconds only; run then warns, runs it, and exits with its status once the wait gives up."""
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(64)
    marker = tmp_path / "ran"
    try:
        began = time.monotonic()
        proc = subprocess.Popen(
            [cli_binary(), "run", f"http://127.0.0.1:{silent.getsockname()[1]}/?session=quiet", "--",
             "sh", "-c", f"echo yes > {marker}; exit 5"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        wait_until(marker.exists, 8, "the command runs")
        assert time.monotonic() - began < 6
        _, err = proc.communicate(timeout=40)
        assert proc.returncode == 5, err
        assert b"has not answered the wait" in err, err
    finally:
        silent.close()


def test_missing_command(server, session_id):
    """A command that cannot start exits 127 and fails the wait, as a shell would report it."""
    r = cli("run", page_url(server, session_id), "--", "/nonexistent/countdown-cli-test")
    assert r.returncode == 127 and "cannot run" in r.stderr, r
    state = api_read(server, session_id).json["state"]
    assert (state["phase"], state["outcome"], state["label"]) == ("finished", "failed", "exit 127")


def test_install_puts_countdown_next_to_the_server(tmp_path):
    """scripts/install installs the countdown client in PREFIX/bin with the server."""
    server_bin = REPO_ROOT / ".build" / "debug" / "countdown-server"
    res = subprocess.run([str(REPO_ROOT / "scripts" / "install"), str(tmp_path)], capture_output=True,
                         timeout=120, env={**os.environ, "COUNTDOWN_SERVER_BIN": str(server_bin),
                                           "COUNTDOWN_BIN": cli_binary()})
    assert res.returncode == 0, res.stderr.decode()
    installed = tmp_path / "bin" / "countdown"
    assert os.access(installed, os.X_OK)
    r = subprocess.run([str(installed), "--help"], capture_output=True, text=True, timeout=10)
    assert r.returncode == 0 and "run URL" in r.stdout


def test_a_talk_from_the_command_line():
    """README's Running a talk with the built binary on a --control key server: start with
    overtime and levels, a message and a blackout (refused without the key), `watch`
    through a pipe printing the level, message and blackout and counting up second by
    second in overtime, then `stop`, after which `watch --exit-on-finish` exits 0."""
    srv = start_server("--control", "key")
    try:
        session = "talk" + uuid.uuid4().hex[:8]
        url = page_url(srv, session)
        key = asyncio.run(_controller_key(srv, session))
        env = {"COUNTDOWN_TOKEN": key}
        refused = cli("message", url, "Wrap up")
        assert refused.returncode == 1 and "forbidden" in refused.stderr, refused
        started = cli("start", url, "--seconds", "2", "--overtime", "--warn", "60", "--danger", "30", env=env)
        assert started.returncode == 0, started
        assert started.stdout == "running  2  danger\n", started.stdout
        said = cli("message", url, "Wrap up", env=env)
        assert said.returncode == 0 and said.stdout.endswith("  “Wrap up”\n"), said
        dark = cli("blackout", url, "on", env=env)
        assert dark.returncode == 0 and dark.stdout.endswith("“Wrap up”  blackout\n"), dark
        watch = subprocess.Popen([cli_binary(), "watch", url, "--exit-on-finish"], stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)
        lines: list[str] = []
        over = re.compile(r"overtime  \+(\d+)  over  “Wrap up”  blackout")
        counted: list[int] = []
        try:
            # A pipe's line cannot be awaited with a timeout but through a thread.
            read = queue.Queue()
            threading.Thread(target=lambda: [read.put(x) for x in watch.stdout], daemon=True).start()
            while len(counted) < 2:
                line = read.get(timeout=10).rstrip("\n")
                lines.append(line)
                if m := over.fullmatch(line):
                    counted.append(int(m.group(1)))
            assert counted[1] == counted[0] + 1, lines
            stopped = cli("stop", url, env=env)
            assert stopped.returncode == 0, stopped
            assert stopped.stdout == "finished  Countdown finished  stopped  “Wrap up”  blackout\n", stopped
            assert watch.wait(timeout=10) == 0, watch.stderr.read()
            while not (line := read.get(timeout=10).rstrip("\n")).startswith("finished"):
                lines.append(line)
            lines.append(line)
        finally:
            if watch.poll() is None:
                watch.kill()
                watch.wait()
        assert lines[-1] == "finished  Countdown finished  stopped  “Wrap up”  blackout", lines
        assert cli("blackout", url, "maybe", env=env).returncode == 2
    finally:
        srv.stop_and_check()


async def _controller_key(srv, session: str) -> str:
    host = await Client.connect(srv.ws_url(session))
    key = host.snapshot["key"]
    await host.close()
    return key
