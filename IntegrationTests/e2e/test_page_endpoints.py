"""End-to-end tests of what the server adds for the page's Share panel and for a
missing path: GET /qr.svg (a QR code drawn by libqrencode), POST /qr.svg (a code of
a link holding a key, which stays out of URLs), their rate limit per address, and the
404 page.

The QR code is checked by decoding it with zbarimg (Debian's zbar-tools), a reader
nobody here wrote, after Chromium-free rasterising: the SVG is one path of unit
squares, so the test rasterises it itself into a PGM that zbarimg reads.
"""

from __future__ import annotations

import http.client
import re
import shutil
import subprocess
import urllib.parse
import uuid

import pytest

from cdclient import http_get, raw_http
from serverproc import start_server

QR_MAX = 512  # QRCode.maxTextBytes: the longest text the endpoint encodes


def qr_get(server, text: str | None):
    path = "/qr.svg" if text is None else "/qr.svg?text=" + urllib.parse.quote(text, safe="")
    return http_get(server.host, server.port, path)


def decode_svg(svg: bytes, tmp_path) -> str:
    """Rasterises the endpoint's SVG (a viewBox and one path of "Mx yhNv1h-Nz" runs)
    at 8 px a module into a PGM and returns what zbarimg reads in it."""
    if not shutil.which("zbarimg"):
        pytest.fail("zbarimg is missing: run scripts/setup-browser (apt: zbar-tools)", pytrace=False)
    text = svg.decode()
    side = int(re.search(r'viewBox="0 0 (\d+) \1"', text).group(1))
    dark = set()
    for x, y, n in re.findall(r"M(\d+) (\d+)h(\d+)v1h-\3z", text):
        for i in range(int(n)):
            dark.add((int(x) + i, int(y)))
    assert dark, "the SVG holds no modules"
    scale = 8
    rows = []
    for py in range(side * scale):
        y = py // scale
        rows.append(bytes(0 if (px // scale, y) in dark else 255 for px in range(side * scale)))
    pgm = tmp_path / f"qr-{uuid.uuid4().hex[:8]}.pgm"
    pgm.write_bytes(f"P5 {side * scale} {side * scale} 255\n".encode() + b"".join(rows))
    # -Sbinary: the bytes as encoded; without it zbar guesses a text encoding
    # for 8-bit data and may read UTF-8 as Shift JIS.
    out = subprocess.run(["zbarimg", "--quiet", "--raw", "-Sbinary", str(pgm)], capture_output=True, timeout=30)
    assert out.returncode == 0, f"zbarimg found no code: {out.stderr.decode()}"
    return out.stdout.decode("utf-8")


@pytest.mark.parametrize("text", [
    "http://127.0.0.1:8080/?session=team-a",
    "http://countdown.example.test/?session=x#key=" + "a" * 32,
    "a&b=c+d %25 ? # 倒計時",  # what a URL argument could mangle: & + % and UTF-8
    "x" * QR_MAX,  # the longest text taken
])
def test_qr_svg_encodes_the_text(server, text, tmp_path):
    """/qr.svg?text=T answers 200 image/svg+xml, cacheable, under the page's CSP, and
    the code it draws decodes (zbarimg) to exactly T, up to the 512-byte cap."""
    status, headers, body = qr_get(server, text)
    assert status == 200, (status, body[:200])
    assert headers["content-type"] == "image/svg+xml"
    assert "max-age=" in headers.get("cache-control", ""), headers
    assert "default-src 'none'" in headers.get("content-security-policy", ""), headers
    assert headers.get("x-content-type-options") == "nosniff"
    assert body.startswith(b"<svg ") and b"<script" not in body
    assert decode_svg(body, tmp_path) == text


@pytest.mark.parametrize("text,why", [
    (None, "no text"),
    ("", "empty"),
    ("x" * (QR_MAX + 1), "one byte over the cap"),
    ("é" * (QR_MAX // 2 + 1), "over the cap in UTF-8 bytes, under it in characters"),
    ("x" * 3000, "far over the cap"),
])
def test_qr_svg_refuses_what_it_cannot_take(server, text, why):
    """No text, an empty one, or more than 512 bytes of UTF-8 is a 400 in words, under
    the same security headers, and never a code."""
    status, headers, body = qr_get(server, text)
    assert status == 400, (why, status)
    assert b"512" in body and b"<svg" not in body, (why, body[:100])
    assert "default-src 'none'" in headers.get("content-security-policy", ""), headers


@pytest.mark.parametrize("target", ["/qr.svg?text=a%00b", "/qr.svg?text=%00", "/qr.svg?text=" + "a" * 4096,
                                    "/qr.svg?text=" + "%41" * 2000])
def test_qr_svg_nul_and_4kb_are_refused(server, target):
    """A NUL in the text (%00), or a request line past lws's 4 KiB of headers, never
    reaches the encoder: lws drops the request (or a 400), and the server goes on
    serving."""
    status, raw = raw_http(server.host, server.port, target)
    assert status in (None, 400, 431), (status, raw[:200])
    assert qr_get(server, "still here")[0] == 200


def send(conn: http.client.HTTPConnection, method: str, path: str, body: bytes | None = None,
         headers: dict[str, str] | None = None):
    """One request on `conn` (kept alive): (status, lowercased headers, body)."""
    conn.request(method, path, body=body, headers=headers or {})
    resp = conn.getresponse()
    return resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read()


@pytest.fixture(scope="module")
def post_server():
    """A server of its own for the POSTs, so their draws leave the GET tests' budget alone."""
    srv = start_server()
    yield srv
    srv.stop_and_check()


def qr_post(server, body: bytes | None, headers: dict[str, str] | None = None):
    conn = http.client.HTTPConnection(server.host, server.port, timeout=5)
    try:
        return send(conn, "POST", "/qr.svg", body, {"Content-Type": "text/plain; charset=utf-8", **(headers or {})})
    finally:
        conn.close()


@pytest.mark.parametrize("text", [
    "http://countdown.example.test/?session=x#key=" + "a" * 32,
    "a&b=c+d %25 ? # 倒計時",
    "x" * QR_MAX,
])
def test_qr_post_draws_the_body_and_is_never_stored(post_server, text, tmp_path):
    """POST /qr.svg with the text as its body (how the page asks for the controller link's
    code, so that the key is in no URL) answers the code of exactly that text, marked
    `cache-control: no-store` so that no cache keeps it."""
    status, headers, body = qr_post(post_server, text.encode())
    assert status == 200, (status, body[:200])
    assert headers["content-type"] == "image/svg+xml"
    assert headers.get("cache-control") == "no-store", headers
    assert "default-src 'none'" in headers.get("content-security-policy", ""), headers
    assert body.startswith(b"<svg ") and decode_svg(body, tmp_path) == text


@pytest.mark.parametrize("body,headers,want", [
    (b"", {}, 400),
    (b"x" * (QR_MAX + 1), {}, 400),
    (b"x" * 4096, {}, 400),
    (b"x", {"Content-Length": str(2**64)}, 400),
    (b"x", {"Content-Length": "1e3"}, 400),
    (b"x", {"Content-Length": "-1"}, 400),
    (None, {"Transfer-Encoding": "chunked"}, 411),
], ids=["empty", "513", "4kb", "2^64", "1e3", "negative", "no-length"])
def test_qr_post_refuses_what_it_cannot_take(post_server, body, headers, want):
    """An empty body, one past 512 bytes, a length of 2^64 or not a number, or none
    (chunked) is refused before anything is drawn, and the server goes on serving."""
    status, answer_headers, answer = qr_post(post_server, body, headers)
    assert status == want, (status, answer[:200])
    assert b"<svg" not in answer and answer_headers.get("cache-control") == "no-store"
    assert http_get(post_server.host, post_server.port, "/healthz")[0] == 200


def test_fresh_qr_codes_are_rate_limited_per_address():
    """One address drawing fresh codes as fast as it can is refused with 429 and
    Retry-After once past its budget, while another address (127.0.0.2) still gets its
    codes, and codes already drawn (the server keeps the last ones) stay free."""
    srv = start_server()
    first = http.client.HTTPConnection(srv.host, srv.port, timeout=5)
    other = http.client.HTTPConnection(srv.host, srv.port, timeout=5, source_address=("127.0.0.2", 0))
    try:
        kept = "/qr.svg?text=kept-" + uuid.uuid4().hex
        assert send(first, "GET", kept)[0] == 200
        for i in range(1000):
            status, headers, body = send(first, "GET", f"/qr.svg?text=fresh-{i}")
            if status == 429:
                break
            assert status == 200, (status, body[:200])
        assert status == 429, "1000 fresh codes drawn from one address without a refusal"
        assert headers.get("retry-after") == "1" and headers.get("cache-control") == "no-store", headers
        assert b"<svg" not in body
        assert send(other, "GET", "/qr.svg?text=other-" + uuid.uuid4().hex)[0] == 200
        assert send(other, "POST", "/qr.svg", b"other-post")[0] == 200
        assert send(first, "GET", kept)[0] == 200
    finally:
        first.close()
        other.close()
        srv.stop_and_check()


@pytest.mark.parametrize("path", ["/nope-" + uuid.uuid4().hex, "/a/b/c.html", "/qr.svg/x", "/healthz/x"])
def test_missing_page_is_the_pages_own_404(server, path):
    """A path that is neither a file nor an endpoint gets status 404 with the page's own
    "not found" page: HTML in both languages, the page's stylesheet by an absolute path
    (it is served at any depth), no script, under the same CSP as every answer."""
    status, headers, body = http_get(server.host, server.port, path)
    assert status == 404, (path, status)
    assert headers["content-type"].startswith("text/html"), headers
    assert "default-src 'none'" in headers.get("content-security-policy", ""), headers
    page = body.decode()
    assert 'lang="en"' in page and 'lang="zh-Hant"' in page
    assert "This page does not exist." in page and "找不到這個頁面。" in page
    assert 'href="/app.css"' in page and "<script" not in page
