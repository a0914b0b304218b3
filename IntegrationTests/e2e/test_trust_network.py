"""End-to-end tests of the network layer's trust boundary (issue 16), against the
built binary over raw sockets, so the test writes every header byte:

- every header and URL argument of an upgrade is read whole: an Origin of 256 bytes
  or more is no longer taken as absent, and one that cannot be read refuses;
- on a non-loopback --host the name a page was served under is its own origin;
- POST /origin-check tells a refused page why, naming --allow-origin;
- --trusted-proxy takes the client's address from X-Forwarded-For;
- a bad --allow-origin entry stops the server at start.
"""

from __future__ import annotations

import http.client
import json
import subprocess
import time
import uuid

import pytest

from cdclient import run_async
from opskit import log_lines, wait_event, wait_log
from rawws import RawWS
from serverproc import server_binary, start_server

LOOP = "127.0.0.1"


def sid() -> str:
    return "t" + uuid.uuid4().hex


def module_server(*args: str, doc: str):
    """A fixture: one server with `args` (and JSON logs) for this module."""
    def fixture():
        srv = start_server(*args, "--log-format", "json")
        yield srv
        srv.stop_and_check()
    fixture.__doc__ = doc
    return pytest.fixture(scope="module")(fixture)


loopback = module_server(doc="A server on the default loopback --host.")
anywhere = module_server("--host", "0.0.0.0", doc="A server on every address, reached through 127.0.0.1.")
keyed = module_server("--control", "key", doc="A server whose sessions need a controller key.")


async def upgrade(srv, path: str | None = None, *, origin: str | None = None, host: str | None = None,
                  headers: list[tuple[str, str]] = (), source: str | None = None) -> RawWS:
    return await RawWS.open(LOOP, srv.port, path or f"/ws/{sid()}", origin=origin, host_header=host,
                            extra_headers=list(headers), source=source)


async def status(srv, path: str | None = None, **kw) -> int | None:
    ws = await upgrade(srv, path, **kw)
    ws.close()
    return ws.status


async def raw_status(srv, request: bytes) -> int | None:
    """Sends `request` byte for byte; the status of the answer, None if the server hung up."""
    ws = await RawWS.connect(LOOP, srv.port)
    try:
        await ws.send_raw(request)
        head = await ws._read_until(b"\r\n\r\n", 5.0)
        if head is None:
            return None
        return int(head.split(b" ", 2)[1])
    finally:
        ws.close()


def upgrade_bytes(srv, path: str, *header_lines: bytes) -> bytes:
    head = [f"GET {path} HTTP/1.1".encode(), f"Host: {LOOP}:{srv.port}".encode(), b"Upgrade: websocket",
            b"Connection: Upgrade", b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==",
            b"Sec-WebSocket-Version: 13", *header_lines]
    return b"\r\n".join(head) + b"\r\n\r\n"


# -- 1. headers are read whole ----------------------------------------------------------
@pytest.mark.parametrize("length", [256, 300, 1000, 2000], ids=lambda n: f"{n}B")
@run_async
async def test_long_foreign_origin_is_refused(loopback, length):
    """A foreign Origin of 256 bytes or more is read whole and refused with 403. It
    used to overflow a 256-byte buffer, read as "no Origin", and upgrade (101)."""
    origin = "http://" + "e" * (length - len("http://.example")) + ".example"
    assert len(origin) == length
    assert await status(loopback, origin=origin) == 403


@pytest.mark.parametrize("length", [3000, 4096], ids=lambda n: f"{n}B")
@run_async
async def test_origin_past_our_cap_or_lws_space_is_refused(loopback, length):
    """Past the server's own header cap (2 KB) an Origin cannot be read whole, so the
    upgrade is refused (403); past lws's 4 KiB of header space lws hangs up itself.
    Never a 101."""
    origin = "http://" + "e" * length + ".example"
    assert await status(loopback, origin=origin) in (403, None)


@run_async
async def test_long_same_host_origin_is_the_servers_own(anywhere):
    """A long name (over 256 bytes) the server was reached under is read whole: its
    own origin upgrades, the same name on another port does not."""
    name = ".".join(["h" * 60] * 5) + ".example.test"
    assert len(name) > 256
    host = f"{name}:{anywhere.port}"
    assert await status(anywhere, origin=f"http://{host}", host=host) == 101
    assert await status(anywhere, origin=f"http://{name}:{anywhere.port + 1}", host=host) == 403


