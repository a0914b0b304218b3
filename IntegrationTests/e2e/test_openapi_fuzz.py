"""The API held to its own OpenAPI document by a request generator nobody here wrote:
Schemathesis (4.x) reads Public/openapi.json from the running server and runs every
check it has (`--checks all`) in its examples, coverage, fuzzing and stateful phases,
against one instance (`--control open`) and against a cluster of two instances sharing
a redis-server (`--control key`), with an --api-token-file token so that commands are
authorised and applied. Any finding fails the test, with Schemathesis's report (its
seed and a curl command for each finding); COUNTDOWN_FUZZ_SEED replays a seed.

This file is also Schemathesis's hook module (SCHEMATHESIS_HOOKS): the hooks below are
every exclusion, each with its reason. Two kinds:
- rules of the server that JSON Schema cannot state, stated in the document's prose
  and tested on their own in test_openapi_rules.py;
- what lws 4.1.6 does before the server sees a request, which the document cannot
  promise (docs/operating.md, HTTP framing, with lws's source lines): a header whose
  name is a prefix of one lws knows read together with the next, and a request past
  lws's header space or its fragments, or with a NUL in a URL argument, closed
  unanswered.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import time
import urllib.parse
from pathlib import Path

import pytest

try:
    import schemathesis
except ImportError:  # the tests are skipped; the hooks below are then plain functions
    schemathesis = None

from opskit import scrape
from serverproc import E2E_DIR, start_server
from test_cluster import Redis, REDIS_SERVER

TOKEN = "fuzz-token-0123456789abcdef"
SCHEMATHESIS = shutil.which("schemathesis")
# Bounds, per run: the examples per operation and phase, and a time budget that ends
# fuzzing and stateful testing early on a slow machine.
MAX_EXAMPLES = 40
MAX_SECONDS = 45

# Methods the coverage phase sends to every path besides the documented ones, expecting
# 405 with Allow: every one, TRACE and QUERY (which lws does not know) included.
UNEXPECTED_METHODS = ["get", "put", "post", "delete", "options", "patch", "trace", "query"]

pytestmark = pytest.mark.skipif(SCHEMATHESIS is None, reason="schemathesis is not installed")
hook = schemathesis.hook if schemathesis else (lambda function: function)


def _is_int(value) -> bool:
    """JSON Schema's integer, which the server takes too: 5 and 5.0."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and float(value).is_integer()


# The names lws 4.1.6 knows (lib/roles/http/lextable-strings.h), with the character
# that ends each: methods a space, headers a colon.
LWS_TOKENS = [f"{name} " for name in ("get", "post", "options", "http/1.1", "http/1.0", "proxy", "connect",
                                      "head")] + [f"{name}:" for name in (
    "host connection upgrade origin sec-websocket-draft sec-websocket-extensions sec-websocket-key1 "
    "sec-websocket-key2 sec-websocket-protocol sec-websocket-accept sec-websocket-nonce http2-settings accept "
    "access-control-request-headers if-modified-since if-none-match accept-encoding accept-language pragma "
    "cache-control authorization cookie content-length content-type date range referer sec-websocket-key "
    "sec-websocket-version sec-websocket-origin accept-charset accept-ranges access-control-allow-origin age "
    "allow content-disposition content-encoding content-language content-location content-range etag expect "
    "expires from if-match if-range if-unmodified-since last-modified link location max-forwards "
    "proxy-authenticate proxy-authorization refresh retry-after server set-cookie strict-transport-security "
    "transfer-encoding user-agent vary via www-authenticate x-real-ip x-forwarded-for te replay-nonce "
    "x-auth-token").split()]


def swallows_next_header(name: str) -> bool:
    """lws 4.1.6 takes a header whose name is a proper prefix of a name it knows ("A:",
    "Content:") and the header after it for one unknown header, so the second is lost."""
    lowered = name.lower()
    return any(token.startswith(lowered) and token != lowered + ":" for token in LWS_TOKENS)


# What the request line and headers may take of lws's 4 KiB header space, with room
# for what the client adds (Host, Content-Type, the token).
HEAD_BYTES = 3000


# lws 4.1.6 keeps the request's parts in a fixed table of fragments: past about 80 URL
# arguments it logs "More hdr frags than we can deal with" and drops the connection.
MAX_ARGUMENTS = 60


def head_bytes(case) -> int:
    query = urllib.parse.urlencode(case.query or {}, doseq=True)
    return len(query) + sum(len(str(k)) + len(str(v)) + 4 for k, v in (case.headers or {}).items())


def arguments(case) -> int:
    return sum(len(v) if isinstance(v, list) else 1 for v in (case.query or {}).values())


@hook
def before_call(context, case, kwargs):
    # A header lws merges with the next one (swallows_next_header) hides an Idempotency-Key
    # or a Last-Event-ID behind it, before any callback: left out (lws's limit).
    for name in [name for name in (case.headers or {}) if swallows_next_header(str(name))]:
        del case.headers[name]
    # Past lws's header space, or its fragments (MAX_ARGUMENTS), the connection is closed
    # without a status (operating.md, Limits): extra headers, then URL arguments, are
    # dropped until the request fits (lws's limit).
    for part in (case.headers, case.query):
        while part and (head_bytes(case) > HEAD_BYTES or arguments(case) > MAX_ARGUMENTS):
            del part[list(part)[-1]]
    body = case.body
    if not isinstance(body, dict) or body.get("op") != "start":
        return
    # A start's `until` must also be 1 s to 30 days after the server's clock, which a
    # schema cannot know: a schema-valid deadline is moved into that window.
    until = body.get("until")
    if _is_int(until) and 0 <= until <= 253402300799999:
        body["until"] = int(time.time() * 1000) + 60_000
    # dangerAtSeconds below warnAtSeconds: JSON Schema cannot compare two fields.
    warn, danger = body.get("warnAtSeconds"), body.get("dangerAtSeconds")
    if _is_int(warn) and _is_int(danger) and 1 <= warn <= 86400 and 1 <= danger <= 86400 and danger >= warn:
        if warn == 1:
            del body["dangerAtSeconds"]
        else:
            body["dangerAtSeconds"] = warn - 1


