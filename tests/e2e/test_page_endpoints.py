"""End-to-end tests of what the server adds for the page's Share panel and for a
missing path: GET /qr.svg (a QR code drawn by libqrencode) and the 404 page.

The QR code is checked by decoding it with zbarimg (Debian's zbar-tools), a reader
nobody here wrote, after Chromium-free rasterising: the SVG is one path of unit
squares, so the test rasterises it itself into a PGM that zbarimg reads.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import urllib.parse
import uuid

import pytest

from cdclient import http_get, raw_http

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
