"""HTTP framing by the book, on every port and path (issue 27): one request per
connection, every answer an HTTP/1.1 status line with a Content-Length equal to
the bytes sent and `connection: close`, and the connection then closed;
pipelined requests refused by that close; unknown methods, bad request lines
and ambiguous framing answered by the server, never by lws's own page.

Each case is sent as raw bytes on its own socket, as an attacker would."""

from __future__ import annotations

import json
import pytest

from serverproc import start_server
from opskit import wait_event
from rawhttp import exchange

def responses(raw: bytes) -> list[tuple[str, dict[str, list[str]], bytes]]:
    """Split a byte stream into (status line, headers, body) by Content-Length."""
    found = []
    rest = raw
    while rest:
        head, sep, tail = rest.partition(b"\r\n\r\n")
        assert sep, f"an answer without the end of its headers: {rest[:200]!r}"
        lines = head.decode("latin-1").split("\r\n")
        headers: dict[str, list[str]] = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            headers.setdefault(name.strip().lower(), []).append(value.strip())
        lengths = headers.get("content-length", [])
        assert len(lengths) == 1, f"not one Content-Length: {lines}"
        length = int(lengths[0])
        found.append((lines[0], headers, tail[:length]))
        rest = tail[length:]
    return found


def one_answer(raw: bytes, closed: bool, head: bool = False):
    """The one answer of a connection, checked against the framing rules."""
    assert closed, f"the server kept the connection open after {raw[:300]!r}"
    answers = responses(raw) if not head else [_head_only(raw)]
    assert len(answers) == 1, f"{len(answers)} answers on one connection: {[a[0] for a in answers]}"
    status, headers, body = answers[0]
    assert status.startswith("HTTP/1.1 "), status
    assert headers.get("connection") == ["close"], f"{status}: connection {headers.get('connection')}"
    if not head:
        assert len(body) == int(headers["content-length"][0]), status
    return int(status.split()[1]), headers, body


def _head_only(raw: bytes):
    head, sep, tail = raw.partition(b"\r\n\r\n")
    assert sep and tail == b"", f"a HEAD answer with a body: {tail[:100]!r}"
    lines = head.decode("latin-1").split("\r\n")
    headers: dict[str, list[str]] = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers.setdefault(name.strip().lower(), []).append(value.strip())
    return lines[0], headers, b""


def get(path: str, method: str = "GET", extra: str = "") -> bytes:
    return f"{method} {path} HTTP/1.1\r\nHost: x\r\n{extra}\r\n".encode()


def post(path: str, body: str, extra: str = "") -> bytes:
    return (f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body.encode())}\r\n{extra}\r\n{body}").encode()


CANCEL = '{"op":"cancel"}'


@pytest.fixture(scope="module")
def srv():
    server = start_server("--metrics-port", "0")
    server.metrics_port = wait_event(server, "listening")["metrics_port"]
    yield server
    # A server the attack froze ignores SIGTERM: this fails then.
    server.stop_and_check()


def assert_serving(srv) -> None:
    """A new connection still gets /healthz: the service thread is not stuck."""
    raw, closed = exchange(srv.port, get("/healthz"))
    status, _, body = one_answer(raw, closed)
    assert status == 200 and json.loads(body) == {"status": "ok"}


PIPELINES = {
    "get-then-post": get("/api/v1/sessions/a") + post("/api/v1/sessions/b/commands", CANCEL),
    "post-then-post": post("/api/v1/sessions/b/commands", CANCEL) * 2,
    "healthz-then-post": get("/healthz") + post("/api/v1/sessions/b/commands", CANCEL),
    "bad-json-then-post": post("/api/v1/sessions/b/commands", "{oops")
    + post("/api/v1/sessions/b/commands", CANCEL),
    "file-then-file": get("/") + get("/app.js"),
    "file-then-post": get("/") + post("/api/v1/sessions/b/commands", CANCEL),
    "get-then-get": get("/api/v1/sessions/a") + get("/api/v1/sessions/b"),
    "chunked-with-short-length": (
        b"POST /api/v1/sessions/b/commands HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b"Transfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\nf\r\n" + CANCEL.encode() + b"\r\n0\r\n\r\n"
        + get("/healthz")),
}


