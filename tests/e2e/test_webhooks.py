"""End-to-end tests of the webhook flags: what --webhook needs (a secret, a durable
outbox), the edges of every value, and that the secret never shows. Delivery itself,
signed and verified with PyPI's standardwebhooks, is in the tests below them."""

from __future__ import annotations

import base64
import subprocess
from pathlib import Path

import pytest

from serverproc import PUBLIC_DIR, server_binary

SECRET = "whsec_" + base64.b64encode(bytes(range(32))).decode()
URL = "http://127.0.0.1:9/hook"


def run_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    binary = server_binary()
    if not binary.exists():
        pytest.fail(f"countdown-server binary not found at {binary}")
    return subprocess.run([str(binary), "--port", "0", "--public", str(PUBLIC_DIR), *args],
                          capture_output=True, timeout=10, stdin=subprocess.DEVNULL, env=env)


@pytest.fixture
def secret_file(tmp_path: Path) -> Path:
    path = tmp_path / "secret"
    path.write_text(SECRET + "\n")
    return path


def assert_usage_error(res: subprocess.CompletedProcess, *words: str) -> None:
    err = res.stderr.decode(errors="replace")
    assert res.returncode == 2, f"exit {res.returncode}, stderr {err!r}"
    assert b"listening on" not in res.stdout
    for word in words:
        assert word in err, f"{word!r} not in {err!r}"


def test_webhook_needs_a_secret_file():
    """--webhook without --webhook-secret-file exits 2 saying so: events are always signed."""
    assert_usage_error(run_cli("--webhook", URL, "--data", ":memory:"), "--webhook-secret-file")


def test_webhook_needs_a_durable_outbox(secret_file: Path):
    """--webhook with --data :memory: and no --redis exits 2, naming both ways out."""
    assert_usage_error(run_cli("--webhook", URL, "--webhook-secret-file", str(secret_file),
                               "--data", ":memory:"), "--data", "--redis")


@pytest.mark.parametrize("url", [
    "ftp://127.0.0.1/hook", "file:///etc/passwd", "127.0.0.1:9/hook", "http://", "http:///x",
    "http://h/a b", "http://h/\t", "", "http://h/" + "a" * 4096,
], ids=["ftp", "file", "no-scheme", "no-host", "empty-host", "space", "tab", "empty", "4KB"])
def test_bad_webhook_urls_exit_2(url: str, secret_file: Path):
    """Only http and https URLs with a host are taken; anything else exits 2 before listening."""
    assert_usage_error(run_cli("--webhook", url, "--webhook-secret-file", str(secret_file)), "--webhook")


@pytest.mark.parametrize("content,words", [
    ("", "empty"), ("\n\n", "empty"), (SECRET[len("whsec_"):], "whsec_"),
    ("whsec_not*base64!", "base64"), ("whsec_" + base64.b64encode(b"k" * 23).decode(), "23 bytes"),
    ("whsec_" + base64.b64encode(b"k" * 65).decode(), "65 bytes"),
    ("whsec_" + "A" * 2000, "longer than 64"), ("x" * 5000, "over 4096 bytes"),
    ("whsec_\0" + SECRET[7:], "base64"),
], ids=["empty", "blank-lines", "no-prefix", "bad-base64", "23-bytes", "65-bytes", "4KB-key",
        "5KB-file", "NUL"])
def test_bad_secrets_exit_2_without_showing_them(content: str, words: str, tmp_path: Path):
    """A bad secret file exits 2 naming the file and what is wrong, and never echoes the content."""
    path = tmp_path / "secret"
    path.write_text(content)
    res = run_cli("--webhook", URL, "--webhook-secret-file", str(path))
    assert_usage_error(res, str(path), words)
    if len(content) > 8:
        assert content.strip().encode()[:40] not in res.stderr


def test_missing_secret_file_exits_2(tmp_path: Path):
    """An unreadable secret file exits 2 naming it."""
    missing = tmp_path / "nope"
    assert_usage_error(run_cli("--webhook", URL, "--webhook-secret-file", str(missing)), str(missing))


@pytest.mark.parametrize("flag,value", [
    ("--webhook-retry-for", "-1"), ("--webhook-retry-for", "2592001"),
    ("--webhook-retry-for", str(2**63)), ("--webhook-retry-for", str(-2**63)),
    ("--webhook-retry-for", "1e308"), ("--webhook-retry-for", "1e400"), ("--webhook-retry-for", "-0.0"),
    ("--webhook-timeout", "0"), ("--webhook-timeout", "301"), ("--webhook-timeout", str(2**64)),
    ("--webhook-max-in-flight", "0"), ("--webhook-max-in-flight", str(2**64)),
    ("--webhook-max-in-flight", "x" * 4096),
    ("--webhook-events", "session.bogus"), ("--webhook-events", ""),
    ("--webhook-events", "session.started,"), ("--webhook-events", "SESSION.STARTED"),
])
def test_bad_webhook_values_exit_2(flag: str, value: str, secret_file: Path):
    """Every webhook number is range-checked and every event type checked, at the edges."""
    assert_usage_error(run_cli("--webhook", URL, "--webhook-secret-file", str(secret_file), flag, value),
                       flag)


def test_print_config_shows_the_path_and_never_the_secret(secret_file: Path):
    """--print-config shows the secret file's path, the URL without its password, and no secret."""
    res = run_cli("--webhook", "http://user:hunter2@127.0.0.1:9/hook", "--webhook", URL,
                  "--webhook-secret-file", str(secret_file), "--webhook-events",
                  "session.finished, session.started", "--print-config")
    out = res.stdout.decode()
    assert res.returncode == 0, res
    assert "hunter2" not in out and SECRET[6:] not in out
    lines = {line.split()[0]: line.split()[1:] for line in out.splitlines() if line.strip()}
    assert lines["--webhook"][0] == "http://127.0.0.1:9/hook,http://127.0.0.1:9/hook"
    assert lines["--webhook-secret-file"][0] == str(secret_file)
    assert lines["--webhook-events"][0] == "session.started,session.finished"
    assert lines["--webhook-retry-for"][0] == "86400"


def test_webhook_flags_come_from_the_environment(secret_file: Path):
    """The variables set the same options, and a flag replaces the variable's URL rather than adding to it."""
    env = {"COUNTDOWN_WEBHOOK": "http://127.0.0.1:1/env", "COUNTDOWN_WEBHOOK_SECRET_FILE": str(secret_file),
           "COUNTDOWN_WEBHOOK_TIMEOUT": "3", "PATH": "/usr/bin:/bin"}
    res = run_cli("--print-config", env=env)
    assert res.returncode == 0, res
    out = res.stdout.decode()
    assert "http://127.0.0.1:1/env" in out and "COUNTDOWN_WEBHOOK_TIMEOUT" in out
    res = run_cli("--print-config", "--webhook", URL, env=env)
    out = res.stdout.decode()
    assert URL in out and "/env" not in out
