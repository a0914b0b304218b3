"""A webhook receiver for the end-to-end tests: an HTTP endpoint on a loopback port that
checks every request's Standard Webhooks signature with the PyPI `standardwebhooks`
package (which no one here wrote) and keeps the events it verified."""

from __future__ import annotations

import base64
import http.server
import ssl
import threading
from pathlib import Path

import pytest
from standardwebhooks.webhooks import Webhook

SECRET = "whsec_" + base64.b64encode(b"outbox-test-key-0123456789abcdef").decode()
TIMEOUT = 20.0


class Receiver:
    """An HTTP endpoint on 127.0.0.1 that verifies each request's signature, keeps the
    verified events, and answers each with the status `answer(event)` gives. With `tls`
    (a certificate chain and its key, PEM files) it is an https endpoint."""

    def __init__(self, tls: tuple[Path, Path] | None = None):
        self.events: list[dict] = []
        self.rejected: list[str] = []
        self.answer = lambda event: 200
        self.changed = threading.Condition()
        verifier = Webhook(SECRET)
        receiver = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                headers = {k.lower(): v for k, v in self.headers.items()}
                try:
                    payload = verifier.verify(body, headers)
                except Exception as error:  # noqa: BLE001: any failure is the test's finding
                    status = 400
                    with receiver.changed:
                        receiver.rejected.append(f"{error!r}: {headers}")
                        receiver.changed.notify_all()
                else:
                    event = {"id": headers["webhook-id"], "body": payload}
                    status = receiver.answer(event)
                    event["status"] = status
                    with receiver.changed:
                        receiver.events.append(event)
                        receiver.changed.notify_all()
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        class Server(http.server.ThreadingHTTPServer):
            # The deliverer opens up to --webhook-max-in-flight connections at once;
            # the default backlog of 5 would drop their SYNs and time them out.
            request_queue_size = 1024
            daemon_threads = True

            def get_request(self):
                sock, address = super().get_request()
                if tls is None:
                    return sock, address
                context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
                context.load_cert_chain(*tls)
                return context.wrap_socket(sock, server_side=True), address

        self.server = Server(("127.0.0.1", 0), Handler)
        scheme = "https" if tls else "http"
        self.url = f"{scheme}://127.0.0.1:{self.server.server_address[1]}/hooks"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def wait_for(self, predicate, what: str, timeout: float = TIMEOUT) -> list[dict]:
        """Waits until `predicate(events)` holds; returns the events then."""
        with self.changed:
            ok = self.changed.wait_for(lambda: predicate(self.events) or self.rejected, timeout)
            assert not self.rejected, f"a request failed verification: {self.rejected}"
            assert ok, f"no {what} within {timeout}s; got {[e['body'] for e in self.events]}"
            return list(self.events)

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def of(events: list[dict], session: str, type_: str, status: int | None = None) -> list[dict]:
    return [e for e in events
            if e["body"]["data"]["session"] == session and e["body"]["type"] == type_
            and (status is None or e["status"] == status)]


@pytest.fixture
def receiver():
    """A receiver for one test, closed after it."""
    r = Receiver()
    yield r
    r.close()
