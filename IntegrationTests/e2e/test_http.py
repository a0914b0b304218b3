"""End-to-end tests of the HTTP side: the page and static files with the right
Content-Type, /healthz, 404 for unknown paths, and no way out of the public directory."""

from __future__ import annotations

import json
import uuid

import pytest

from serverproc import PUBLIC_DIR, start_server
from cdclient import http_get, raw_http

JS_TYPES = {"text/javascript", "application/javascript"}
ICO_TYPES = {"image/x-icon", "image/vnd.microsoft.icon"}
SECRET = "secret-" + uuid.uuid4().hex


def media_type(headers: dict) -> str:
    return headers.get("content-type", "").split(";")[0].strip().lower()


@pytest.fixture(scope="module")
def tmp_site(tmp_path_factory):
    """A server whose --public is a temporary directory holding one file of each type,
    with a secret file right next to (outside) the public directory."""
    root = tmp_path_factory.mktemp("site")
    public = root / "public"
    (public / "sub").mkdir(parents=True)
    files = {
        "index.html": b"<!doctype html><title>tmp</title>",
        "a.js": b"export const a = 1;\n",
        "a.css": b"body { color: red; }\n",
        "a.svg": b'<svg xmlns="http://www.w3.org/2000/svg"/>',
        "a.ico": bytes([0, 0, 1, 0, 1, 0, 1, 1, 0, 0]),
        "sub/b.css": b"p { margin: 0; }\n",
    }
    for name, data in files.items():
        (public / name).write_bytes(data)
    (root / "secret.txt").write_text(SECRET)
    srv = start_server(public=public)
    srv.files = files
    yield srv
    srv.stop_and_check()


# -- the bundled page -----------------------------------------------------------------------
@pytest.mark.parametrize(
    "path,file,types",
    [
        ("/", "index.html", {"text/html"}),
        ("/index.html", "index.html", {"text/html"}),
        ("/?session=team-a", "index.html", {"text/html"}),
        ("/app.js", "app.js", JS_TYPES),
        ("/app.css", "app.css", {"text/css"}),
        ("/favicon.svg", "favicon.svg", {"image/svg+xml"}),
    ],
)
def test_page_files_are_served_with_their_types(server, path, file, types):
    """The page's files come back 200 with the right Content-Type and the file's exact bytes
    (/ and /?session=... give index.html)."""
    local = PUBLIC_DIR / file
    assert local.is_file(), f"Public/{file} is missing from the repo"
    status, headers, body = http_get(server.host, server.port, path)
    assert status == 200, (path, status)
    assert media_type(headers) in types, (path, headers.get("content-type"))
    assert body == local.read_bytes(), f"{path}: body differs from Public/{file}"


def test_healthz(server):
    """/healthz answers 200, application/json, {"status":"ok"}."""
    status, headers, body = http_get(server.host, server.port, "/healthz")
    assert status == 200
    assert media_type(headers) == "application/json", headers.get("content-type")
    assert json.loads(body) == {"status": "ok"}


@pytest.mark.parametrize("path", ["/nope-" + uuid.uuid4().hex, "/nope/deeper.js", "/index.htm", "/app.js.map"])
def test_unknown_path_is_404(server, path):
    """A path with no matching file in Public/ gets 404."""
    status, _, _ = http_get(server.host, server.port, path)
    assert status == 404, (path, status)


# -- types, independent of the page ----------------------------------------------------------
@pytest.mark.parametrize(
    "path,types",
    [
        ("/", {"text/html"}),
        ("/a.js", JS_TYPES),
        ("/a.css", {"text/css"}),
        ("/a.svg", {"image/svg+xml"}),
        ("/a.ico", ICO_TYPES),
        ("/sub/b.css", {"text/css"}),
    ],
)
def test_static_types_from_any_public_dir(tmp_site, path, types):
    """--public DIR is honoured: each file type (.html .js .css .svg .ico, also in a
    subdirectory) is served with its Content-Type and exact bytes."""
    status, headers, body = http_get(tmp_site.host, tmp_site.port, path)
    assert status == 200, (path, status)
    assert media_type(headers) in types, (path, headers.get("content-type"))
    name = "index.html" if path == "/" else path.lstrip("/")
    assert body == tmp_site.files[name]


# -- traversal ---------------------------------------------------------------------------------
PASSWD_TARGETS = [
    "/../etc/passwd",
    "/../../../../../../etc/passwd",
    "/%2e%2e/%2e%2e/etc/passwd",
    "/%2E%2E/%2E%2E/%2E%2E/%2E%2E/etc/passwd",
    "/..%2fetc/passwd",
    "/..%2f..%2f..%2f..%2f..%2fetc%2fpasswd",
    "/%2e%2e%2f%2e%2e%2f%2e%2e%2f%2e%2e%2fetc%2fpasswd",
    "/./../../../../etc/passwd",
    "/app.css/../../../../etc/passwd",
    "/..\\..\\..\\..\\etc\\passwd",
    "/%252e%252e/%252e%252e/etc/passwd",
    "//etc/passwd",
    "/%2fetc%2fpasswd",
]


@pytest.mark.parametrize("target", PASSWD_TARGETS)
def test_traversal_never_reaches_etc_passwd(server, target):
    """A request line crafted to climb out of Public/ (sent raw, so no client normalises
    it) gets a 4xx and never the contents of /etc/passwd."""
    status, raw = raw_http(server.host, server.port, target)
    assert b"root:" not in raw, f"{target} leaked /etc/passwd"
    assert status is not None and 400 <= status < 500, f"{target}: status {status}, response {raw[:200]!r}"


SECRET_TARGETS = [
    "/../secret.txt",
    "/%2e%2e/secret.txt",
    "/..%2fsecret.txt",
    "/%2e%2e%2fsecret.txt",
    "/sub/../../secret.txt",
    "/sub/%2e%2e/%2e%2e/secret.txt",
    "/sub/..%2f..%2fsecret.txt",
]


@pytest.mark.parametrize("target", SECRET_TARGETS)
def test_traversal_never_reaches_the_parent_of_public(tmp_site, target):
    """The file right next to the public directory can never be fetched via .. in any
    spelling: the answer is a 4xx without its contents."""
    status, raw = raw_http(tmp_site.host, tmp_site.port, target)
    assert SECRET.encode() not in raw, f"{target} leaked a file outside --public"
    assert status is not None and 400 <= status < 500, f"{target}: status {status}, response {raw[:200]!r}"
