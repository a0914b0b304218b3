#!/usr/bin/env python3
"""Tick lateness of one countdown watched by many viewers.

Starts the built server on a free port, connects --viewers clients to one
session, starts a --seconds countdown, and for every patch each client receives
records (receipt time − scheduled time), where a tick for remaining = r is due at
endsAt − r s and the finish at endsAt. Prints p50 / p99 / max and the finish
lateness, and writes the same figures as JSON to bench/results/tick_lag.json,
replacing the last run's (the viewers and seconds are in it).

    swift build -c release && python3 bench/tick_lag.py --viewers 200 --seconds 600
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import re
import subprocess
import sys
import time
import uuid
from pathlib import Path

from websockets.asyncio.client import connect

REPO = Path(__file__).resolve().parent.parent


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


async def viewer(url: str, ready: asyncio.Event, started: asyncio.Event, lags: list, finishes: list,
                 missed: list):
    # The server keeps connections alive itself; a client-side ping that times out
    # under a loaded machine would only measure this script.
    async with connect(url, subprotocols=["countdown.v1"], max_queue=None, ping_interval=None) as ws:
        json.loads(await ws.recv())  # snapshot
        ready.set()
        ends_at = None
        expected = None
        while True:
            message = json.loads(await ws.recv())
            now_ms = time.time() * 1000
            if message.get("type") != "patch":
                continue
            patch = message["patch"]
            if "endsAt" in patch and patch["endsAt"] is not None:
                ends_at = patch["endsAt"]
            if ends_at is None:
                continue
            if "remaining" in patch and patch.get("phase") is None and patch["remaining"] > 0:
                r = patch["remaining"]
                if expected is not None and r != expected:
                    missed.append((expected, r))
                lags.append(now_ms - (ends_at - r * 1000))
                expected = r - 1
            elif "remaining" in patch and patch.get("phase") == "running":
                expected = patch["remaining"] - 1
            if patch.get("phase") == "finished":
                finishes.append(now_ms - ends_at)
                return


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--viewers", type=int, default=100)
    parser.add_argument("--seconds", type=int, default=10)
    parser.add_argument("--binary", default=str(REPO / ".build/release/countdown-server"))
    args = parser.parse_args()

    server = subprocess.Popen([args.binary, "--port", "0", "--public", str(REPO / "Public")],
                              stdout=subprocess.PIPE, text=True)
    try:
        line = server.stdout.readline()
        match = re.search(r"http://([^/]+)/", line)
        if not match:
            print(f"server did not start: {line!r}", file=sys.stderr)
            return 1
        url = f"ws://{match.group(1)}/ws/bench{uuid.uuid4().hex[:8]}"
        lags: list[float] = []
        finishes: list[float] = []
        missed: list = []
        readies = [asyncio.Event() for _ in range(args.viewers)]
        started = asyncio.Event()
        tasks = [asyncio.create_task(viewer(url, readies[i], started, lags, finishes, missed))
                 for i in range(args.viewers)]
        await asyncio.gather(*(r.wait() for r in readies))
        async with connect(url) as control:
            await control.recv()
            await control.send(json.dumps({"op": "start", "seconds": args.seconds}))
            await asyncio.wait_for(asyncio.gather(*tasks), timeout=args.seconds + 30)
    finally:
        server.terminate()
        server.wait(timeout=5)

    figures = {
        "viewers": args.viewers,
        "seconds": args.seconds,
        "ticks_received": len(lags),
        "ticks_expected": args.viewers * (args.seconds - 1),
        "missed_or_out_of_order": len(missed),
        "tick_lag_ms": {"p50": percentile(lags, 0.5), "p99": percentile(lags, 0.99), "max": max(lags)},
        "finish_lag_ms": {"p50": percentile(finishes, 0.5), "max": max(finishes)},
        "nproc": os.cpu_count(),
        "kernel": platform.release(),
    }
    print(f"viewers {args.viewers}, countdown {args.seconds} s, ticks received "
          f"{figures['ticks_received']} of {figures['ticks_expected']}, missed {len(missed)}")
    print("tick lag ms    p50 {p50:8.2f}   p99 {p99:8.2f}   max {max:8.2f}".format(**figures["tick_lag_ms"]))
    print("finish lag ms  p50 {p50:8.2f}   max {max:8.2f}".format(**figures["finish_lag_ms"]))
    out = REPO / "bench" / "results" / "tick_lag.json"
    out.write_text(json.dumps(figures, indent=2) + "\n")
    print(f"wrote {out.relative_to(REPO)}")
    return 0 if not missed and len(lags) == figures["ticks_expected"] else 1


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
