"""Raw HTTP bytes on a socket of their own, as an attacker sends them."""

from __future__ import annotations

import socket

READ_TIMEOUT = 5.0


def exchange(port: int, data: bytes, later: bytes = b"", host: str = "127.0.0.1",
             timeout: float = READ_TIMEOUT) -> tuple[bytes, bool]:
    """Send `data` (then `later`, once the first bytes of an answer came or 0.3 s
    passed); return everything the server sent and whether it closed."""
    out = bytearray()
    with socket.create_connection((host, port), timeout=timeout) as s:
        try:
            s.sendall(data)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the server refused before reading it all: read what it said
        if later:
            s.settimeout(0.3)
            try:
                chunk = s.recv(65536)
                if not chunk:
                    return bytes(out), True
                out += chunk
            except socket.timeout:
                pass
            s.settimeout(timeout)
            try:
                s.sendall(later)
            except (BrokenPipeError, ConnectionResetError):
                return bytes(out), True
        try:
            while True:
                chunk = s.recv(65536)
                if not chunk:
                    return bytes(out), True
                out += chunk
        except ConnectionResetError:
            return bytes(out), True
        except socket.timeout:
            return bytes(out), False