@pytest.mark.parametrize("data", PIPELINES.values(), ids=PIPELINES.keys())
def test_a_pipelined_request_is_refused_by_closing_and_stalls_nothing(srv, data):
    """The first request is answered and the connection closed; the rest is never answered, and the server serves on."""
    raw, closed = exchange(srv.port, data)
    one_answer(raw, closed)
    assert_serving(srv)


def test_a_pipelined_body_sent_later_stalls_nothing(srv):
    """A second request whose body comes after the first answer is dropped with the connection."""
    head = get("/api/v1/sessions/a") + post("/api/v1/sessions/b/commands", CANCEL)[: -len(CANCEL)]
    raw, closed = exchange(srv.port, head, later=CANCEL.encode())
    one_answer(raw, closed)
    assert_serving(srv)


def test_viewers_keep_their_ticks_through_a_pipelining_flood(srv, session_id):
    """While 50 connections pipeline a GET and a POST, a running session's viewer still ticks."""
    import asyncio
    from cdclient import Client

    async def run():
        viewer = await Client.connect(srv.ws_url(session_id), name="viewer")
        await viewer.send({"op": "start", "seconds": 3})
        await viewer.wait_state(lambda s: s.get("phase") == "running")
        data = PIPELINES["get-then-post"]
        for _ in range(50):
            raw, closed = await asyncio.to_thread(exchange, srv.port, data)
            one_answer(raw, closed)
        await viewer.wait_state(lambda s: s.get("phase") == "finished", timeout=10)
        await viewer.close()

    asyncio.run(run())


FRAMED = {
    "page": (get("/"), 200),
    "file": (get("/app.js"), 200),
    "head-file": (get("/", "HEAD"), 200),
    "healthz": (get("/healthz"), 200),
    "readyz": (get("/readyz"), 200),
    "qr": (get("/qr.svg?text=hello"), 200),
    "404-page": (get("/no-such-file"), 404),
    "openapi": (get("/api/v1/openapi.json"), 200),
    "read": (get("/api/v1/sessions/framing"), 200),
    "head-read": (get("/api/v1/sessions/framing", "HEAD"), 200),
    "command": (post("/api/v1/sessions/framing/commands", CANCEL), 409),
    "preflight": (get("/api/v1/sessions/framing/commands", "OPTIONS",
                      "Origin: http://elsewhere\r\nAccess-Control-Request-Method: POST\r\n"), 204),
    "api-404": (get("/api/v1/nothing"), 404),
    "post-file": (post("/index.html", "{}"), 405),
    "websocket-refused": (get("/?session=a%20b", extra="Upgrade: websocket\r\nConnection: Upgrade\r\n"
                              "Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"), None),
}


@pytest.mark.parametrize("data,status", FRAMED.values(), ids=FRAMED.keys())
def test_every_answer_is_framed_and_closes(srv, data, status):
    """HTTP/1.1 status line, Content-Length equal to the body, connection: close, then closed."""
    raw, closed = exchange(srv.port, data)
    got, _, _ = one_answer(raw, closed, head=data.startswith(b"HEAD"))
    if status is not None:
        assert got == status


@pytest.mark.parametrize("path", ["/metrics", "/healthz", "/readyz", "/api/v1/sessions/a", "/nothing"])
def test_the_metrics_port_frames_the_same_way(srv, path):
    """The metrics listener answers by the same rules."""
    raw, closed = exchange(srv.metrics_port, get(path))
    one_answer(raw, closed)


