"""End-to-end tests of the webhook flags: what --webhook needs (a secret, a durable
outbox), the edges of every value, and that the secret never shows. Delivery itself,
signed and verified with PyPI's standardwebhooks, is in the tests below them."""

from __future__ import annotations

import base64
import hashlib
import http.server
import re
import signal
import ssl
import subprocess
import threading
import time
import uuid
from pathlib import Path

import pytest

from cdclient import Client, http_get, run_async
from opskit import scrape, value, wait_log, wait_scrape
from serverproc import PUBLIC_DIR, REPO_ROOT, server_binary, start_server
# The webhook tests' receiver: every request verified with PyPI's standardwebhooks.
from hookkit import SECRET as STORE_SECRET, Receiver, of, receiver  # noqa: F401 (a fixture)
from tlskit import private_ca

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
    "http://h/a b", "http://h/\t", "", "http://h/" + "a" * 4096, "http://127.0.0.1:99999/x",
    "http://127.0.0.1:0/x", "http://[::1/x",
], ids=["ftp", "file", "no-scheme", "no-host", "empty-host", "space", "tab", "empty", "4KB", "port-99999",
        "port-0", "open-ipv6"])
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


def test_a_refused_url_is_shown_without_its_password(secret_file: Path):
    """A URL refused at start-up is echoed as the logs show one: without what could be a
    user:password@, a path or a query."""
    res = run_cli("--webhook", "ftp://user:hunter2@127.0.0.1/x?token=QUERY-SECRET", "--webhook-secret-file",
                  str(secret_file))
    assert_usage_error(res, shown_url("ftp://user:hunter2@127.0.0.1/x?token=QUERY-SECRET"))
    assert b"hunter2" not in res.stderr and b"SECRET" not in res.stderr


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


def shown_url(url: str) -> str:
    """A webhook URL as logs and --print-config show it: scheme://host[:port] and, when
    anything else was there, a marker with the whole URL's SHA-256 prefix."""
    base = re.match(r"[a-z]+://(?:[^/?#]*@)?([^/?#]*)", url)
    kept = url[:url.index("://") + 3] + base.group(1)
    if url in (kept, kept + "/"):
        return url
    return f"{kept}/[redacted:{hashlib.sha256(url.encode()).hexdigest()[:8]}]"


def test_print_config_shows_the_path_and_never_the_secret(secret_file: Path):
    """--print-config shows the secret file's path, the URLs without their password, path or
    query (each told apart by its fingerprint), and no secret."""
    res = run_cli("--webhook", "http://user:hunter2@127.0.0.1:9/hook", "--webhook", URL,
                  "--webhook-secret-file", str(secret_file), "--webhook-events",
                  "session.finished, session.started", "--print-config")
    out = res.stdout.decode()
    assert res.returncode == 0, res
    assert "hunter2" not in out and SECRET[6:] not in out and "/hook" not in out
    lines = {line.split()[0]: line.split()[1:] for line in out.splitlines() if line.strip()}
    assert lines["--webhook"][0] == shown_url("http://user:hunter2@127.0.0.1:9/hook") + "," + shown_url(URL)
    assert lines["--webhook"][0].count("/[redacted:") == 2 and len(set(lines["--webhook"][0].split(","))) == 2
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
    assert shown_url("http://127.0.0.1:1/env") in out and "COUNTDOWN_WEBHOOK_TIMEOUT" in out
    res = run_cli("--print-config", "--webhook", URL, env=env)
    out = res.stdout.decode()
    assert shown_url(URL) in out and "127.0.0.1:1/" not in out


SECRET_URLS = ["http://127.0.0.1:9/hooks/PATH-SECRET", "http://127.0.0.1:9/hook?token=QUERY-SECRET",
               "http://user:PASSWORD-SECRET@127.0.0.1:9/hook"]


def test_secrets_in_webhook_urls_stay_out_of_logs_and_print_config(tmp_path: Path, secret_file: Path):
    """A secret in a webhook URL's path, query or userinfo is in neither the `starting` nor the
    `webhooks_on` line nor --print-config: each shows scheme://host[:port] and a fingerprint."""
    args = [arg for url in SECRET_URLS for arg in ("--webhook", url)]
    shown = ",".join(shown_url(url) for url in SECRET_URLS)
    printed = run_cli(*args, "--webhook-secret-file", str(secret_file), "--print-config")
    assert printed.returncode == 0, printed
    assert b"SECRET" not in printed.stdout + printed.stderr, printed
    row = [line.split() for line in printed.stdout.decode().splitlines() if line.startswith("--webhook ")]
    assert row[0][1] == shown, row
    srv = start_server(*args, "--webhook-secret-file", str(secret_file), "--data", str(tmp_path / "c.db"),
                       "--log-format", "json")
    try:
        on = wait_log(srv, lambda line: line["event"] == "webhooks_on", what="webhooks_on")
        assert on["endpoints"] == shown, on
        starting = wait_log(srv, lambda line: line["event"] == "starting", what="starting")
        assert starting["webhook"] == shown, starting
        assert "SECRET" not in srv.stderr()
    finally:
        srv.stop_and_check()


