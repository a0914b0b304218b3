"""The `countdown` command line over https, through a TLS front (as a reverse proxy would
be) whose certificate a private CA signed: commands and `watch` trust it with --cacert, and
refuse it without, so nothing is sent to a peer the client cannot verify."""

from __future__ import annotations

import pytest

from apikit import command as api_command, read as api_read
from test_countdown_cli import cli, watch_a_run_to_its_finish
from tlskit import TLSFront, private_ca


@pytest.fixture
def front(server, tmp_path):
    ca, cert, key = private_ca(tmp_path)
    tls = TLSFront(cert, key, (server.host, server.port))
    tls.ca = ca
    yield tls
    tls.close()


def https_url(front, session: str) -> str:
    return f"https://127.0.0.1:{front.port}/?session={session}"


def test_commands_over_https_trust_the_ca_file(server, session_id, front):
    """A command over https with --cacert reaches the server through TLS and prints its
    result; the session really runs."""
    r = cli("start", https_url(front, session_id), "--seconds", "100", "--cacert", str(front.ca))
    assert (r.returncode, r.stdout) == (0, "running  1:40\n"), r.stderr
    assert api_read(server, session_id).json["state"]["phase"] == "running"
    assert "ok" in front.handshakes


def test_watch_over_https_follows_the_session(server, session_id, front):
    """`watch` over https with --cacert: its event stream goes through TLS, line by line to
    the finish, and --exit-on-finish ends it with 0."""
    watch_a_run_to_its_finish(server, session_id, https_url(front, session_id),
                              "--cacert", str(front.ca))


@pytest.mark.parametrize("action", [["start", "--seconds", "100"], ["watch"]])
def test_a_certificate_nobody_trusts_is_refused(server, session_id, front, action):
    """Without --cacert the system's CAs decide, and they never signed the test CA: the
    client ends unreachable (3) naming the certificate, and the session is untouched."""
    r = cli(action[0], https_url(front, session_id), *action[1:], timeout=20)
    assert r.returncode == 3, (r.returncode, r.stdout, r.stderr)
    assert "certificate" in r.stderr.lower() or "ssl" in r.stderr.lower(), r.stderr
    assert api_read(server, session_id).json["state"]["phase"] == "idle"


def test_an_unreadable_ca_file_is_a_usage_error(server, session_id, tmp_path):
    """--cacert naming no readable file is refused before anything is sent (2)."""
    r = cli("start", f"{server.http_base}/?session={session_id}", "--seconds", "5",
            "--cacert", str(tmp_path / "missing.pem"))
    assert r.returncode == 2 and "certificate file" in r.stderr, (r.returncode, r.stderr)
    assert api_read(server, session_id).json["state"]["phase"] == "idle"
