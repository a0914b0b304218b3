#!/usr/bin/env python3
"""What one pipelined write costs the server: for each shape of the issue-27 attack,
a fresh server gets the bytes on one connection, and this prints how many answers came
back, whether the server closed, and the CPU the server burned in the second after
(clock ticks from /proc, 100 a second: 100 is a whole core spinning).

    python3 bench/http_pipelining.py [--binary PATH]

Run it against the commit before the framing fix (--binary of an older build) to see
the spin; the current server should answer once, close, and burn nothing."""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def get(path: str) -> bytes:
    return f"GET {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode()


def post(path: str, body: str) -> bytes:
    return (f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n{body}").encode()


CANCEL = '{"op":"cancel"}'
SHAPES = {
    "get-then-post": get("/api/v1/sessions/a") + post("/api/v1/sessions/b/commands", CANCEL),
    "post-then-post": post("/api/v1/sessions/b/commands", CANCEL) * 2,
    "healthz-then-post": get("/healthz") + post("/api/v1/sessions/b/commands", CANCEL),
    "file-then-file": get("/") + get("/app.js"),
    "get-then-get": get("/api/v1/sessions/a") + get("/api/v1/sessions/b"),
}


def ticks(pid: int) -> int:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


def one(binary: str, data: bytes) -> tuple[int, bool, int]:
    proc = subprocess.Popen([binary, "--port", "0", "--data", ":memory:"], stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, cwd=REPO)
    try:
        line = proc.stdout.readline().decode()
        port = int(line.rstrip("/\n").rsplit(":", 1)[1])
        raw, closed = b"", False
        with socket.create_connection(("127.0.0.1", port), timeout=2) as s:
            s.sendall(data)
            try:
                while chunk := s.recv(65536):
                    raw += chunk
                closed = True
            except socket.timeout:
                pass
        before = ticks(proc.pid)
        time.sleep(1.0)
        return raw.count(b"HTTP/1."), closed, ticks(proc.pid) - before
    finally:
        proc.kill()
        proc.wait()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--binary", default=str(REPO / ".build" / "debug" / "countdown-server"))
    args = parser.parse_args()
    print(f"{'shape':20s} {'answers':>7s} {'closed':>6s} {'CPU ticks in 1 s after':>22s}")
    for name, data in SHAPES.items():
        answers, closed, spent = one(args.binary, data)
        print(f"{name:20s} {answers:7d} {str(closed):>6s} {spent:22d}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
