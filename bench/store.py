#!/usr/bin/env python3
"""The `store` benchmark of issue 11: commands made durable, side by side.

    bench/store.py                          # :memory:, normal, full x 1, 100, 1000 clients
    bench/store.py --modes full --clients 100 --seconds 5

For each storage mode (`--data :memory:`, `--sync normal`, `--sync full`) and each
number of concurrent commanding clients, runs the release server, opens that many
WebSocket clients (Python websockets), each on its own session, and has each send
start/adjust commands back to back (the next as soon as the last is acked) for
--seconds. Reports commands per second, the command-to-ack latency (p50/p99/max),
and, from a probe connection that pings every 5 ms throughout, the ping round trip
p99 and max: the service thread answers a ping only between other work, so the
longest round trip bounds the longest time it was blocked. Writes JSON to
bench/results/store-*.json.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from websockets.asyncio.client import connect

REPO = Path(__file__).resolve().parent.parent
LISTEN = re.compile(r"listening on http://([^/]+):(\d+)/")


def percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def start_server(binary: Path, data: str, sync: str | None) -> tuple[subprocess.Popen, int]:
    args = [str(binary), "--port", "0", "--data", data, "--max-commands-per-second", "100000",
            "--max-connections-per-ip", "20000", "--max-connections", "5000"]
    if sync:
        args += ["--sync", sync]
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, cwd=REPO)
    line = proc.stdout.readline().decode()
    m = LISTEN.search(line)
    if not m:
        proc.kill()
        raise SystemExit(f"server did not start: {line!r}")
    return proc, int(m.group(2))


async def commander(url: str, stop: float, latencies: list[float]) -> int:
    async with connect(url, ping_interval=None, max_queue=None) as ws:
        await ws.recv()  # snapshot
        sent = 0
        op = {"op": "start", "seconds": 86400, "id": 0}
        while time.monotonic() < stop:
            t0 = time.perf_counter()
            await ws.send(json.dumps(op))
            while True:
                msg = json.loads(await ws.recv())
                if msg["type"] in ("ack", "error"):
                    break
            if msg["type"] == "error":
                raise SystemExit(f"command refused: {msg}")
            latencies.append((time.perf_counter() - t0) * 1000)
            sent += 1
            op = {"op": "adjust", "seconds": 1, "id": sent}
        return sent


async def prober(url: str, stop: float, rtts: list[float]) -> None:
    async with connect(url, ping_interval=None, max_queue=None) as ws:
        await ws.recv()
        while time.monotonic() < stop:
            t0 = time.perf_counter()
            await ws.send(json.dumps({"op": "ping", "t": 0}))
            while json.loads(await ws.recv())["type"] != "pong":
                pass
            rtts.append((time.perf_counter() - t0) * 1000)
            await asyncio.sleep(0.005)


async def one_run(port: int, clients: int, seconds: float) -> dict:
    base = f"ws://127.0.0.1:{port}/ws/"
    latencies: list[float] = []
    rtts: list[float] = []
    stop = time.monotonic() + seconds
    probe = asyncio.create_task(prober(base + "probe", stop, rtts))
    counts = await asyncio.gather(*(commander(f"{base}c{i}", stop, latencies) for i in range(clients)))
    await probe
    return {
        "commands": sum(counts), "per_second": sum(counts) / seconds,
        "ack_p50_ms": percentile(latencies, 0.5), "ack_p99_ms": percentile(latencies, 0.99),
        "ack_max_ms": max(latencies) if latencies else None,
        "ping_p50_ms": percentile(rtts, 0.5), "ping_p99_ms": percentile(rtts, 0.99),
        "ping_max_ms": max(rtts) if rtts else None,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--modes", default="memory,normal,full")
    parser.add_argument("--clients", default="1,100,1000")
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--server-bin", default=None)
    args = parser.parse_args()
    binary = Path(args.server_bin) if args.server_bin else REPO / ".build/release/countdown-server"
    if not args.server_bin:
        subprocess.run(["swift", "build", "-c", "release", "--product", "countdown-server"], cwd=REPO,
                       check=True, stdout=subprocess.DEVNULL)
    results = []
    for clients in [int(c) for c in args.clients.split(",")]:
        for mode in args.modes.split(","):
            tmp = tempfile.mkdtemp(prefix="store-bench-")
            data = ":memory:" if mode == "memory" else os.path.join(tmp, "countdown.db")
            proc, port = start_server(binary, data, None if mode == "memory" else mode)
            try:
                run = asyncio.run(one_run(port, clients, args.seconds))
            finally:
                proc.terminate()
                proc.wait(timeout=10)
                shutil.rmtree(tmp, ignore_errors=True)
            run.update(mode=mode, clients=clients)
            results.append(run)
            print(f"{mode:>7} x {clients:>4} clients: {run['per_second']:8.0f} commands/s, ack p50 "
                  f"{run['ack_p50_ms']:.2f} ms p99 {run['ack_p99_ms']:.2f} ms, ping p99 "
                  f"{run['ping_p99_ms']:.2f} ms max {run['ping_max_ms']:.2f} ms", flush=True)
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    out = REPO / "bench" / "results" / f"store-{stamp}.json"
    out.write_text(json.dumps({"seconds": args.seconds, "runs": results}, indent=1))
    print(f"wrote {out.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