@pytest.mark.parametrize("value", [b"", b"http://127.0.0.1:PORT\x00.evil.example", b"http://127.0.0.1:PORT\x01",
                                   b"http://127.0.0.1:PORT\x7f", b"http://127.0.0.1:PORT\xff",
                                   "http://127.0.0.1:PORT\u00e9".encode()],
                         ids=["empty", "nul", "control", "del", "byte-ff", "utf8"])
@run_async
async def test_odd_origin_bytes_are_refused(loopback, value):
    """An Origin that is present but empty, or holds a NUL, a control byte, DEL or
    anything outside ASCII, is refused and never read as absent. An empty one used to
    upgrade. (lws drops a NUL from a header's length but keeps it in the bytes, so a
    NUL inside the value is seen and refused.)"""
    value = value.replace(b"PORT", str(loopback.port).encode())
    got = await raw_status(loopback, upgrade_bytes(loopback, f"/ws/{sid()}", b"Origin: " + value))
    assert got in (403, 400, None) and got != 101, got


@run_async
async def test_repeated_origin_is_refused(loopback):
    """Two Origin headers, one the server's own, are read together and refused."""
    own = f"http://{LOOP}:{loopback.port}".encode()
    got = await raw_status(loopback, upgrade_bytes(loopback, f"/ws/{sid()}", b"Origin: " + own,
                                                   b"Origin: http://evil.example"))
    assert got == 403
    assert await raw_status(loopback, upgrade_bytes(loopback, f"/ws/{sid()}", b"Origin: " + own)) == 101


@run_async
async def test_unreadable_host_is_refused(loopback):
    """A Host with a control byte is refused with 400, logged as bad_header."""
    request = upgrade_bytes(loopback, f"/ws/{sid()}").replace(
        f"Host: {LOOP}:{loopback.port}".encode(), f"Host: {LOOP}:{loopback.port}\x01".encode())
    assert await raw_status(loopback, request) in (400, None)


@run_async
async def test_a_long_argument_no_longer_hides_the_key(keyed):
    """The controller key behind a 300-byte URL argument is read: each argument is read
    at its own length. lws's lookup used to stop at the long one, and the holder of
    the key joined as a viewer."""
    session = sid()
    first = await upgrade(keyed, f"/ws/{session}")
    assert first.status == 101
    snapshot = await first.recv_json()
    key = snapshot["key"]
    second = await upgrade(keyed, f"/ws/{session}?pad={'p' * 300}&key={key}")
    assert second.status == 101
    assert (await second.recv_json())["role"] == "controller"
    first.close()
    second.close()


@pytest.mark.parametrize("query", ["key=" + "k" * 3000, "key=a%00b", "key=%C3%A9", "key=a&key=b",
                                   "since=abc", "since=-1", "since=18446744073709551616", "since=1e3",
                                   "since=%00"],
                         ids=["key-3000B", "key-nul", "key-utf8", "key-twice", "since-word", "since-negative",
                              "since-2^64", "since-float", "since-nul"])
@run_async
async def test_unreadable_arguments_are_refused(keyed, query):
    """A key or since that is there but cannot be used as given (too long, a NUL, not
    ASCII, given twice, not a whole number in range) gets 400, not a join as if it
    were absent."""
    got = await status(keyed, f"/ws/{sid()}?{query}")
    if "%00" in query:
        # lws 4.1.6 hangs up on a decoded NUL in the query before our code runs.
        assert got in (400, None), got
        return
    assert got == 400
    line = wait_event(keyed, "upgrade_refused", cause="bad_header")
    assert line["status"] == 400 and line["level"] == "warn"


@run_async
async def test_good_arguments_still_upgrade(keyed):
    """Controls: a since that is a whole number, and unknown arguments, upgrade."""
    assert await status(keyed, f"/ws/{sid()}?since=0&x=1&y") == 101
    assert await status(keyed, f"/ws/{sid()}?since=18446744073709551615") == 101


