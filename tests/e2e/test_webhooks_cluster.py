"""Webhooks in cluster mode (--redis): the outbox is a Redis Stream read through one
consumer group, so each event reaches the receiver once while every instance is up, and
at least once after the instance that held it is killed (-9). The receiver is the test's
own, on a loopback port; every request's signature is checked with the PyPI
`standardwebhooks` package."""

from __future__ import annotations

import base64
import json
import os
import signal
import subprocess
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from standardwebhooks import Webhook

from apikit import command
from serverproc import PUBLIC_DIR, server_binary, start_server
from test_cluster import REDIS_SERVER, Redis, redis  # noqa: F401 (redis: a fixture)

pytestmark = pytest.mark.skipif(not Path(REDIS_SERVER).exists(), reason="redis-server is not installed")

SECRET = "whsec_" + base64.b64encode(os.urandom(32)).decode()
CLAIM_MS = 600


class Receiver:
    """An HTTP endpoint that records every delivery and answers `status` (200 unless
    set otherwise), after checking the Standard Webhooks signature."""

    def __init__(self):
        self.status = 200
        self.lock = threading.Condition()
        self.requests: list[dict] = []  # every request, whatever it was answered
        self.bad_signatures = 0
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                headers = {k.lower(): v for k, v in self.headers.items()}
                try:
                    Webhook(SECRET).verify(body, headers)
                    ok = True
                except Exception:  # noqa: BLE001 - any verification failure counts
                    ok = False
                with receiver.lock:
                    status = receiver.status
                    receiver.requests.append(
                        {"id": headers.get("webhook-id"), "body": json.loads(body), "status": status,
                         "signed": ok, "at": time.monotonic()})
                    if not ok:
                        receiver.bad_signatures += 1
                    receiver.lock.notify_all()
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/hook"

    def delivered(self) -> list[dict]:
        """Requests answered 2xx: the deliveries that count."""
        with self.lock:
            return [r for r in self.requests if 200 <= r["status"] < 300]

    def wait(self, what: str, predicate, timeout: float = 20.0) -> None:
        deadline = time.monotonic() + timeout
        with self.lock:
            while not predicate():
                left = deadline - time.monotonic()
                if left <= 0:
                    pytest.fail(f"timed out waiting for {what}; got {self.requests}")
                self.lock.wait(min(left, 0.2))

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def receiver():
    r = Receiver()
    yield r
    r.close()


@pytest.fixture
def secret_file():
    path = Path(tempfile.mkdtemp(prefix="countdown-hook-")) / "secret"
    path.write_text(SECRET + "\n")
    return path


def instance(redis: Redis, receiver: Receiver, secret_file: Path):
    return start_server("--redis", redis.url, "--webhook", receiver.url, "--webhook-secret-file",
                        str(secret_file), "--test-webhook-backoff-ms", "50",
                        "--test-webhook-claim-ms", str(CLAIM_MS), "--max-commands-per-second", "1000")


def outbox_settled(redis: Redis) -> bool:
    """Nothing left in the stream and nothing pending in its group."""
    pending = redis.command("XPENDING", "countdown:events", "countdown-webhooks").split("\n")[0]
    return redis.command("XLEN", "countdown:events") == "0" and pending in ("0", "")


def holder(redis: Redis) -> tuple[str, int]:
    """The one pending entry's consumer and how many times it was handed out."""
    lines = redis.command("XPENDING", "countdown:events", "countdown-webhooks", "-", "+", "10").split("\n")
    assert len(lines) == 4, lines
    return lines[1], int(lines[3])