def _message(response) -> str:
    try:
        return json.loads(response.content).get("message", "")
    except (ValueError, AttributeError):
        return ""


# Refusals that depend on the session, the clock or the server's configuration, each
# documented in the command's description: a `rotate_key` without --control key, and a
# command the session's rules refuse as out of range (an adjust past 30 days or, in
# overtime, a deadline more than a day past; an Idempotency-Key already used for
# another command on the session).
STATE_REFUSALS = {"rotate_key needs a server started with --control key", "the command's fields are out of range"}
# Limits JSON Schema cannot state, in the document's prose: JSON nested deeper than 16
# levels (in a field the op ignores) is 400, a body over 4096 bytes 413.
DEPTH_REFUSAL = "JSON nested deeper than 16 levels"


@hook
def filter_failure(context, failure, case, response):
    if failure.code == "ST202" and (
            (response.status_code == 400 and _message(response) in STATE_REFUSALS | {DEPTH_REFUSAL})
            or response.status_code == 413):
        return False
    return True


def _config(directory: Path) -> Path:
    config = directory / "schemathesis.toml"
    config.write_text(
        "[phases.coverage]\n"
        f"unexpected-methods = {json.dumps(UNEXPECTED_METHODS)}\n\n"
        "[auth.openapi.apiToken]\n"
        f'bearer = "{TOKEN}"\n')
    return config


def _token_file(directory: Path) -> str:
    path = directory / "tokens"
    path.write_text(TOKEN + "\n")
    return str(path)


def _schemathesis(server, directory: Path) -> subprocess.Popen:
    """Schemathesis against `server`, reading the document the server serves."""
    seed = os.environ.get("COUNTDOWN_FUZZ_SEED")
    command = [
        SCHEMATHESIS, "--config-file", str(_config(directory)), "run",
        f"{server.http_base}/api/v1/openapi.json",
        "--checks", "all", "--phases", "examples,coverage,fuzzing,stateful",
        "--max-examples", str(MAX_EXAMPLES), "--max-time", str(MAX_SECONDS),
        "--workers", "1", "--request-timeout", "5", "--generation-database", "none",
        # No NUL in generated strings: lws drops a request with one in a URL argument
        # unanswered, before any callback (lws's limit). NUL in a body is
        # test_openapi_rules.py's.
        "--generation-allow-x00", "false",
        "--no-color", "--output-truncate", "false",
        *(["--seed", seed] if seed else []),
    ]
    env = {**os.environ, "PYTHONPATH": str(E2E_DIR), "SCHEMATHESIS_HOOKS": Path(__file__).stem}
    return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                            cwd=directory)


def _finish(*runs: tuple[subprocess.Popen, str]) -> None:
    """Waits for every run (so none is left behind a failure), then fails on any finding."""
    outputs = [(run.communicate(timeout=MAX_SECONDS * 4)[0], run.returncode, label) for run, label in runs]
    for output, code, label in outputs:
        assert code == 0, f"Schemathesis found something ({label}):\n{output}"
        # Every phase ran: none was skipped for want of time or operations.
        for phase in ("Examples", "Coverage", "Fuzzing", "Stateful"):
            assert f"✅ {phase}" in output, f"{phase} did not pass ({label}):\n{output}"


def applied_ops(server) -> set[str]:
    """The ops this server applied (commands_total with result ok): the generator's
    commands were authorised and reached the sessions, not all refused at the door."""
    return {dict(labels)["op"] for (name, labels), value in scrape(server.host, server.port).items()
            if name == "countdown_commands_total" and dict(labels).get("result") == "ok" and value > 0}


def test_one_instance_keeps_to_its_document():
    """Every check Schemathesis has, in all four phases, finds nothing on one instance
    in --control open, with a token for the list; the server still serves afterwards."""
    directory = Path(tempfile.mkdtemp(prefix="countdown-fuzz-"))
    server = start_server("--api-token-file", _token_file(directory), "--max-commands-per-second", "100000")
    try:
        _finish((_schemathesis(server, directory), "one instance, --control open"))
        # The document's own example start at least: commands reach the session.
        assert "start" in applied_ops(server), applied_ops(server)
    finally:
        server.stop_and_check()


@pytest.mark.skipif(not Path(REDIS_SERVER).exists(), reason="redis-server is not installed")
def test_a_cluster_keeps_to_its_document():
    """The same, against both instances of a cluster sharing one redis-server at once, in
    --control key with a token: commands on one instance change what the other reads."""
    directory = Path(tempfile.mkdtemp(prefix="countdown-fuzz-"))
    redis = Redis()
    servers = [start_server("--redis", redis.url, "--control", "key", "--api-token-file", _token_file(directory),
                            "--max-commands-per-second", "100000") for _ in range(2)]
    try:
        runs = []
        for index, server in enumerate(servers):
            own = directory / str(index)
            own.mkdir()
            runs.append((_schemathesis(server, own), f"cluster instance {index}, --control key"))
        _finish(*runs)
        # With the token, key mode's commands apply (the example start at least).
        applied = applied_ops(servers[0]) | applied_ops(servers[1])
        assert "start" in applied, applied
    finally:
        for server in servers:
            server.stop_and_check()
        redis.stop()