# -- 2. the server's own name is its own origin -----------------------------------------
@run_async
async def test_own_name_is_own_origin_off_loopback(anywhere):
    """With --host 0.0.0.0, a page served as http://countdown.example.test:PORT may open
    a WebSocket with no flag; another port or another host is still foreign."""
    port = anywhere.port
    host = f"countdown.example.test:{port}"
    assert await status(anywhere, origin=f"http://{host}", host=host) == 101
    assert await status(anywhere, origin=f"http://countdown.example.test:{port + 1}", host=host) == 403
    assert await status(anywhere, origin=f"http://other.example.test:{port}", host=host) == 403
    assert await status(anywhere, origin="http://evil.example", host=host) == 403


@run_async
async def test_own_name_on_loopback_keeps_the_rebinding_rule(loopback):
    """On a loopback --host a domain name is never its own origin (DNS rebinding), while
    the IP address the page was served from is."""
    port = loopback.port
    host = f"rebind.example.test:{port}"
    assert await status(loopback, origin=f"http://{host}", host=host) == 403
    assert await status(loopback, origin=f"http://{LOOP}:{port}") == 101


@run_async
async def test_origin_refusal_is_a_rate_limited_warning():
    """A refused origin is logged at warn, naming --allow-origin, at most one line a
    second: the refusals held back meanwhile are counted in the next line."""
    srv = start_server("--log-format", "json")
    try:
        sent = 0
        started = time.monotonic()
        while True:
            assert await status(srv, origin="http://evil.example") == 403
            sent += 1
            lines = [l for l in log_lines(srv) if l["event"] == "upgrade_refused"]
            if len(lines) >= 2 or time.monotonic() - started > 10:
                break
        elapsed = time.monotonic() - started
        assert len(lines) == 2, lines
        assert all(l["level"] == "warn" and l["cause"] == "origin" for l in lines)
        assert lines[0]["origin"] == "http://evil.example" and "--allow-origin" in lines[0]["hint"]
        assert lines[0]["suppressed"] == 0
        assert 1 <= lines[1]["suppressed"] <= sent - 2, (lines, sent)
        assert elapsed >= 1.0
    finally:
        srv.stop_and_check()


# -- 3. a refused page can learn why ----------------------------------------------------
def post(port: int, path: str, headers: dict[str, str], body: bytes | None = None, method: str = "POST"):
    conn = http.client.HTTPConnection(LOOP, port, timeout=5)
    try:
        conn.request(method, path, body=body, headers=headers)
        resp = conn.getresponse()
        return resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read()
    finally:
        conn.close()


def test_origin_check_names_allow_origin(loopback):
    """POST /origin-check answers JSON: a foreign origin is not allowed, and the hint
    names --allow-origin with that origin; the server's own origin is allowed."""
    code, headers, body = post(loopback.port, "/origin-check",
                               {"Origin": "http://x.example:1", "Content-Length": "0"})
    assert code == 200 and headers["content-type"] == "application/json"
    assert json.loads(body) == {"allowed": False, "origin": "http://x.example:1",
                                "hint": "start the server with --allow-origin http://x.example:1"}
    code, _, body = post(loopback.port, "/origin-check", {"Origin": f"http://{LOOP}:{loopback.port}",
                                                     "Content-Length": "0"})
    assert code == 200 and json.loads(body) == {"allowed": True, "origin": f"http://{LOOP}:{loopback.port}"}


def test_origin_check_agrees_with_the_upgrade(anywhere):
    """The check gives the upgrade's answer: a name the server was reached under, off
    loopback, is allowed; an unreadable Origin is not."""
    host = f"countdown.example.test:{anywhere.port}"
    _, _, body = post(anywhere.port, "/origin-check", {"Host": host, "Origin": f"http://{host}", "Content-Length": "0"})
    assert json.loads(body)["allowed"] is True
    _, _, body = post(anywhere.port, "/origin-check", {"Host": host, "Origin": "http://" + "o" * 3000,
                                                  "Content-Length": "0"})
    assert json.loads(body) == {"allowed": False, "origin": None, "hint": "the Origin header could not be read"}