def wait_settled(redis: Redis, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not outbox_settled(redis):
        assert time.monotonic() < deadline, "the outbox never emptied"
        time.sleep(0.05)


def test_each_event_arrives_exactly_once_with_two_instances(redis, receiver, secret_file):
    """Commands on both instances and runs that finish by themselves: every event
    reaches the receiver once, signed, with the body the issue describes."""
    a = instance(redis, receiver, secret_file)
    b = instance(redis, receiver, secret_file)
    try:
        sessions = [f"hook-{i}" for i in range(8)]
        for i, session in enumerate(sessions):
            srv = a if i % 2 == 0 else b
            assert command(srv, session, {"op": "start", "seconds": 1}).status == 200
        # A wait that is done on the other instance than the one that began it.
        assert command(a, "ci-job", {"op": "wait", "label": "Deploying"}).status == 200
        assert command(b, "ci-job", {"op": "done", "label": "Deployed"}).status == 200
        # 8 starts, their 8 elapsed finishes (no command causes them), a wait and its done.
        expected = 2 * len(sessions) + 2
        receiver.wait(f"{expected} deliveries", lambda: len(receiver.delivered()) >= expected)
        wait_settled(redis)
        delivered = receiver.delivered()
        ids = [r["id"] for r in delivered]
        assert len(ids) == expected and len(set(ids)) == expected, ids
        assert receiver.bad_signatures == 0
        kinds = sorted((r["body"]["data"]["session"], r["body"]["type"]) for r in delivered)
        assert kinds == sorted([(s, "session.started") for s in sessions]
                               + [(s, "session.finished") for s in sessions]
                               + [("ci-job", "session.waiting"), ("ci-job", "session.finished")])
        outcomes = {(r["body"]["data"]["session"], r["body"]["data"].get("outcome"))
                    for r in delivered if r["body"]["type"] == "session.finished"}
        assert outcomes == {(s, "elapsed") for s in sessions} | {("ci-job", "done")}
        for r in delivered:
            assert r["body"]["data"]["state"]["phase"] in ("running", "finished", "waiting")
            assert isinstance(r["body"]["data"]["seq"], int)
    finally:
        a.stop_and_check()
        b.stop_and_check()


def test_an_event_whose_holder_is_killed_arrives_from_the_other(redis, receiver, secret_file):
    """The receiver fails while A holds the event; A is killed with -9; B takes the event
    over once it has been idle past the claim timeout, and it arrives, same webhook-id.
    While A is alive and retrying, B never takes it."""
    receiver.status = 503
    a = instance(redis, receiver, secret_file)
    b = None
    try:
        assert command(a, "held", {"op": "start", "seconds": 600}).status == 200
        receiver.wait("A's first tries", lambda: len(receiver.requests) >= 2)
        first = holder(redis)
        b = instance(redis, receiver, secret_file)
        # Three claim timeouts with both up: A keeps touching its entry, so it stays
        # A's, handed out once (a takeover would count a second delivery).
        since = time.monotonic()
        receiver.wait("A's tries over three claim timeouts",
                      lambda: receiver.requests[-1]["at"] >= since + 3 * CLAIM_MS / 1000, timeout=20)
        assert holder(redis) == first
        held_id = receiver.requests[0]["id"]
        assert {r["id"] for r in receiver.requests} == {held_id}
        a.proc.send_signal(signal.SIGKILL)
        a.proc.wait(timeout=5)
        with receiver.lock:
            receiver.status = 200
        receiver.wait("the event from B", lambda: len(receiver.delivered()) >= 1)
        wait_settled(redis)
        delivered = receiver.delivered()
        assert [r["id"] for r in delivered] == [held_id]
        assert delivered[0]["body"]["type"] == "session.started"
        assert delivered[0]["body"]["data"]["session"] == "held"
        assert receiver.bad_signatures == 0
    finally:
        if b is not None:
            b.stop_and_check()
        a.kill()


def test_a_run_that_ends_while_every_instance_is_down_is_sent_at_start(redis, receiver, secret_file):
    """A 1 s run whose only instance stops before it elapses: the instance that comes
    back records and sends its session.finished (outcome elapsed), once."""
    a = instance(redis, receiver, secret_file)
    assert command(a, "down", {"op": "start", "seconds": 1}).status == 200
    receiver.wait("the start", lambda: len(receiver.delivered()) >= 1)
    assert a.terminate() == 0
    ends_at = receiver.delivered()[0]["body"]["data"]["state"]["endsAt"]
    while int(redis.command("TIME").split("\n")[0]) * 1000 <= ends_at:
        time.sleep(0.05)
    assert len(receiver.delivered()) == 1
    again = instance(redis, receiver, secret_file)
    try:
        receiver.wait("the finish", lambda: len(receiver.delivered()) >= 2)
        wait_settled(redis)
        delivered = receiver.delivered()
        assert len(delivered) == 2
        finish = delivered[1]["body"]
        assert finish["type"] == "session.finished" and finish["data"]["outcome"] == "elapsed"
        assert finish["data"]["session"] == "down"
    finally:
        again.stop_and_check()


def test_the_claim_flag_is_bounded():
    """--test-webhook-claim-ms takes whole milliseconds from 100 to a day, nothing else."""
    for value in ("99", "86400001", "-0", "1e3", "1e400", "", "9223372036854775808",
                  "18446744073709551616", "5\x01", "9" * 4096):
        done = subprocess.run([str(server_binary()), "--port", "0", "--public", str(PUBLIC_DIR),
                               "--test-webhook-claim-ms", value], capture_output=True, text=True, timeout=10)
        assert done.returncode == 2, (value[:40], done)
        assert "--test-webhook-claim-ms" in done.stderr, done.stderr
    shown = subprocess.run([str(server_binary()), "--test-webhook-claim-ms", "250", "--print-config"],
                           capture_output=True, text=True, timeout=10)
    assert shown.returncode == 0 and "250" in shown.stdout, shown
