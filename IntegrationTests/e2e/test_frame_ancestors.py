"""End-to-end: --frame-ancestors (and COUNTDOWN_FRAME_ANCESTORS) on the headers of every
kind of answer. What lws writes for the main listener (the files, the endpoints, a 404,
the event stream) names the list in its CSP and carries no X-Frame-Options; what the
server writes itself (the API, refusals) and the metrics listener keep the deny; without
the flag everything is as before. The browser's side (an iframe shown or refused) is
IntegrationTests/browser/test_views.py."""

from __future__ import annotations

import http.client
import os
import subprocess
import uuid

import pytest

from cdclient import http_get
from opskit import wait_event
from serverproc import server_binary, start_server

LIST = "'self',https://obs.example.com,http://127.0.0.1:9"
POLICY = "frame-ancestors 'self' https://obs.example.com http://127.0.0.1:9;"
LWS_PATHS = ["/", "/index.html", "/app.js", "/chime.wav", "/healthz", "/readyz", "/nope-" + uuid.uuid4().hex]


def event_stream_headers(host: str, port: int) -> dict[str, str]:
    conn = http.client.HTTPConnection(host, port, timeout=5)
    try:
        conn.request("GET", f"/api/v1/sessions/fa{uuid.uuid4().hex[:8]}/events")
        resp = conn.getresponse()
        assert resp.status == 200
        return {k.lower(): v for k, v in resp.getheaders()}
    finally:
        conn.close()


def assert_framable(headers: dict[str, str], where: str) -> None:
    csp = headers.get("content-security-policy", "")
    assert POLICY in csp and "frame-ancestors 'none'" not in csp, f"{where}: {csp!r}"
    # The rest of lws's policy is kept: no inline code, nothing from elsewhere.
    assert "default-src 'none'" in csp and "script-src 'self'" in csp and "'unsafe-inline'" not in csp, csp
    assert "x-frame-options" not in headers, f"{where}: {headers}"
    assert headers.get("x-content-type-options") == "nosniff" and headers.get("referrer-policy") == "no-referrer"


def assert_denied(headers: dict[str, str], where: str) -> None:
    assert "frame-ancestors 'none'" in headers.get("content-security-policy", ""), f"{where}: {headers}"
    assert headers.get("x-frame-options", "").lower() == "deny", f"{where}: {headers}"


@pytest.mark.parametrize("how", ["flag", "variable"])
def test_frame_ancestors_names_the_sites_on_what_lws_writes(how):
    """With the list (by flag or variable), the page's files, the endpoints, a 404 and the
    event stream may be framed by those sites only; the API and the metrics listener keep
    the deny, and --print-config shows the list."""
    args, env = (["--frame-ancestors", LIST], None) if how == "flag" else ([], {"COUNTDOWN_FRAME_ANCESTORS": LIST})
    srv = start_server(*args, "--metrics-port", "0", env=env)
    try:
        for path in LWS_PATHS:
            assert_framable(http_get(srv.host, srv.port, path)[1], path)
        assert_framable(event_stream_headers(srv.host, srv.port), "the event stream")
        assert_denied(http_get(srv.host, srv.port, "/api/v1/sessions/fa1")[1], "the API")
        metrics_port = wait_event(srv, "listening")["metrics_port"]
        assert_denied(http_get("127.0.0.1", metrics_port, "/metrics")[1], "the metrics listener")
    finally:
        srv.stop_and_check()
    shown = subprocess.run([str(server_binary()), *args, "--print-config"], capture_output=True, text=True,
                           env={**os.environ, **(env or {})}, timeout=10)
    line = next(x for x in shown.stdout.splitlines() if x.startswith("--frame-ancestors"))
    assert line.split()[1] == LIST and line.split()[2] == ("flag" if how == "flag" else "COUNTDOWN_FRAME_ANCESTORS")


@pytest.mark.parametrize("value", ["https://a.example;script-src *", "https://a.example\x01", "'none'", ""])
def test_a_bad_variable_exits_2_naming_it(value):
    """A bad COUNTDOWN_FRAME_ANCESTORS stops the server at start with exit 2, and the
    message names the variable, with a control character shown escaped."""
    res = subprocess.run([str(server_binary()), "--port", "0"], capture_output=True, text=True, timeout=10,
                         env={**os.environ, "COUNTDOWN_FRAME_ANCESTORS": value}, stdin=subprocess.DEVNULL)
    assert res.returncode == 2, res
    assert "COUNTDOWN_FRAME_ANCESTORS" in res.stderr and "listening on" not in res.stdout
    assert "\x01" not in res.stderr


def test_without_the_flag_nothing_may_frame_the_page():
    """The default is today's: every answer denies framing."""
    srv = start_server()
    try:
        for path in LWS_PATHS:
            assert_denied(http_get(srv.host, srv.port, path)[1], path)
        assert_denied(event_stream_headers(srv.host, srv.port), "the event stream")
    finally:
        srv.stop_and_check()
