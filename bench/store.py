#!/usr/bin/env python3
"""The `store` benchmark of issue 11: commands made durable, side by side.

    bench/store.py                          # :memory:, normal, full x 1, 100, 1000 clients
    bench/store.py --modes full --clients 100 --seconds 5

For each storage mode (`--data :memory:`, `--sync normal`, `--sync full`) and each
number of concurrent commanding clients, runs the release server, opens that many
WebSocket clients (Python websockets), each on its own session, and has each send
start/adjust commands back to back (the next as soon as the last is acked) for
--seconds. Reports commands per second, the command-to-ack latency (p50/p99/max),
and how long the service thread was busy per loop iteration (p99, and the upper
bound of the highest bucket reached), from the server's own
`countdown_service_loop_seconds` histogram scraped before and after the run:
anything that blocked the thread would show there. The clients share one Python
process, so with many of them the client, not the server, sets the pace. Writes
JSON to bench/results/store.json, replacing the last run's.
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
import urllib.request
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

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


def loop_buckets(port: int) -> dict[float, float]:
    """The service-loop iteration histogram's cumulative buckets, by upper bound."""
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    out = {}
    for family in text_string_to_metric_families(text):
        if family.name == "countdown_service_loop_seconds":
            for sample in family.samples:
                if sample.name.endswith("_bucket"):
                    out[float(sample.labels["le"])] = sample.value
    return out


def busy_figures(before: dict[float, float], after: dict[float, float]) -> tuple[float | None, float | None]:
    """p99 and the highest bucket reached (its upper bound) of the iterations in between, in ms."""
    bounds = sorted(after)
    counts = [after[b] - before.get(b, 0) for b in bounds]
    total = counts[-1]
    if total <= 0:
        return None, None
    p99 = next(b for b, c in zip(bounds, counts) if c >= 0.99 * total)
    top = next(b for b, c in zip(bounds, counts) if c >= total)
    return p99 * 1000, top * 1000


async def one_run(port: int, clients: int, seconds: float) -> dict:
    base = f"ws://127.0.0.1:{port}/ws/"
    latencies: list[float] = []
    before = loop_buckets(port)
    stop = time.monotonic() + seconds
    counts = await asyncio.gather(*(commander(f"{base}c{i}", stop, latencies) for i in range(clients)))
    busy_p99, busy_top = busy_figures(before, loop_buckets(port))
    return {
        "commands": sum(counts), "per_second": sum(counts) / seconds,
        "ack_p50_ms": percentile(latencies, 0.5), "ack_p99_ms": percentile(latencies, 0.99),
        "ack_max_ms": max(latencies) if latencies else None,
        "loop_busy_p99_ms": busy_p99, "loop_busy_top_bucket_ms": busy_top,
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
                  f"{run['ack_p50_ms']:.2f} ms p99 {run['ack_p99_ms']:.2f} ms; loop iteration p99 "
                  f"<= {run['loop_busy_p99_ms']} ms, longest <= {run['loop_busy_top_bucket_ms']} ms",
                  flush=True)
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    out = REPO / "bench" / "results" / "store.json"
    out.write_text(json.dumps({"timestamp": stamp, "seconds": args.seconds, "runs": results}, indent=1) + "\n")
    print(f"wrote {out.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
