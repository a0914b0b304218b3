#!/usr/bin/env python3
"""A webhook receiver for bench/run's `webhook` scenario: HTTP/1.1 keep-alive on a
loopback port, answers every POST with 204 at once, and records when each event
arrived against the change time its body names (Standard Webhooks' `timestamp`).

    bench/hookrecv.py [--port 0]

Prints `@ready {"port": N}` on stderr once listening; `GET /count` answers the
number of `session.finished` events so far. On SIGTERM (or SIGINT) it
prints one JSON report on stdout: events, distinct ids, repeats, and the latency
from the change to arrival (p50, p99, max, in ms), over the `session.finished`
events, then exits. Kept out of bench/run's own process so its GIL does not share
a core with the driver's threads.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import signal
import sys
import time

arrivals: list[tuple[float, dict, str]] = []


def parse_ms(stamp: str) -> float:
    """`2026-12-01T18:30:00.250Z` as epoch ms."""
    return datetime.datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp() * 1000


async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            headers = {}
            for line in head.decode("latin-1").split("\r\n")[1:]:
                if ":" in line:
                    name, value = line.split(":", 1)
                    headers[name.strip().lower()] = value.strip()
            body = await reader.readexactly(int(headers.get("content-length", "0")))
            now = time.time() * 1000
            if head.startswith(b"GET /count"):
                # How many finishes arrived so far: bench/run polls this to know when
                # every finish it caused was delivered.
                count = sum(1 for _, b, _ in arrivals if b.get("type") == "session.finished")
                text = str(count).encode()
                writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: %d\r\n\r\n%s" % (len(text), text))
                await writer.drain()
                continue
            writer.write(b"HTTP/1.1 204 No Content\r\n\r\n")
            await writer.drain()
            try:
                arrivals.append((now, json.loads(body), headers.get("webhook-id", "")))
            except ValueError:
                arrivals.append((now, {}, headers.get("webhook-id", "")))
    except (asyncio.IncompleteReadError, ConnectionError, asyncio.LimitOverrunError):
        pass
    finally:
        writer.close()


def report() -> dict:
    finished = [(t, b, i) for t, b, i in arrivals if b.get("type") == "session.finished"]
    lags = sorted(t - parse_ms(b["timestamp"]) for t, b, _ in finished)
    ids = [i for _, _, i in arrivals]
    pick = lambda q: round(lags[min(len(lags) - 1, int(q * len(lags)))], 3) if lags else None
    first = min((t for t, _, _ in finished), default=None)
    last = max((t for t, _, _ in finished), default=None)
    return {"events": len(arrivals), "finished": len(finished), "distinct_ids": len(set(ids)),
            "repeats": len(ids) - len(set(ids)),
            "sessions_finished": len({b["data"]["session"] for _, b, _ in finished}),
            "lag_p50_ms": pick(0.50), "lag_p99_ms": pick(0.99),
            "lag_max_ms": round(lags[-1], 3) if lags else None,
            "arrival_span_ms": round(last - first, 3) if finished else None}


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args()
    server = await asyncio.start_server(serve, "127.0.0.1", args.port)
    port = server.sockets[0].getsockname()[1]
    print("@ready " + json.dumps({"port": port}), file=sys.stderr, flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    server.close()
    print(json.dumps(report()), flush=True)


if __name__ == "__main__":
    asyncio.run(main())