@pytest.mark.parametrize("method", ["TRACE", "QUERY", "FOO", "CONNECT", "M" * 40])
@pytest.mark.parametrize("path,allow", [("/api/v1/sessions/a", "GET, HEAD, OPTIONS"),
                                        ("/api/v1/sessions/a/commands", "POST, OPTIONS"),
                                        ("/api/v1/sessions?limit=0", "GET, HEAD, OPTIONS"),
                                        ("/", "GET, HEAD")])
def test_unknown_methods_get_405_from_the_server(srv, method, path, allow):
    """A method lws does not know gets the server's 405 with the resource's Allow (JSON under
    the API), never lws's 403 page; past 32 characters it is no method, and gets 400."""
    raw, closed = exchange(srv.port, get(path, method))
    status, headers, body = one_answer(raw, closed)
    if len(method) > 32:
        assert status == 400
        return
    assert status == 405 and headers["allow"] == [allow]
    if path.startswith("/api/"):
        assert headers["content-type"] == ["application/json"]
        assert json.loads(body)["type"] == "error"
    else:
        assert headers["content-type"] == ["text/plain"]


def test_an_unknown_method_on_a_path_the_api_lacks_is_404(srv):
    """The API names no resource there, so no Allow either."""
    raw, closed = exchange(srv.port, get("/api/v1/nothing", "TRACE"))
    status, headers, body = one_answer(raw, closed)
    assert status == 404 and json.loads(body)["type"] == "error"


@pytest.mark.parametrize("path", ["/api/v1/sessions/M%0DN", "/api/v1/sessions/M%0AN", "/index.html%0Dx",
                                  "/healthz%0D%0AX-Injected:%201"])
def test_a_cr_or_lf_in_the_target_is_400(srv, path):
    """lws ends the request line at a decoded CR or LF: the request is refused, not read as a shorter path."""
    raw, closed = exchange(srv.port, get(path))
    status, _, _ = one_answer(raw, closed)
    assert status == 400


@pytest.mark.parametrize("query", ["since=x", "since=-1", "since=1e400", "since=18446744073709551616",
                                   "since=1&since=2"])
def test_an_unreadable_since_on_an_event_stream_is_the_apis_json(srv, query):
    """An event stream refused for its URL arguments answers the API's JSON 400."""
    raw, closed = exchange(srv.port, get(f"/api/v1/sessions/framing/events?{query}"))
    status, headers, body = one_answer(raw, closed)
    assert status == 400 and headers["content-type"] == ["application/json"]
    assert json.loads(body)["type"] == "error"


@pytest.mark.parametrize("line", [b"GARBAGE\r\n\r\n", b"\x00\x01\x02\r\n\r\n", b" / HTTP/1.1\r\n\r\n",
                                  b"\xff\xfe GET / HTTP/1.1\r\n\r\n"])
def test_a_line_that_is_not_a_request_gets_400(srv, line):
    """Bytes that are no request line get the server's 400 and a close."""
    raw, closed = exchange(srv.port, line)
    status, _, _ = one_answer(raw, closed)
    assert status == 400


@pytest.mark.parametrize("method,path,allow", [
    ("PUT", "/api/v1/sessions/a", "GET, HEAD, OPTIONS"),
    ("DELETE", "/api/v1/sessions/a", "GET, HEAD, OPTIONS"),
    ("PATCH", "/api/v1/sessions/a/commands", "POST, OPTIONS"),
    ("DELETE", "/api/v1/sessions", "GET, HEAD, OPTIONS"),
    ("POST", "/api/v1/openapi.json", "GET, HEAD, OPTIONS"),
    ("HEAD", "/api/v1/sessions/a/events", "GET, OPTIONS"),
])
def test_known_methods_the_resource_does_not_take_get_405_with_its_allow(srv, method, path, allow):
    """405 names every method the resource answers, in the API's JSON."""
    raw, closed = exchange(srv.port, get(path, method, "Content-Length: 0\r\n"))
    status, headers, body = one_answer(raw, closed, head=method == "HEAD")
    assert status == 405 and headers["allow"] == [allow]
    assert headers["content-type"] == ["application/json"]
    if method != "HEAD":
        assert json.loads(body)["type"] == "error"