# -- Delivery, end to end: a real outbox (SQLite), a receiver on a loopback port ----------


def webhook_server(tmp_path: Path, *urls: str, extra: tuple[str, ...] = ()):
    secret_file = tmp_path / "hook-secret"
    secret_file.write_text(STORE_SECRET + "\n")
    args = ["--data", str(tmp_path / "countdown.db"), "--webhook-secret-file", str(secret_file),
            "--test-webhook-backoff-ms", "50", "--log-format", "json"]
    for url in urls:
        args += ["--webhook", url]
    return start_server(*args, *extra)


def sid() -> str:
    return "h" + uuid.uuid4().hex[:16]


@run_async
async def test_a_receiver_answering_500_twice_gets_the_event_on_the_third_try(tmp_path, receiver):
    """Two 500s, then a 200: three signed tries of one event under one webhook-id (each
    verified by standardwebhooks), settled on the third, and counted in /metrics."""
    session = sid()
    tries: dict[str, int] = {}

    def answer(event):
        tries[event["id"]] = tries.get(event["id"], 0) + 1
        return 500 if tries[event["id"]] <= 2 else 200

    receiver.answer = answer
    srv = webhook_server(tmp_path, receiver.url)
    try:
        c = await Client.connect(srv.ws_url(session))
        await c.command({"op": "start", "seconds": 60})
        events = receiver.wait_for(lambda ev: of(ev, session, "session.started", 200), "the third try")
        started = of(events, session, "session.started")
        assert [e["status"] for e in started] == [500, 500, 200]
        assert len({e["id"] for e in started}) == 1
        assert all(e["body"] == started[0]["body"] for e in started)
        body = started[0]["body"]
        assert body["data"]["session"] == session and isinstance(body["data"]["seq"], int)
        assert body["data"]["state"]["phase"] == "running"
        samples = wait_scrape(srv.host, srv.port, lambda m: value(
            m, "countdown_webhook_deliveries_total", result="delivered") >= 1, what="delivered 1")
        assert value(samples, "countdown_webhook_deliveries_total", result="retried") == 2
        assert value(samples, "countdown_webhook_deliveries_total", result="dead") == 0
        assert value(samples, "countdown_webhook_delivery_seconds_count") == 1
        await c.close()
    finally:
        srv.stop_and_check()


@run_async
async def test_each_op_reports_its_event_in_order(tmp_path, receiver):
    """start, pause, resume, adjust, cancel, wait and done each send their own type, with
    the session's seq rising and `outcome` on the finish."""
    session = sid()
    srv = webhook_server(tmp_path, receiver.url)
    try:
        c = await Client.connect(srv.ws_url(session))
        for command in [{"op": "start", "seconds": 60}, {"op": "pause"}, {"op": "resume"},
                        {"op": "adjust", "seconds": 30}, {"op": "cancel"}, {"op": "wait", "label": "Build"},
                        {"op": "done", "label": "Built"}]:
            await c.command(command)
        events = receiver.wait_for(lambda ev: of(ev, session, "session.finished"), "the finish")
        mine = sorted((e for e in events if e["body"]["data"]["session"] == session),
                      key=lambda e: e["body"]["data"]["seq"])
        assert [e["body"]["type"] for e in mine] == [
            "session.started", "session.paused", "session.resumed", "session.adjusted",
            "session.cancelled", "session.waiting", "session.finished"]
        assert len({e["id"] for e in mine}) == 7
        assert mine[-1]["body"]["data"]["outcome"] == "done"
        assert mine[-1]["body"]["data"]["state"]["label"] == "Built"
        await c.close()
    finally:
        srv.stop_and_check()


@run_async
async def test_every_url_gets_the_events_the_filter_lets_through(tmp_path, receiver):
    """Two --webhook URLs each get every cancelled and finished event, and no other type:
    --webhook-events filters at delivery."""
    other = Receiver()
    session = sid()
    srv = webhook_server(tmp_path, receiver.url, other.url,
                         extra=("--webhook-events", "session.cancelled,session.finished"))
    try:
        c = await Client.connect(srv.ws_url(session))
        for command in [{"op": "start", "seconds": 60}, {"op": "pause"}, {"op": "cancel"},
                        {"op": "wait"}, {"op": "fail", "label": "Broke"}]:
            await c.command(command)
        for r in (receiver, other):
            r.wait_for(lambda ev: of(ev, session, "session.finished"), "the finish")
        # Entries are taken oldest first, so once nothing is held every earlier one is settled.
        wait_scrape(srv.host, srv.port, lambda m: value(m, "countdown_webhook_events_queued") == 0,
                    what="nothing queued")
        for r in (receiver, other):
            types = [e["body"]["type"] for e in r.events if e["body"]["data"]["session"] == session]
            assert sorted(types) == ["session.cancelled", "session.finished"], types
        await c.close()
    finally:
        srv.stop_and_check()
        other.close()


