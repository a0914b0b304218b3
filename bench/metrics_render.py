#!/usr/bin/env python3
"""How long GET /metrics holds the service thread with many live sessions.

Starts the built server (release by default) on a free port, creates --sessions
sessions, each running a 1-day countdown so that none is forgotten while the
script works (a viewer joins, sends start, and leaves; connections come from
127.0.0.2-9 so closed ones in TIME_WAIT do not exhaust one address's ports),
then scrapes /metrics --scrapes times. The server times each render itself and
reports it in the next as countdown_metrics_render_seconds; the script prints
its median and maximum, and the client's wall time per GET, as one JSON line.

    swift build -c release && python3 bench/metrics_render.py --sessions 100000
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import http.client
import json
import os
import re
import statistics
import subprocess
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


async def create_session(host: str, port: int, source: str, name: str) -> None:
    reader, writer = await asyncio.open_connection(host, port, local_addr=(source, 0))
    key = base64.b64encode(os.urandom(16)).decode()
    writer.write((f"GET /ws/{name} HTTP/1.1\r\nHost: {host}:{port}\r\nUpgrade: websocket\r\n"
                  f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n").encode())
    head = await reader.readuntil(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 101"), head
    first = await reader.readexactly(2)
    length = first[1] & 0x7F
    if length == 126:
        length = int.from_bytes(await reader.readexactly(2), "big")
    await reader.readexactly(length)  # the snapshot
    payload = b'{"op":"start","seconds":86400}'
    mask = os.urandom(4)
    writer.write(bytes([0x81, 0x80 | len(payload)]) + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload)))
    await writer.drain()
    writer.close()


async def create_sessions(host: str, port: int, count: int, concurrency: int) -> None:
    prefix = os.urandom(4).hex()
    sources = [f"127.0.0.{i}" for i in range(2, 10)]
    queue = iter(range(count))

    async def worker(index: int) -> None:
        for n in queue:
            await create_session(host, port, sources[(index + n) % len(sources)], f"m{prefix}-{n}")

    await asyncio.gather(*(worker(i) for i in range(concurrency)))


def scrape(host: str, port: int) -> tuple[float, float, int]:
    t0 = time.perf_counter()
    conn = http.client.HTTPConnection(host, port, timeout=10)
    conn.request("GET", "/metrics")
    body = conn.getresponse().read().decode()
    wall = time.perf_counter() - t0
    conn.close()
    def metric(pattern: str) -> float:
        return float(re.search(pattern + r" (\S+)$", body, re.M).group(1))

    render = metric(r"^countdown_metrics_render_seconds")
    # Each session was made by one join; a join refused past --max-sessions would show here.
    joins = metric(r"^countdown_connections_accepted_total")
    refused = metric(r'^countdown_upgrades_refused_total\{cause="session_cap"\}')
    return render, wall, len(body), joins - refused


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sessions", type=int, default=100_000)
    parser.add_argument("--scrapes", type=int, default=50)
    parser.add_argument("--concurrency", type=int, default=200)
    parser.add_argument("--binary", default=str(REPO / ".build" / "release" / "countdown-server"))
    args = parser.parse_args()

    server = subprocess.Popen(
        [args.binary, "--port", "0", "--max-sessions", str(args.sessions + 1000),
         "--max-connections-per-ip", "100000", "--log-level", "warn"],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, cwd=str(REPO))
    try:
        line = server.stdout.readline().decode()
        port = int(re.search(r":(\d+)/$", line.strip()).group(1))
        t0 = time.monotonic()
        asyncio.run(create_sessions("127.0.0.1", port, args.sessions, args.concurrency))
        created = time.monotonic() - t0
        renders, walls = [], []
        size = sessions = 0
        for _ in range(args.scrapes):
            render, wall, size, sessions = scrape("127.0.0.1", port)
            renders.append(render)
            walls.append(wall)
        renders = renders[1:]  # the first reports the render before it: none
        print(json.dumps({
            "sessions": args.sessions, "sessions_joined": int(sessions), "seconds_to_create": round(created, 1), "scrapes": len(renders),
            "render_ms_median": round(statistics.median(renders) * 1000, 4),
            "render_ms_max": round(max(renders) * 1000, 4),
            "get_ms_median": round(statistics.median(walls) * 1000, 3), "body_bytes": size,
        }))
    finally:
        server.terminate()
        server.wait(timeout=10)


if __name__ == "__main__":
    main()
