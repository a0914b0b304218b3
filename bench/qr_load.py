#!/usr/bin/env python3
"""Ping round trips while clients draw fresh /qr.svg codes as fast as they can.

Starts the built server on a free port and measures one WebSocket's ping round
trip (median and p99 of --pings pings, a few a second, under the command rate):
idle, then while --clients HTTP clients each draw fresh 400-byte codes in a
loop, all from 127.0.0.1, then each from its own 127.0.0.x address. Prints the
round trips and how the draws were answered (200 drawn, 429 refused).

    swift build && python3 bench/qr_load.py
    COUNTDOWN_SERVER_BIN=.build/release/countdown-server python3 bench/qr_load.py --clients 16
"""

from __future__ import annotations

import argparse
import http.client
import itertools
import json
import statistics
import sys
import threading
import time
import uuid
from pathlib import Path

from websockets.sync.client import connect

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "IntegrationTests" / "e2e"))
from cdclient import SUBPROTOCOL  # noqa: E402
from serverproc import start_server  # noqa: E402


def pings(srv, count: int) -> tuple[float, float]:
    with connect(srv.ws_url("bench" + uuid.uuid4().hex[:8]), subprotocols=[SUBPROTOCOL], proxy=None) as ws:
        ws.recv()
        rtts = []
        for i in range(count):
            start = time.perf_counter()
            ws.send(json.dumps({"op": "ping", "t": i}))
            while json.loads(ws.recv()).get("type") not in ("pong", "error"):
                pass
            rtts.append((time.perf_counter() - start) * 1000)
            time.sleep(0.06)  # under --max-commands-per-second's default
    return statistics.median(rtts), sorted(rtts)[int(len(rtts) * 0.99)]


def draw(srv, source: str, stop: threading.Event, answers: dict[int, int]) -> None:
    conn = http.client.HTTPConnection(srv.host, srv.port, timeout=5, source_address=(source, 0))
    for _ in itertools.count():
        if stop.is_set():
            return
        conn.request("GET", "/qr.svg?text=" + "x" * 400 + uuid.uuid4().hex)
        answer = conn.getresponse()
        answer.read()
        answers[answer.status] = answers.get(answer.status, 0) + 1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--pings", type=int, default=120)
    args = parser.parse_args()
    srv = start_server("--log-level", "error")
    try:
        print("idle: median %.2f ms, p99 %.2f ms" % pings(srv, args.pings))
        for label, sources in ((f"{args.clients} clients, one address", ["127.0.0.1"] * args.clients),
                               (f"{args.clients} clients, {args.clients} addresses",
                                [f"127.0.0.{i}" for i in range(1, args.clients + 1)])):
            stop, answers = threading.Event(), {}
            threads = [threading.Thread(target=draw, args=(srv, s, stop, answers)) for s in sources]
            for thread in threads:
                thread.start()
            time.sleep(1)
            median, p99 = pings(srv, args.pings)
            stop.set()
            for thread in threads:
                thread.join()
            print(f"{label}: median {median:.2f} ms, p99 {p99:.2f} ms; answers {answers}")
            time.sleep(1.5)  # the buckets fill again
    finally:
        srv.stop_and_check()


if __name__ == "__main__":
    main()