@run_async
async def test_an_event_no_try_delivers_is_dead_after_the_window(tmp_path, receiver):
    """A receiver that always answers 503, with --webhook-retry-for 1: the event is tried
    more than once, then given up with a webhook_dead line naming it, and counted."""
    session = sid()
    receiver.answer = lambda event: 503
    srv = webhook_server(tmp_path, receiver.url, extra=("--webhook-retry-for", "1"))
    try:
        c = await Client.connect(srv.ws_url(session))
        await c.command({"op": "start", "seconds": 60})
        line = wait_log(srv, lambda l: l["event"] == "webhook_dead", timeout=10, what="webhook_dead")
        tried = of(receiver.events, session, "session.started")
        assert len(tried) >= 2 and all(e["status"] == 503 for e in tried)
        assert line["id"] == tried[0]["id"] and line["session"] == session
        assert line["type"] == "session.started" and line["last"] == "HTTP 503"
        assert line["attempts"] == len(tried) and line["level"] == "warn"
        samples = scrape(srv.host, srv.port)
        assert value(samples, "countdown_webhook_deliveries_total", result="dead") == 1
        assert value(samples, "countdown_webhook_deliveries_total", result="delivered") == 0
        await c.close()
    finally:
        srv.stop_and_check()


def test_the_webhook_families_are_served_and_documented(tmp_path, receiver):
    """With --webhook, /metrics declares the three webhook families, each with its row in
    docs/operating.md's metric tables (the metrics test's server has no --webhook)."""
    srv = webhook_server(tmp_path, receiver.url)
    try:
        _, _, body = http_get(srv.host, srv.port, "/metrics")
    finally:
        srv.stop_and_check()
    families = set(re.findall(r"^# TYPE (countdown_webhook\S*) ", body.decode(), re.M))
    assert families == {"countdown_webhook_events_queued", "countdown_webhook_deliveries_total",
                        "countdown_webhook_delivery_seconds"}, families
    text = (REPO_ROOT / "docs" / "operating.md").read_text()
    rows = text[text.index("\n## Metrics"):text.index("\n## Graphs worth watching")]
    documented = {name for line in rows.split("\n") if line.startswith("| `")
                  for name in re.findall(r"`([a-z_]+)`", line.split("|")[1])}
    assert not families - documented, families - documented


@run_async
async def test_sigterm_drops_a_hung_request_and_the_restart_sends_it(tmp_path, receiver):
    """A receiver that never answers does not hold up SIGTERM (exit 0 at once, not after
    --webhook-timeout 60), and the event it held is sent again after the restart, under
    the same webhook-id."""
    session = sid()
    arrived, release = threading.Event(), threading.Event()

    def hang(event):
        arrived.set()
        release.wait(30)
        return 200

    receiver.answer = hang
    srv = webhook_server(tmp_path, receiver.url, extra=("--webhook-timeout", "60"))
    try:
        c = await Client.connect(srv.ws_url(session))
        await c.command({"op": "start", "seconds": 60})
        assert arrived.wait(10), "the event never reached the receiver"
        await c.close()
        began = time.monotonic()
        assert srv.terminate(signal.SIGTERM) == 0, srv.stderr()
        assert time.monotonic() - began < 5, "SIGTERM waited for the hung request"
    finally:
        if srv.alive():
            srv.kill()
    release.set()
    receiver.answer = lambda event: 200
    srv = webhook_server(tmp_path, receiver.url, extra=("--port", str(srv.port)))
    try:
        events = receiver.wait_for(lambda ev: len(of(ev, session, "session.started")) >= 2,
                                   "the resend after the restart")
        first, again = of(events, session, "session.started")[:2]
        assert first["id"] == again["id"] and first["body"] == again["body"]
    finally:
        srv.stop_and_check()


