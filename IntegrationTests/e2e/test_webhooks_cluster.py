"""Webhooks in cluster mode (--redis): the outbox is a Redis Stream read through one
consumer group, so each event reaches the receiver once while every instance is up, and
at least once after the instance that held it is killed (-9), and at once from another
instance when the one that held it stops. The receiver (hookkit's)
is on a loopback port; every request's signature is checked with the PyPI
`standardwebhooks` package."""

from __future__ import annotations

import signal
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

import hookkit
from apikit import command
from opskit import wait_event
from serverproc import PUBLIC_DIR, server_binary, start_server
from test_cluster import REDIS_SERVER, Redis, redis  # noqa: F401 (redis: a fixture)

pytestmark = pytest.mark.skipif(not Path(REDIS_SERVER).exists(), reason="redis-server is not installed")

CLAIM_MS = 600


class Receiver(hookkit.Receiver):
    """hookkit's receiver (each signature checked with `standardwebhooks`), answering
    `status`, and noting when each request came."""

    def __init__(self):
        super().__init__()
        self.status = 200

        def answer(event: dict) -> int:
            event["at"] = time.monotonic()
            return self.status

        self.answer = answer

    @property
    def requests(self) -> list[dict]:
        """Every verified request, whatever it was answered."""
        with self.changed:
            return list(self.events)

    def delivered(self) -> list[dict]:
        """Requests answered 2xx: the deliveries that count."""
        return [r for r in self.requests if 200 <= r["status"] < 300]

    def wait(self, what: str, predicate, timeout: float = 20.0) -> None:
        self.wait_for(lambda _: predicate(), what, timeout)


@pytest.fixture
def receiver():
    r = Receiver()
    yield r
    r.close()


@pytest.fixture
def secret_file():
    path = Path(tempfile.mkdtemp(prefix="countdown-hook-")) / "secret"
    path.write_text(hookkit.SECRET + "\n")
    return path


def instance(redis: Redis, receiver: Receiver, secret_file: Path, claim_ms: int = CLAIM_MS):
    return start_server("--redis", redis.url, "--webhook", receiver.url, "--webhook-secret-file",
                        str(secret_file), "--test-webhook-backoff-ms", "50",
                        "--test-webhook-claim-ms", str(claim_ms), "--max-commands-per-second", "1000")


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
        assert receiver.rejected == []
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
        receiver.status = 200
        receiver.wait("the event from B", lambda: len(receiver.delivered()) >= 1)
        wait_settled(redis)
        delivered = receiver.delivered()
        assert [r["id"] for r in delivered] == [held_id]
        assert delivered[0]["body"]["type"] == "session.started"
        assert delivered[0]["body"]["data"]["session"] == "held"
        assert receiver.rejected == []
    finally:
        if b is not None:
            b.stop_and_check()
        a.kill()


def test_an_instance_that_stops_hands_its_event_to_the_other_at_once(redis, receiver, secret_file):
    """The receiver fails while A holds the event; A is stopped (SIGTERM, as a rolling
    restart does) and says it handed the event back; B sends it well inside the claim
    timeout (a minute here), same webhook-id, once."""
    claim_ms = 60_000
    receiver.status = 503
    a = instance(redis, receiver, secret_file, claim_ms)
    b = instance(redis, receiver, secret_file, claim_ms)
    try:
        assert command(a, "handed", {"op": "start", "seconds": 600}).status == 200
        receiver.wait("A's first tries", lambda: len(receiver.requests) >= 2)
        held_id = receiver.requests[0]["id"]
        assert holder(redis)[0] != "", "A holds the event"
        a.stop_and_check()
        assert wait_event(a, "webhook_handed_back")["entries"] == 1
        receiver.status = 200
        stopped = time.monotonic()
        receiver.wait("the event from B", lambda: len(receiver.delivered()) >= 1, timeout=10)
        assert time.monotonic() - stopped < claim_ms / 1000 / 2
        wait_settled(redis)
        delivered = receiver.delivered()
        assert [r["id"] for r in delivered] == [held_id]
        assert {r["id"] for r in receiver.requests} == {held_id}
        assert receiver.rejected == []
    finally:
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


def test_stage_events_arrive_once_each_from_the_function(redis, receiver, secret_file):
    """Issue 20's ops on the Redis path: a start with overtime on A, a message and a
    blackout on B, and a stop on A each arrive once, typed session.started,
    session.message, session.blackout and session.finished (outcome stopped, with the
    time over). Reaching overtime is no event: the run crossed zero before the stop."""
    a = instance(redis, receiver, secret_file)
    b = instance(redis, receiver, secret_file)
    try:
        session = "stage-hook"
        assert command(a, session, {"op": "start", "seconds": 1, "overtime": True, "warnAtSeconds": 1}).status == 200
        assert command(b, session, {"op": "message", "text": "Wrap up"}).status == 200
        assert command(b, session, {"op": "blackout", "on": True}).status == 200
        # Past zero by Redis's clock, so the stop ends an overtime.
        receiver.wait("the start", lambda: len(receiver.delivered()) >= 1)
        ends_at = receiver.delivered()[0]["body"]["data"]["state"]["endsAt"]
        while int(redis.command("TIME").split("\n")[0]) * 1000 <= ends_at + 1000:
            time.sleep(0.05)
        stopped = command(a, session, {"op": "stop"})
        assert stopped.status == 200, stopped.body
        receiver.wait("4 deliveries", lambda: len(receiver.delivered()) >= 4)
        wait_settled(redis)
        delivered = receiver.delivered()
        assert len(delivered) == 4 and len({r["id"] for r in delivered}) == 4, delivered
        bodies = sorted((r["body"] for r in delivered), key=lambda body: body["data"]["seq"])
        assert [body["type"] for body in bodies] == [
            "session.started", "session.message", "session.blackout", "session.finished"]
        started, message, blackout, finished = (body["data"] for body in bodies)
        assert started["state"]["overtime"] is True and started["state"]["warnAtSeconds"] == 1
        assert message["state"]["message"] == "Wrap up"
        assert blackout["state"]["blackout"] is True and blackout["state"]["message"] == "Wrap up"
        assert finished["outcome"] == "stopped", finished
        assert finished["state"]["phase"] == "finished" and finished["state"]["overMs"] >= 1000, finished
        assert finished["state"]["message"] == "Wrap up" and finished["state"]["blackout"] is True
        assert receiver.rejected == []
    finally:
        a.stop_and_check()
        b.stop_and_check()


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
