"""Test-side helper for the HTTP API (`/api/v1`): every request goes through
http.client, and every response is validated against Public/openapi.json with
openapi-core before the test sees it, so a test of any endpoint is also a test
that the document tells the truth. Shared by the API, SSE, idempotency and
benchmark tests.
"""

from __future__ import annotations

import functools
import http.client
import json
import urllib.parse
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from openapi_core import OpenAPI
from openapi_core.testing import MockRequest, MockResponse

from cdclient import strict_loads
from serverproc import PUBLIC_DIR

OPENAPI_PATH = PUBLIC_DIR / "openapi.json"


@functools.cache
def openapi(path: Path = OPENAPI_PATH) -> OpenAPI:
    return OpenAPI.from_file_path(str(path))


@dataclass
class Response:
    status: int
    headers: dict[str, str]
    body: bytes
    #: The body parsed strictly (no duplicate keys, no NaN), when it is JSON.
    json: Any = field(default=None)

    def header(self, name: str) -> str | None:
        return self.headers.get(name.lower())


def validate(method: str, url_path: str, response: Response, request_headers: dict[str, str] | None = None,
             body: bytes | None = None) -> None:
    """Fails unless the document describes this response (status, headers, body schema)."""
    path, _, query = url_path.partition("?")
    args = dict(urllib.parse.parse_qsl(query, keep_blank_values=True))
    headers = {k.lower(): v for k, v in (request_headers or {}).items()}
    request = MockRequest("http://localhost", method.lower(), path, args=args, headers=headers, data=body,
                          content_type=headers.get("content-type", "application/json"))
    content_type = (response.header("content-type") or "application/json").split(";")[0]
    mock = MockResponse(response.body, status_code=response.status, headers=response.headers,
                        content_type=content_type)
    openapi().validate_response(request, mock)


def request(server_or_conn, method: str, path: str, body: bytes | str | dict | None = None,
            headers: dict[str, str] | None = None, check: bool = True, timeout: float = 5.0) -> Response:
    """One request, on a new connection to `server_or_conn` (a ServerProcess) or on
    the given http.client connection (keep-alive). A dict body is sent as JSON with
    its content type unless `headers` name one. The response is validated unless
    `check` is false (for answers the document does not cover, such as 404s off the API)."""
    headers = dict(headers or {})
    if isinstance(body, dict):
        body = json.dumps(body)
        headers.setdefault("Content-Type", "application/json")
    if isinstance(body, str):
        body = body.encode()
    own = not isinstance(server_or_conn, http.client.HTTPConnection)
    conn = http.client.HTTPConnection(server_or_conn.host, server_or_conn.port, timeout=timeout) if own \
        else server_or_conn
    try:
        conn.request(method, path, body=body, headers=headers)
        raw = conn.getresponse()
        data = raw.read()
        answer = Response(raw.status, {k.lower(): v for k, v in raw.getheaders()}, data)
    finally:
        if own:
            conn.close()
    if data and (answer.header("content-type") or "").startswith("application/json"):
        answer.json = strict_loads(data.decode("utf-8"))
    if check:
        validate(method, path, answer, headers, body)
    return answer


def command(server_or_conn, session: str, cmd: dict, headers: dict[str, str] | None = None,
            token: str | None = None) -> Response:
    """POST one command object to the session's commands endpoint."""
    headers = dict(headers or {})
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    return request(server_or_conn, "POST", f"/api/v1/sessions/{session}/commands", cmd, headers)


def read(server_or_conn, session: str) -> Response:
    return request(server_or_conn, "GET", f"/api/v1/sessions/{session}")
