"""A raw-socket WebSocket client for hostile tests (RFC 6455 framing by hand).

The `websockets` library is a well-behaved client: it reads eagerly, answers pings,
validates what it sends and never lets a test choose the bytes on the wire. `RawWS`
does only what a test tells it to, on a non-blocking socket driven by asyncio:

- the socket can be given a tiny ``SO_RCVBUF`` and a source address (``127.0.0.2``);
- nothing is read until the test calls a ``recv_*`` method, so "a client that stops
  reading" really stops reading (no library buffers on its behalf);
- pings are never answered unless the test asks (``auto_pong``);
- any frame can be sent: invalid UTF-8, binary, fragments, unsolicited pongs.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import os
import socket
import struct
import time

OP_CONT, OP_TEXT, OP_BINARY, OP_CLOSE, OP_PING, OP_PONG = 0x0, 0x1, 0x2, 0x8, 0x9, 0xA


class HandshakeResult:
    def __init__(self, status: int | None, headers: dict[str, str], raw: bytes, body: bytes = b""):
        self.status = status
        self.headers = headers
        self.raw = raw
        self.body = body


def _parse_head(head: bytes) -> tuple[int | None, dict[str, str]]:
    lines = head.split(b"\r\n")
    parts = lines[0].split()
    status = int(parts[1]) if len(parts) >= 2 and parts[0].startswith(b"HTTP/") and parts[1].isdigit() else None
    headers: dict[str, str] = {}
    for line in lines[1:]:
        k, sep, v = line.partition(b":")
        if sep:
            headers[k.strip().lower().decode("latin-1")] = v.strip().decode("latin-1")
    return status, headers


class RawWS:
    """One raw TCP connection, upgraded (or refused) by hand."""

    def __init__(self, sock: socket.socket):
        self.sock = sock
        self.buf = bytearray()
        self.eof = False
        self.close_code: int | None = None
        self.close_reason = b""
        self.pings_seen = 0
        self.handshake: HandshakeResult | None = None

    # -- opening ---------------------------------------------------------------------
    @classmethod
    async def connect(
        cls,
        host: str,
        port: int,
        *,
        source: str | None = None,
        rcvbuf: int | None = None,
        mss: int | None = None,
        timeout: float = 5.0,
    ) -> "RawWS":
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        if rcvbuf is not None:
            # Must be set before connect() so the advertised window is small from the start.
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        if mss is not None:
            # A small segment size, announced in the SYN, keeps the server's send buffer from
            # growing to megabytes on loopback (its autotuning scales with the segment size).
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_MAXSEG, mss)
        if source is not None:
            sock.bind((source, 0))
        sock.setblocking(False)
        loop = asyncio.get_running_loop()
        await asyncio.wait_for(loop.sock_connect(sock, (host, port)), timeout)
        return cls(sock)

    @classmethod
    async def open(
        cls,
        host: str,
        port: int,
        path: str,
        *,
        origin: str | None = None,
        host_header: str | None = None,
        subprotocol: str | None = "countdown.v1",
        extra_headers: list[tuple[str, str]] = (),
        source: str | None = None,
        rcvbuf: int | None = None,
        mss: int | None = None,
        timeout: float = 5.0,
    ) -> "RawWS":
        """Connect and send an upgrade request; `.handshake` holds the answer (status 101
        on success, or the refusal's status, headers and body)."""
        ws = await cls.connect(host, port, source=source, rcvbuf=rcvbuf, mss=mss, timeout=timeout)
        key = base64.b64encode(os.urandom(16)).decode()
        lines = [
            f"GET {path} HTTP/1.1",
            f"Host: {host_header or f'{host}:{port}'}",
            "Upgrade: websocket",
            "Connection: Upgrade",
            f"Sec-WebSocket-Key: {key}",
            "Sec-WebSocket-Version: 13",
        ]
        if subprotocol:
            lines.append(f"Sec-WebSocket-Protocol: {subprotocol}")
        if origin is not None:
            lines.append(f"Origin: {origin}")
        lines += [f"{k}: {v}" for k, v in extra_headers]
        await ws.send_raw(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))
        head = await ws._read_until(b"\r\n\r\n", timeout)
        if head is None:
            ws.handshake = HandshakeResult(None, {}, bytes(ws.buf))
            return ws
        status, headers = _parse_head(head)
        if status == 101:
            expected = base64.b64encode(
                hashlib.sha1((key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").encode()).digest()).decode()
            got = headers.get("sec-websocket-accept")
            if got != expected:
                raise AssertionError(f"101 with a wrong Sec-WebSocket-Accept {got!r} (expected {expected!r})")
        raw, body = head, b""
        if status != 101:
            # A refusal: read its body (content-length) or until the server closes.
            n = int(headers.get("content-length", "0") or 0)
            deadline = time.monotonic() + timeout
            while len(ws.buf) < n and not ws.eof and time.monotonic() < deadline:
                await ws._fill(deadline - time.monotonic())
            body = bytes(ws.buf)
            raw = head + b"\r\n\r\n" + body
        ws.handshake = HandshakeResult(status, headers, raw, body)
        return ws

    @property
    def status(self) -> int | None:
        return self.handshake.status if self.handshake else None

    # -- low level I/O -----------------------------------------------------------------
    async def send_raw(self, data: bytes) -> None:
        await asyncio.get_running_loop().sock_sendall(self.sock, data)

    async def _fill(self, timeout: float, size: int = 65536) -> bool:
        """Read once (waiting at most `timeout`); False on timeout or EOF."""
        if self.eof:
            return False
        try:
            chunk = await asyncio.wait_for(asyncio.get_running_loop().sock_recv(self.sock, size), max(timeout, 0))
        except asyncio.TimeoutError:
            return False
        except (ConnectionResetError, BrokenPipeError):
            chunk = b""
        if not chunk:
            self.eof = True
            return False
        self.buf += chunk
        return True

    async def _read_until(self, marker: bytes, timeout: float) -> bytes | None:
        deadline = time.monotonic() + timeout
        while marker not in self.buf:
            left = deadline - time.monotonic()
            if left <= 0 or not await self._fill(left):
                if marker not in self.buf:
                    return None
        head, _, rest = bytes(self.buf).partition(marker)
        self.buf = bytearray(rest)
        return head

    async def _read_exact(self, n: int, deadline: float) -> bytes | None:
        while len(self.buf) < n:
            left = deadline - time.monotonic()
            if left <= 0 or not await self._fill(left):
                if len(self.buf) < n:
                    return None
        out = bytes(self.buf[:n])
        del self.buf[:n]
        return out

    # -- frames ------------------------------------------------------------------------
    async def send_frame(self, opcode: int, payload: bytes = b"", *, fin: bool = True, mask: bool = True,
                         rsv: int = 0) -> None:
        await self.send_raw(encode_frame(opcode, payload, fin=fin, mask=mask, rsv=rsv))

    async def send_text(self, text: str) -> None:
        await self.send_frame(OP_TEXT, text.encode())

    async def send_json(self, obj) -> None:
        await self.send_text(json.dumps(obj, ensure_ascii=False))

    async def recv_frame(self, timeout: float = 5.0) -> tuple[bool, int, bytes] | None:
        """The next frame as (fin, opcode, payload), or None on timeout/EOF."""
        deadline = time.monotonic() + timeout
        head = await self._read_exact(2, deadline)
        if head is None:
            return None
        fin = bool(head[0] & 0x80)
        opcode = head[0] & 0x0F
        masked = bool(head[1] & 0x80)
        n = head[1] & 0x7F
        if n == 126:
            ext = await self._read_exact(2, deadline)
            if ext is None:
                return None
            n = struct.unpack("!H", ext)[0]
        elif n == 127:
            ext = await self._read_exact(8, deadline)
            if ext is None:
                return None
            n = struct.unpack("!Q", ext)[0]
        mkey = b""
        if masked:
            mkey = await self._read_exact(4, deadline)
            if mkey is None:
                return None
        payload = await self._read_exact(n, deadline)
        if payload is None:
            return None
        if masked:
            payload = apply_mask(payload, mkey)
        if opcode == OP_CLOSE:
            self.close_code = struct.unpack("!H", payload[:2])[0] if len(payload) >= 2 else 1005
            self.close_reason = payload[2:]
        elif opcode == OP_PING:
            self.pings_seen += 1
        return fin, opcode, payload

    async def recv_message(self, timeout: float = 5.0, *, auto_pong: bool = False):
        """The next data message (str for text, bytes for binary), reassembling fragments.
        Pings are counted (and answered only with `auto_pong`). Returns None on a close
        frame, timeout or EOF."""
        deadline = time.monotonic() + timeout
        parts: list[bytes] = []
        kind = None
        while True:
            frame = await self.recv_frame(deadline - time.monotonic())
            if frame is None:
                return None
            fin, opcode, payload = frame
            if opcode == OP_CLOSE:
                return None
            if opcode == OP_PING:
                if auto_pong:
                    await self.send_frame(OP_PONG, payload)
                continue
            if opcode == OP_PONG:
                continue
            if opcode in (OP_TEXT, OP_BINARY):
                kind = opcode
            parts.append(payload)
            if fin:
                data = b"".join(parts)
                return data.decode("utf-8") if kind == OP_TEXT else data

    async def recv_json(self, timeout: float = 5.0, *, auto_pong: bool = False):
        msg = await self.recv_message(timeout, auto_pong=auto_pong)
        return None if msg is None else json.loads(msg)

    async def wait_closed(self, timeout: float = 5.0) -> bool:
        """Read until the server closes the TCP connection; True if it did within
        `timeout`. Frames that arrived meanwhile stay parseable: a close frame among them
        sets `close_code` (see `frames_left`)."""
        deadline = time.monotonic() + timeout
        while not self.eof:
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            await self._fill(left)
        return True

    async def frames_left(self) -> list[tuple[bool, int, bytes]]:
        """Parse every complete frame already read (no waiting)."""
        out = []
        while len(self.buf) >= 2:
            frame = await self.recv_frame(0)
            if frame is None:
                break
            out.append(frame)
        return out

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass


def encode_frame(opcode: int, payload: bytes, *, fin: bool = True, mask: bool = True, rsv: int = 0) -> bytes:
    b0 = (0x80 if fin else 0) | (rsv << 4) | opcode
    n = len(payload)
    mbit = 0x80 if mask else 0
    if n < 126:
        head = struct.pack("!BB", b0, mbit | n)
    elif n < 65536:
        head = struct.pack("!BBH", b0, mbit | 126, n)
    else:
        head = struct.pack("!BBQ", b0, mbit | 127, n)
    if not mask:
        return head + payload
    key = os.urandom(4)
    return head + key + apply_mask(payload, key)


def apply_mask(data: bytes, key: bytes) -> bytes:
    """XOR `data` with the repeating 4-byte `key` (fast, via one big integer)."""
    if not data:
        return b""
    n = len(data)
    k = (key * (n // 4 + 1))[:n]
    return (int.from_bytes(data, "little") ^ int.from_bytes(k, "little")).to_bytes(n, "little")
