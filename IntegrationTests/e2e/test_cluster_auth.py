"""Cluster mode against a Redis that wants a password: requirepass (the default user)
and an ACL user named in the URL. The password comes from a file, and is never on the
command line, in the logs or in --print-config."""

from __future__ import annotations

import asyncio
import os
import subprocess
import tempfile
from pathlib import Path

from cdclient import Client, run_async
from serverproc import PUBLIC_DIR, server_binary, start_server
from test_cluster import Redis, command_until, pytestmark  # noqa: F401  (skips without redis-server)

PASSWORD = "s3cret-Passw0rd-no-one-may-see"


def password_file(text: str) -> str:
    fd, path = tempfile.mkstemp(prefix="countdown-redis-pass-")
    with os.fdopen(fd, "w") as f:
        f.write(text + "\n")
    return path


def run_binary(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([str(server_binary()), "--port", "0", "--public", str(PUBLIC_DIR), *args],
                          env={**os.environ, **(env or {})}, capture_output=True, text=True, timeout=20)


async def start_and_see_it(server, session_id: str) -> None:
    client = await Client.connect(server.ws_url(session_id))
    _, reply = await client.command({"op": "start", "seconds": 30, "id": 1})
    assert reply["type"] == "ack", reply
    await client.close()


def assert_hidden(server) -> None:
    """The password is in neither the process's arguments nor its log."""
    cmdline = Path(f"/proc/{server.proc.pid}/cmdline").read_bytes()
    assert PASSWORD.encode() not in cmdline
    assert PASSWORD not in server.stderr()


@run_async
async def test_requirepass_with_the_right_password_works(session_id):
    redis = Redis(extra=("--requirepass", PASSWORD), password=PASSWORD)
    path = password_file(PASSWORD)
    server = start_server("--redis", redis.url, "--redis-password-file", path)
    try:
        await start_and_see_it(server, session_id)
        assert redis.command("HGET", f"countdown:s:{session_id}", "phase") == "running"
        # A Redis restart: both connections AUTH again before anything else.
        redis.stop()
        redis.start()
        client = await Client.connect(server.ws_url(session_id + "b"))
        # "start" on an idle session: acked once the instance is back and authenticated.
        await command_until(client, "start", "ack", within=15)
        await client.close()
        assert_hidden(server)
    finally:
        server.stop_and_check()
        redis.stop()


@run_async
async def test_acl_user_in_the_url_works(session_id):
    redis = Redis(extra=("--user", "default", "off", "--user", "countdown", "on", f">{PASSWORD}", "~countdown:*",
                         "&countdown:*", "+@all"))
    path = password_file(PASSWORD)
    server = start_server("--redis", f"redis://countdown@127.0.0.1:{redis.port}", env={
        "COUNTDOWN_REDIS_PASSWORD_FILE": path})
    try:
        await start_and_see_it(server, session_id)
        assert_hidden(server)
    finally:
        server.stop_and_check()
        redis.stop()


def test_wrong_password_exits_1_with_a_message():
    redis = Redis(extra=("--requirepass", PASSWORD))
    try:
        for args in (["--redis-password-file", password_file("not-" + PASSWORD)], []):
            done = run_binary("--redis", redis.url, *args)
            assert done.returncode == 1, done
            assert "refused to authenticate" in done.stderr, done.stderr
            assert PASSWORD not in done.stderr and PASSWORD not in done.stdout
    finally:
        redis.stop()


def test_wrong_acl_user_exits_1():
    redis = Redis(extra=("--user", "countdown", "on", f">{PASSWORD}", "~*", "&*", "+@all"))
    try:
        done = run_binary("--redis", f"redis://nobody@127.0.0.1:{redis.port}",
                          "--redis-password-file", password_file(PASSWORD))
        assert done.returncode == 1, done
        assert "refused to authenticate" in done.stderr, done.stderr
    finally:
        redis.stop()


def test_password_in_the_url_is_refused_without_echoing_it():
    done = run_binary("--redis", f"redis://user:{PASSWORD}@127.0.0.1:6379")
    assert done.returncode == 2, done
    assert "--redis-password-file" in done.stderr
    assert PASSWORD not in done.stderr


def test_acl_user_without_a_password_file_is_refused():
    done = run_binary("--redis", "redis://countdown@127.0.0.1:6379")
    assert done.returncode == 2, done
    assert "--redis-password-file" in done.stderr


def test_unreadable_password_file_exits_1_naming_it():
    missing = "/nonexistent/countdown-redis-password"
    done = run_binary("--redis", "redis://127.0.0.1:1", "--redis-password-file", missing)
    assert done.returncode == 1, done
    assert missing in done.stderr


def test_print_config_shows_the_file_not_the_password():
    path = password_file(PASSWORD)
    done = run_binary("--redis", "redis://countdown@127.0.0.1:6379", "--redis-password-file", path,
                      "--print-config")
    assert done.returncode == 0, done
    assert path in done.stdout and "redis://countdown@127.0.0.1:6379" in done.stdout
    assert PASSWORD not in done.stdout and PASSWORD not in done.stderr


@run_async
async def test_password_changed_under_a_running_instance(session_id):
    """Redis's password changes and the connections drop: the instance logs
    redis_auth_failed (without the password), answers unavailable and retries; once the
    password is back it authenticates again on its own."""
    redis = Redis(extra=("--requirepass", PASSWORD), password=PASSWORD)
    server = start_server("--redis", redis.url, "--redis-password-file", password_file(PASSWORD))
    try:
        client = await Client.connect(server.ws_url(session_id))
        redis.command("CONFIG", "SET", "requirepass", "another-" + PASSWORD)
        redis.password = "another-" + PASSWORD
        redis.command("CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes")
        redis.command("CLIENT", "KILL", "TYPE", "pubsub")
        await command_until(client, "start", "unavailable", within=10)
        deadline = asyncio.get_running_loop().time() + 10
        while '"redis_auth_failed"' not in server.stderr():
            assert asyncio.get_running_loop().time() < deadline, server.stderr()
            await asyncio.sleep(0.05)
        redis.command("CONFIG", "SET", "requirepass", PASSWORD)
        redis.password = PASSWORD
        await command_until(client, "start", "ack", within=15)
        assert server.alive()
        assert_hidden(server)
        await client.close()
    finally:
        server.stop_and_check()
        redis.stop()
