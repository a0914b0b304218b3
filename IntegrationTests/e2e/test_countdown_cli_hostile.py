"""The `countdown` client against servers that cannot be trusted: a peer written here that
redirects, streams without end, answers with escape sequences or a long Retry-After, or
sends garbage, truncated chunked bodies or huge headers. The client must fail cleanly, in
bounded memory and time, never follow a redirect with its token, and never pass a control
character to the terminal. Also: an idle `watch` does not spin."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import threading
import time

import pytest

from test_countdown_cli import LineReader, LoopbackPeer, cli, cli_binary, page_url

ACK = {"type": "ack", "id": None, "seq": 1, "state": {
    "phase": "waiting", "spinner": True, "enabled": False, "label": "Job", "remaining": 0,
    "duration": 0, "endsAt": None, "viewers": 0, "remainingMs": None, "stale": False,
    "startedAt": 1796406507948, "timeoutAt": None, "outcome": None, "level": "normal",
    "overSince": None, "overMs": None, "overtime": False, "warnAtSeconds": None,
    "dangerAtSeconds": None, "message": None, "blackout": False}}

# What a terminal would obey: ESC (and so CSI, OSC), BEL, and the 8-bit CSI.
CONTROLS = ("\x1b", "\x07", "\x9b")


class Hostile(LoopbackPeer):
    """A loopback HTTP peer: each request's head and body go to `answer(conn, request)`,
    which writes whatever it likes. Every request is kept, and can be awaited."""

    def __init__(self, answer):
        self.answer = answer
        self.requests: list[dict] = []
        self._cond = threading.Condition()
        super().__init__()
        self.url = f"http://127.0.0.1:{self.port}/?session=s1"

    def _answer(self, conn: socket.socket, head: bytes, headers: dict[str, str], body: bytes):
        method, path = head.decode("latin-1").split(" ")[:2]
        request = {"method": method, "path": path, "headers": headers,
                   "op": json.loads(body).get("op") if body else None}
        with self._cond:
            self.requests.append(request)
            self._cond.notify_all()
        try:
            self.answer(conn, request)
        except OSError:
            pass  # the client hung up, as it should on much of this

    def wait_for(self, pred, timeout: float = 10.0) -> dict:
        with self._cond:
            assert self._cond.wait_for(lambda: any(pred(r) for r in self.requests), timeout), \
                self.requests
            return next(r for r in self.requests if pred(r))


@pytest.fixture
def hostile():
    made: list[Hostile] = []

    def make(answer) -> Hostile:
        h = Hostile(answer)
        made.append(h)
        return h

    yield make
    for h in made:
        h.close()


def reply(conn, status: str, body: bytes, *headers: str, ctype: str = "application/json"):
    head = [f"HTTP/1.1 {status}", f"Content-Type: {ctype}", f"Content-Length: {len(body)}",
            "Connection: close", *headers]
    conn.sendall(("\r\n".join(head) + "\r\n\r\n").encode() + body)


def ack_or(other):
    """Acks `wait` as the server would; answers everything else with `other`."""
    def answer(conn, request):
        if request["op"] == "wait":
            reply(conn, "200 OK", json.dumps(ACK).encode())
        else:
            other(conn, request)
    return answer


def assert_printable(text: str):
    for c in CONTROLS:
        assert c not in text, repr(text)


# -- 12: an idle watch ------------------------------------------------------------------
def cpu_ticks(pid: int) -> int:
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])  # utime + stime, in clock ticks


def test_idle_watch_does_not_spin(server, session_id):
    """An idle session's watch sleeps between the server's keepalives: over 2 s it uses a
    small part of what one core gives (URLSession's stream on Linux woke ~1,800 times a
    second and took most of a core)."""
    proc = subprocess.Popen([cli_binary(), "watch", page_url(server, session_id)],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
    try:
        LineReader(proc).wait_line("idle  Ready")
        before = cpu_ticks(proc.pid)
        # Idle is the absence of events: nothing can be awaited, so a fixed span is watched.
        time.sleep(2)
        used = cpu_ticks(proc.pid) - before
        hz = os.sysconf("SC_CLK_TCK")
        assert used < hz * 2 // 10, f"{used} ticks of {hz * 2} in 2 s"
    finally:
        proc.kill()
        proc.wait()


# -- 13: redirects ----------------------------------------------------------------------
def test_a_redirect_is_not_followed_with_the_token(hostile):
    """A server that answers 307 to another origin gets an error, not a retried POST: the
    other origin never sees a request, let alone the token; watch does not follow either."""
    elsewhere = hostile(lambda conn, r: reply(conn, "200 OK", json.dumps(ACK).encode()))
    target = f"http://127.0.0.1:{elsewhere.port}/api/v1/sessions/s1/commands"
    redirecting = hostile(lambda conn, r: reply(conn, "307 Temporary Redirect", b"",
                                                f"Location: {target}"))
    token = "secret-token-never-elsewhere"
    r = cli("start", redirecting.url, "--seconds", "5", env={"COUNTDOWN_TOKEN": token})
    assert r.returncode == 1, r
    assert "redirect" in r.stderr and "not followed" in r.stderr, r.stderr
    assert redirecting.requests[0]["headers"].get("authorization") == f"Bearer {token}"
    r = cli("watch", redirecting.url, env={"COUNTDOWN_TOKEN": token})
    assert r.returncode == 1 and "redirect" in r.stderr, r
    assert elsewhere.requests == [], elsewhere.requests


# -- 14: memory -------------------------------------------------------------------------
def endless_event(conn, request):
    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\n")
    line = b"data: " + b"x" * 60_000 + b"\n"
    for _ in range(100_000):  # bounded: 6 GB, far past the client's limit
        conn.sendall(line)


def test_an_event_without_end_is_refused(hostile):
    """An event stream of 60 KB data lines and no blank line ends watch with an error
    naming the event limit, instead of growing (the line limit alone let it take GBs)."""
    peer = hostile(endless_event)
    r = cli("watch", peer.url, timeout=60)
    assert r.returncode == 1, r
    assert "an event over 256 KB" in r.stderr, r.stderr


@pytest.mark.parametrize("framing", ["close", "length", "chunked"])
def test_an_answer_without_end_is_refused(hostile, framing):
    """A command's answer that never ends (read to the close, a huge Content-Length, or
    chunked) is cut off at 1 MB with an error, instead of being held whole in memory."""
    def answer(conn, request):
        head = {"close": "Connection: close",
                "length": "Content-Length: 300000000",
                "chunked": "Transfer-Encoding: chunked"}[framing]
        conn.sendall(f"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n{head}\r\n\r\n".encode())
        block = b"[" * 65536
        if framing == "chunked":
            block = b"10000\r\n" + block + b"\r\n"
        for _ in range(5000):  # bounded: 300 MB
            conn.sendall(block)

    r = cli("start", hostile(answer).url, "--seconds", "5", timeout=60)
    assert r.returncode == 1, r
    assert "an answer over 1 MB" in r.stderr, r.stderr


# -- 15: what reaches the terminal ------------------------------------------------------
EVIL = "\x1b]0;TITLE\x07\x1b[2J\x9b31m"


@pytest.mark.parametrize("where", ["wait-400-body", "done-409-message"])
def test_run_warnings_are_printable(hostile, where):
    """A 400 whose body has escape sequences, or an error object whose message has them,
    reaches run's warnings with every control character replaced."""
    def answer(conn, request):
        if where == "wait-400-body":
            reply(conn, "400 Bad Request", EVIL.encode(), ctype="text/plain")
        elif request["op"] == "wait":
            reply(conn, "200 OK", json.dumps(ACK).encode())
        else:
            reply(conn, "409 Conflict", json.dumps(
                {"type": "error", "id": None, "code": "not_waiting", "message": EVIL}).encode())

    r = cli("run", hostile(answer).url, "--", "true")
    assert r.returncode == 0, r
    assert "warning" in r.stderr and "TITLE" in r.stderr, r.stderr
    assert_printable(r.stderr)
    assert "\ufffd]0;TITLE\ufffd\ufffd[2J" in r.stderr, repr(r.stderr)