def test_origin_check_takes_no_body_and_posts_nowhere_else(loopback):
    """Only a POST without a body reaches the check; a POST anywhere else, or with a
    body, still gets 405. The answer carries the security headers, and the page's own
    CSP lets it fetch the check (connect-src 'self')."""
    assert post(loopback.port, "/origin-check", {"Origin": "http://x.example"}, body=b"abc")[0] == 405
    assert post(loopback.port, "/index.html", {"Content-Length": "0"})[0] == 405
    code, headers, body = post(loopback.port, "/origin-check", {"Content-Length": "0"})
    assert code == 200 and json.loads(body) == {"allowed": True, "origin": None}
    assert headers["x-content-type-options"] == "nosniff" and "content-security-policy" in headers
    code, headers, _ = post(loopback.port, "/", {}, method="GET")
    assert "connect-src 'self'" in headers["content-security-policy"]


# -- 4. behind a proxy ------------------------------------------------------------------
def forwarded(address: str) -> list[tuple[str, str]]:
    return [("X-Forwarded-For", address)]


@run_async
async def test_trusted_proxy_counts_each_forwarded_client():
    """With --trusted-proxy 127.0.0.0/8 each address in X-Forwarded-For has its own
    per-IP budget, and the refusal's log line names the forwarded address (with the
    proxy as `via`)."""
    srv = start_server("--trusted-proxy", "127.0.0.0/8", "--max-connections-per-ip", "2",
                       "--log-format", "json")
    try:
        held = [await upgrade(srv, headers=forwarded("198.51.100.7")) for _ in range(2)]
        assert [ws.status for ws in held] == [101, 101]
        assert await status(srv, headers=forwarded("198.51.100.7")) == 429
        line = wait_event(srv, "upgrade_refused", cause="per_ip")
        assert line["peer"] == "198.51.100.7" and line["via"] == "127.0.0.1", line
        other = [await upgrade(srv, headers=forwarded("203.0.113.9, 10.9.9.9")) for _ in range(2)]
        assert [ws.status for ws in other] == [101, 101]
        # Written another way, an address is the same address.
        assert await status(srv, headers=forwarded("2001:DB8:0::1")) == 101
        assert await status(srv, headers=forwarded("2001:db8::1")) == 101
        assert await status(srv, headers=forwarded("[2001:db8::1]:443")) == 101
        for ws in held + other:
            ws.close()
    finally:
        srv.stop_and_check()


@run_async
async def test_ipv6_clients_count_by_their_prefix():
    """Behind a trusted proxy (the one way a loopback test can show many client
    addresses): two addresses of one IPv6 /64 share one per-IP budget, another /64 has
    its own, an IPv4-mapped address counts as its IPv4 address, the log still names the
    whole address; with --ipv6-prefix 128 each IPv6 address counts alone."""
    srv = start_server("--trusted-proxy", "127.0.0.1", "--max-connections-per-ip", "1",
                       "--log-format", "json")
    try:
        held = [await upgrade(srv, headers=forwarded(a))
                for a in ("2001:db8:1:2::1", "2001:db8:1:3::1", "198.51.100.7")]
        assert [ws.status for ws in held] == [101, 101, 101]
        assert await status(srv, headers=forwarded("2001:db8:1:2:ffff:ffff:ffff:ffff")) == 429
        line = wait_event(srv, "upgrade_refused", cause="per_ip")
        assert line["peer"] == "2001:db8:1:2:ffff:ffff:ffff:ffff", line
        assert await status(srv, headers=forwarded("::ffff:198.51.100.7")) == 429
        assert await status(srv, headers=forwarded("2001:db8:1:4::1")) == 101
        for ws in held:
            ws.close()
    finally:
        srv.stop_and_check()
    srv = start_server("--trusted-proxy", "127.0.0.1", "--max-connections-per-ip", "1",
                       "--ipv6-prefix", "128")
    try:
        held = await upgrade(srv, headers=forwarded("2001:db8:1:2::1"))
        assert held.status == 101
        assert await status(srv, headers=forwarded("2001:db8:1:2::2")) == 101
        assert await status(srv, headers=forwarded("2001:db8:1:2::1")) == 429
        held.close()
    finally:
        srv.stop_and_check()


