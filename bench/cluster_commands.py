#!/usr/bin/env python3
"""Cluster mode: 100 commands a second across 3 instances, command-to-ack latency.

    bench/cluster_commands.py                       # 100/s, 3 instances, 30 s
    bench/cluster_commands.py --rate 100 --seconds 10 --instances 3

Starts its own redis-server on a free loopback port (no persistence) and the
built server (release if built, else debug; or $COUNTDOWN_SERVER_BIN) N times
with --redis. One WebSocket client per session, sessions spread over the
instances; each sends start and cancel in turn on a fixed schedule so that all
together send --rate commands a second. Reports the command-to-ack latency
(p50/p99/max), and Redis's commands per second and CPU seconds per second over
the run (INFO). Writes JSON to bench/results/cluster-commands.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "IntegrationTests" / "e2e"))

from cdclient import Client  # noqa: E402
from serverproc import start_server  # noqa: E402


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def redis_info(port: int) -> dict[str, str]:
    out = subprocess.run(["redis-cli", "-p", str(port), "INFO"], capture_output=True, text=True).stdout
    return dict(line.split(":", 1) for line in out.splitlines() if ":" in line)


async def run(args) -> dict:
    port = free_port()
    redis = subprocess.Popen(
        ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
         "--dir", tempfile.mkdtemp(prefix="bench-redis-")],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    seen = b""
    while b"eady to accept connections" not in seen:
        seen += redis.stdout.read1(4096)
    release = ROOT / ".build" / "release" / "countdown-server"
    if "COUNTDOWN_SERVER_BIN" not in os.environ and release.exists():
        os.environ["COUNTDOWN_SERVER_BIN"] = str(release)
    servers = [start_server("--redis", f"redis://127.0.0.1:{port}") for _ in range(args.instances)]
    try:
        clients = [await Client.connect(servers[i % len(servers)].ws_url(f"bench-{i}"))
                   for i in range(args.sessions)]
        per_client = args.rate / args.sessions
        latencies: list[float] = []
        before, started = redis_info(port), time.monotonic()

        async def drive(index: int, client: Client) -> None:
            # Spread the clients' slots evenly over each period.
            period = 1 / per_client
            next_at = started + period * index / args.sessions
            running = False
            while next_at < started + args.seconds:
                await asyncio.sleep(max(0, next_at - time.monotonic()))
                op = {"op": "cancel"} if running else {"op": "start", "seconds": 600}
                sent = time.perf_counter()
                await client.send({**op, "id": 1})
                reply = await client.reply()
                latencies.append((time.perf_counter() - sent) * 1000)
                assert reply["type"] == "ack", reply
                running = not running
                next_at += period

        await asyncio.gather(*(drive(i, c) for i, c in enumerate(clients)))
        elapsed = time.monotonic() - started
        after = redis_info(port)
        for client in clients:
            await client.close()
        cpu = (float(after["used_cpu_sys"]) + float(after["used_cpu_user"])
               - float(before["used_cpu_sys"]) - float(before["used_cpu_user"]))
        commands = int(after["total_commands_processed"]) - int(before["total_commands_processed"])
        latencies.sort()
        return {
            "instances": args.instances, "sessions": args.sessions, "rate": args.rate,
            "seconds": round(elapsed, 1), "commands": len(latencies),
            "ack_ms": {"p50": round(statistics.median(latencies), 2),
                       "p99": round(latencies[int(len(latencies) * 0.99) - 1], 2),
                       "max": round(latencies[-1], 2)},
            "redis_commands_per_second": round(commands / elapsed, 1),
            "redis_cpu_seconds_per_second": round(cpu / elapsed, 4),
            "binary": os.environ.get("COUNTDOWN_SERVER_BIN", "debug"),
        }
    finally:
        for server in servers:
            server.stop_and_check()
        redis.terminate()
        redis.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rate", type=float, default=100)
    parser.add_argument("--seconds", type=float, default=30)
    parser.add_argument("--instances", type=int, default=3)
    parser.add_argument("--sessions", type=int, default=30)
    args = parser.parse_args()
    result = asyncio.run(run(args))
    print(json.dumps(result, indent=2))
    out = ROOT / "bench" / "results" / "cluster-commands.json"
    out.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
