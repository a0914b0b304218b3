"""TLS for the tests: an operator's own CA made with openssl, and a TLS front (as a
reverse proxy would be) that relays each connection to a plain-HTTP server."""

from __future__ import annotations

import socket
import ssl
import subprocess
import threading
from pathlib import Path


def private_ca(directory: Path) -> tuple[Path, Path, Path]:
    """An operator's own CA and a certificate for 127.0.0.1 that it signed, made with
    openssl: (the CA's certificate, the server's certificate, its key)."""
    ca_key, ca = directory / "ca-key.pem", directory / "ca.pem"
    key, request, cert = directory / "key.pem", directory / "req.pem", directory / "cert.pem"
    ext = directory / "ext.cnf"
    ext.write_text("subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\n")
    curve = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    for args in (
        ["req", "-x509", *curve, "-keyout", ca_key, "-out", ca, "-days", "1", "-subj", "/CN=Test CA",
         "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign"],
        ["req", "-new", *curve, "-keyout", key, "-out", request, "-subj", "/CN=127.0.0.1"],
        ["x509", "-req", "-in", request, "-CA", ca, "-CAkey", ca_key, "-CAcreateserial", "-out", cert,
         "-days", "1", "-extfile", ext],
    ):
        subprocess.run(["openssl", *map(str, args)], check=True, capture_output=True)
    return ca, cert, key


class TLSFront:
    """Listens on a free loopback port for TLS with `cert` and `key`, and relays each
    connection's bytes both ways to `upstream` (host, port)."""

    def __init__(self, cert: Path, key: Path, upstream: tuple[str, int]):
        self.context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.context.load_cert_chain(cert, key)
        self.upstream = upstream
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.handshakes: list[str] = []
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._relay, args=(conn,), daemon=True).start()

    def _relay(self, conn: socket.socket):
        try:
            tls = self.context.wrap_socket(conn, server_side=True)
        except (ssl.SSLError, OSError) as error:
            self.handshakes.append(repr(error))
            conn.close()
            return
        self.handshakes.append("ok")
        up = socket.create_connection(self.upstream)
        threading.Thread(target=self._pipe, args=(up, tls), daemon=True).start()
        self._pipe(tls, up)

    @staticmethod
    def _pipe(source: socket.socket, sink: socket.socket):
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for s in (source, sink):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def close(self):
        self.listener.close()