@run_async
async def test_without_the_flag_the_header_changes_nothing():
    """Without --trusted-proxy, X-Forwarded-For is ignored: every connection counts as
    its TCP peer, and the log shows that peer."""
    srv = start_server("--max-connections-per-ip", "2", "--log-format", "json")
    try:
        held = [await upgrade(srv, headers=forwarded(a)) for a in ("198.51.100.7", "198.51.100.8")]
        assert [ws.status for ws in held] == [101, 101]
        assert await status(srv, headers=forwarded("198.51.100.9")) == 429
        line = wait_event(srv, "upgrade_refused", cause="per_ip")
        assert line["peer"] == LOOP and "via" not in line, line
        for ws in held:
            ws.close()
    finally:
        srv.stop_and_check()


@run_async
async def test_untrusted_peer_and_malformed_header_count_as_the_peer():
    """A peer outside the trusted ranges is not believed (127.0.0.2 when only
    127.0.0.1 is trusted); a malformed header from a trusted peer counts as the peer,
    with a warning."""
    srv = start_server("--trusted-proxy", "127.0.0.1", "--max-connections-per-ip", "1",
                       "--log-format", "json")
    try:
        a = await upgrade(srv, headers=forwarded("198.51.100.7"), source="127.0.0.2")
        assert a.status == 101
        assert await status(srv, headers=forwarded("198.51.100.8"), source="127.0.0.2") == 429
        line = wait_event(srv, "upgrade_refused", cause="per_ip")
        assert line["peer"] == "127.0.0.2", line
        b = await upgrade(srv, headers=forwarded("not-an-address"))
        assert b.status == 101
        assert await status(srv, headers=forwarded("unknown, 1.2.3")) == 429
        wait_log(srv, lambda l: l["event"] == "forwarded_for_malformed" and l["peer"] == LOOP)
        assert await status(srv, headers=forwarded("198.51.100.9")) == 101
        a.close()
        b.close()
    finally:
        srv.stop_and_check()


@run_async
async def test_forwarded_for_of_4kb_and_many_hops():
    """A 4 KB X-Forwarded-For of trusted hops is walked whole, or, past the header
    cap, refused with 400; never a crash."""
    srv = start_server("--trusted-proxy", "127.0.0.0/8,10.0.0.0/8", "--log-format", "json")
    try:
        hops = ",".join(["10.0.0.1"] * 200)
        assert await status(srv, headers=forwarded("198.51.100.7," + hops)) == 101
        long = ",".join(["10.0.0.1"] * 400)
        assert await status(srv, headers=forwarded(long)) in (400, None)
        assert await status(srv) == 101
    finally:
        srv.stop_and_check()


def test_origin_check_is_not_on_the_metrics_port():
    """The --metrics-port listener serves only /metrics, /healthz and /readyz: the
    origin check there is a 404, while the main port answers it."""
    srv = start_server("--metrics-port", "0", "--log-format", "json")
    try:
        line = wait_event(srv, "listening")
        assert post(line["metrics_port"], "/origin-check", {"Origin": "http://x.example", "Content-Length": "0"})[0] == 404
        assert post(srv.port, "/origin-check", {"Origin": "http://x.example", "Content-Length": "0"})[0] == 200
    finally:
        srv.stop_and_check()


@pytest.mark.parametrize("value", ["null", "https://a.example/", "https://a.example/path", "https://a.example:65536",
                                   "https://good.example,,https://b.example", "",
                                   "https://" + "a" * 4096 + ".example"],
                         ids=["null", "slash", "path", "port", "empty-entry", "empty", "4kb"])
def test_a_bad_allow_origin_exits_2_naming_it(value):
    """--allow-origin is checked as --frame-ancestors is: `null` (what a sandboxed iframe on
    any site sends), a path, a trailing slash, a port past 65535, an empty entry or a 4 KB
    origin stops the server at start with exit 2 and a reason naming the flag."""
    res = subprocess.run([str(server_binary()), "--port", "0", "--allow-origin", value], capture_output=True,
                         text=True, timeout=10, stdin=subprocess.DEVNULL)
    assert res.returncode == 2, res
    assert "--allow-origin" in res.stderr and "listening on" not in res.stdout, res