@run_async
async def test_https_is_spoken_and_an_untrusted_certificate_refused(tmp_path):
    """An https URL is sent over TLS (the TLS receiver sees the handshake), and a
    certificate no trusted authority signed is refused: never delivered, dead after the
    window with curl's reason naming the certificate."""
    key, cert = tmp_path / "key.pem", tmp_path / "cert.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                    "-nodes", "-keyout", str(key), "-out", str(cert), "-days", "1", "-subj", "/CN=127.0.0.1",
                    "-addext", "subjectAltName=IP:127.0.0.1"], check=True, capture_output=True)
    handshakes: list[str] = []
    posts: list[bytes] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self):
            posts.append(self.rfile.read(int(self.headers.get("Content-Length", "0"))))
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args):
            pass

    class TLSServer(http.server.ThreadingHTTPServer):
        def get_request(self):
            sock, address = super().get_request()
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(cert, key)
            tls = context.wrap_socket(sock, server_side=True, do_handshake_on_connect=False)
            try:
                tls.do_handshake()
            except (ssl.SSLError, OSError) as error:
                handshakes.append(repr(error))
                raise
            handshakes.append("ok")
            return tls, address

    tls_server = TLSServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=tls_server.serve_forever, daemon=True).start()
    session = sid()
    srv = webhook_server(tmp_path, f"https://127.0.0.1:{tls_server.server_address[1]}/hook",
                         extra=("--webhook-retry-for", "1"))
    try:
        c = await Client.connect(srv.ws_url(session))
        await c.command({"op": "start", "seconds": 60})
        line = wait_log(srv, lambda l: l["event"] == "webhook_dead", timeout=10, what="webhook_dead")
        assert "certificate" in line["last"].lower() or "ssl" in line["last"].lower(), line
        assert handshakes, "no TLS handshake reached the receiver"
        assert not posts, "a request was sent to an untrusted certificate"
        await c.close()
    finally:
        srv.stop_and_check()
        tls_server.shutdown()
        tls_server.server_close()


@run_async
async def test_https_to_a_receiver_signed_by_the_ca_file(tmp_path):
    """--webhook-ca-file: an https receiver whose certificate the operator's own CA signed
    gets every event, signed and verified by standardwebhooks; the system's CAs alone
    refuse the same receiver (the next test's refusal, here with a CA-signed certificate)."""
    ca, cert, key = private_ca(tmp_path)
    hooks = Receiver(tls=(cert, key))
    session = sid()
    srv = webhook_server(tmp_path, hooks.url, extra=("--webhook-ca-file", str(ca)))
    try:
        c = await Client.connect(srv.ws_url(session))
        await c.command({"op": "start", "seconds": 60})
        await c.command({"op": "cancel"})
        events = hooks.wait_for(lambda e: of(e, session, "session.cancelled"), "the cancel over https")
        assert [e["body"]["type"] for e in events if e["body"]["data"]["session"] == session] == [
            "session.started", "session.cancelled"]
        await c.close()
    finally:
        srv.stop_and_check()
    refused_session = sid()
    plain = tmp_path / "plain"
    plain.mkdir()
    srv = webhook_server(plain, hooks.url, extra=("--webhook-retry-for", "1"))
    try:
        c = await Client.connect(srv.ws_url(refused_session))
        await c.command({"op": "start", "seconds": 60})
        line = wait_log(srv, lambda l: l["event"] == "webhook_dead", timeout=10, what="webhook_dead")
        assert "certificate" in line["last"].lower() or "ssl" in line["last"].lower(), line
        assert not of(hooks.events, refused_session, "session.started")
        await c.close()
    finally:
        srv.stop_and_check()
        hooks.close()


@pytest.mark.parametrize("content,words", [
    (None, "cannot be read"), (b"", "no PEM certificate"), (SECRET.encode(), "no PEM certificate"),
    (b"\0" * 4096, "no PEM certificate"), (b"A" * (4 << 20) + b"A", "over 4194304 bytes"),
    ("dir", "cannot be read"),
], ids=["missing", "empty", "a-secret", "NUL-4KB", "over-4MB", "directory"])
def test_bad_ca_files_exit_2(content, words: str, tmp_path: Path, secret_file: Path):
    """--webhook-ca-file is read at start-up: a missing, empty, non-PEM, oversized file or
    a directory exits 2 naming the flag and the reason, before listening."""
    path = tmp_path / "ca.pem"
    if content == "dir":
        path.mkdir()
    elif content is not None:
        path.write_bytes(content)
    res = run_cli("--webhook", "https://127.0.0.1:9/hook", "--webhook-secret-file", str(secret_file),
                  "--data", str(tmp_path / "db"), "--webhook-ca-file", str(path))
    assert_usage_error(res, "--webhook-ca-file", words)


def test_ca_file_needs_a_webhook(tmp_path: Path):
    """--webhook-ca-file without --webhook exits 2: it would trust nothing."""
    ca, _, _ = private_ca(tmp_path)
    assert_usage_error(run_cli("--webhook-ca-file", str(ca)), "--webhook-ca-file needs --webhook")