def test_refusals_and_labels_are_printable(hostile):
    """A one-shot command's refusal and watch's line show a server's escape sequences as
    U+FFFD; so do a redirect's target and a 5xx's body."""
    def answer(conn, request):
        if request["method"] == "GET":
            state = dict(ACK["state"], label=EVIL, message=EVIL)
            event = json.dumps({"type": "snapshot", "session": "s1", "epoch": "e", "seq": 1,
                                "serverTime": 1796406507948, "state": state})
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\n"
                         + f"event: snapshot\ndata: {event}\n\n".encode())
            conn.recv(1)  # the stream stays open until watch hangs up
        elif request["op"] == "pause":
            reply(conn, "302 Found", b"", f"Location: http://x/{EVIL}")
        else:
            reply(conn, "502 Bad Gateway", EVIL.encode(), ctype="text/plain")

    peer = hostile(answer)
    for op in ("pause", "cancel"):
        r = cli(op, peer.url)
        assert r.returncode == 1 and "TITLE" in r.stderr, r
        assert_printable(r.stderr)
    proc = subprocess.Popen([cli_binary(), "watch", peer.url], stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
    try:
        out = LineReader(proc)
        line = "waiting  \ufffd]0;TITLE\ufffd\ufffd[2J\ufffd31m  “\ufffd]0;TITLE\ufffd\ufffd[2J\ufffd31m”"
        out.wait_line(line)
        assert_printable(out.raw.decode())
    finally:
        proc.kill()
        proc.wait()


# -- 16: bounded waits ------------------------------------------------------------------
def unavailable_for_an_hour(conn, request):
    reply(conn, "503 Service Unavailable", json.dumps(
        {"type": "error", "id": None, "code": "unavailable", "message": "later"}).encode(),
        "Retry-After: 3600")


def test_run_ends_after_its_command_despite_retry_after(hostile):
    """`done` answered 503 with Retry-After: 3600: run still exits with its command's
    status once the report's budget is spent, saying the session was not told."""
    peer = hostile(ack_or(unavailable_for_an_hour))
    proc = subprocess.Popen([cli_binary(), "run", peer.url, "--", "true"], stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        _, err = proc.communicate(timeout=40)
    finally:
        proc.kill()
    assert proc.returncode == 0, err
    assert "was not told" in err, err
    assert [r["op"] for r in peer.requests][:2] == ["wait", "done"], peer.requests


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_ends_runs_report_at_once(hostile, sig):
    """While run waits out the server's Retry-After to report its command's end, a SIGTERM
    or SIGINT ends it at once, dying of that signal as documented."""
    peer = hostile(ack_or(unavailable_for_an_hour))
    proc = subprocess.Popen([cli_binary(), "run", peer.url, "--", "true"], stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        peer.wait_for(lambda r: r["op"] == "done")
        proc.send_signal(sig)
        assert proc.wait(timeout=5) == -sig
    finally:
        proc.kill()
        proc.wait()


def test_a_signal_during_an_unanswered_wait_ends_run(hostile, tmp_path):
    """A server that takes the wait and never answers: a SIGTERM ends run within its short
    budget for reporting an interruption, dying of SIGTERM, and the command never starts
    (run waited out every try of the wait and of its fail before)."""
    peer = hostile(lambda conn, request: conn.recv(1))
    marker = tmp_path / "ran"
    proc = subprocess.Popen([cli_binary(), "run", peer.url, "--", "touch", str(marker)],
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        peer.wait_for(lambda r: r["op"] == "wait")
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=5) == -signal.SIGTERM
        assert not marker.exists()
    finally:
        proc.kill()
        proc.wait()


# -- peers nobody here wrote ------------------------------------------------------------
GARBAGE = {
    "not-http": b"\x00\xff\x1b[2Jgarbage\r\n\r\n",
    "bad-status": b"HTTP/1.1 20 OK\r\n\r\n",
    "truncated-chunked": b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                         b"Transfer-Encoding: chunked\r\n\r\n40\r\nevent: snap",
    "bad-chunk-size": b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                      b"Transfer-Encoding: chunked\r\n\r\nzz\r\n",
    "short-body": b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{",
    "two-lengths": b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n{}",
    "huge-headers": b"HTTP/1.1 200 OK\r\n" + b"X-Junk: " + b"y" * 1_000_000 + b"\r\n\r\n",
    "closed": b"",
}


@pytest.mark.parametrize("name", sorted(GARBAGE))
def test_garbage_fails_cleanly(hostile, name):
    """Whatever a peer sends instead of HTTP, a command and watch end with an error on
    stderr and status 1, 2 or 3: no crash, no hang, nothing unprintable."""
    def answer(conn, request):
        conn.sendall(GARBAGE[name])
        conn.shutdown(socket.SHUT_WR)
    peer = hostile(answer)
    for args in (["pause", peer.url], ["watch", peer.url]):
        r = cli(*args, timeout=60)
        assert r.returncode in (1, 2, 3), (args, r)
        assert r.stderr.startswith("countdown: "), (args, r)
        assert_printable(r.stderr)