@pytest.mark.parametrize("method", ["GET", "OPTIONS", "POST", "HEAD"])
@pytest.mark.parametrize("path", ["/api/v1/sessions/%C3%A5J", "/api/v1/sessions/%C2%84/commands",
                                  "/api/v1/sessions/%00", "/api/v1/sessions/" + "a" * 1024,
                                  "/api/v1/sessions/%E2%80%AE/events"])
def test_refused_ids_under_the_api_get_the_apis_json_404(srv, method, path):
    """A session id the API refuses is a JSON 404 for every method, not the page's HTML."""
    extra = "Content-Length: 0\r\n" if method == "POST" else ""
    raw, closed = exchange(srv.port, get(path, method, extra))
    status, headers, body = one_answer(raw, closed, head=method == "HEAD")
    assert status in (404, 400), status
    assert headers["content-type"] == ["application/json"]
    if method != "HEAD":
        assert json.loads(body)["type"] == "error"


@pytest.mark.parametrize("path", ["/api/v1/sessions/te/commands", "/", "/healthz"])
def test_transfer_encoding_beside_content_length_is_400_and_closed(srv, path):
    """RFC 9112 6.3: a request framed two ways is refused, not framed by its length."""
    data = (f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            f"Transfer-Encoding: chunked\r\nContent-Length: {len(CANCEL)}\r\n\r\n{CANCEL}").encode()
    raw, closed = exchange(srv.port, data)
    status, _, _ = one_answer(raw, closed)
    assert status == 400


def h11_events(data: bytes, raw: bytes) -> list:
    """Parse the server's bytes with h11, a strict HTTP/1.1 implementation nobody
    here wrote, as the client of the request `data` spells out."""
    import h11

    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    method, target, _ = lines[0].split(" ", 2)
    headers = [tuple(part.strip() for part in line.split(":", 1)) for line in lines[1:]]
    conn = h11.Connection(h11.CLIENT)
    conn.send(h11.Request(method=method, target=target, headers=headers))
    if body:
        conn.send(h11.Data(data=body))
    conn.send(h11.EndOfMessage())
    conn.receive_data(raw)
    conn.receive_data(b"")
    events = []
    while True:
        event = conn.next_event()
        events.append(event)
        if event is h11.NEED_DATA or isinstance(event, h11.ConnectionClosed):
            break
    assert conn.their_state is h11.CLOSED, conn.their_state
    return events


@pytest.mark.parametrize("data,status", [v for k, v in FRAMED.items() if k != "websocket-refused"],
                         ids=[k for k in FRAMED if k != "websocket-refused"])
def test_h11_reads_every_answer_whole_and_then_the_close(srv, data, status):
    """h11 finds one whole response, then the server's close, with nothing after it."""
    import h11

    raw, closed = exchange(srv.port, data)
    assert closed
    events = h11_events(data, raw)
    kinds = [type(e) for e in events]
    assert kinds[0] is h11.Response and events[0].status_code == status
    assert kinds[-2:] == [h11.EndOfMessage, h11.ConnectionClosed], kinds
    assert events[0].http_version == b"1.1"


def test_an_event_stream_is_delimited_by_its_close(srv):
    """An event stream has no length and says connection: close once: its body ends when the connection does."""
    import socket as _socket

    with _socket.create_connection((srv.host, srv.port), timeout=5) as s:
        s.sendall(get("/api/v1/sessions/framing-sse/events"))
        raw = b""
        while b"\r\n\r\n" not in raw:
            chunk = s.recv(4096)
            assert chunk, "closed before the stream's headers"
            raw += chunk
    head = raw.split(b"\r\n\r\n")[0].decode("latin-1").lower().split("\r\n")
    assert head[0] == "http/1.1 200 ok"
    assert [line for line in head if line.startswith("connection:")] == ["connection: close"]
    assert not [line for line in head if line.startswith(("content-length:", "transfer-encoding:"))]
