#!/usr/bin/env python3
"""Cluster mode: 1,000 finishes within a second across 2 instances, each a
`session.finished` webhook, change-to-delivery latency.

    bench/cluster_webhooks.py                        # 1000 finishes over 1 s, 2 instances
    bench/cluster_webhooks.py --finishes 1000 --spread-ms 1000 --instances 2

Starts its own redis-server on a free loopback port (no persistence), the
receiver bench/hookrecv.py (204 at once; it reports the lag from each event's
change time to its arrival), and the built server (release if built, else debug;
or $COUNTDOWN_SERVER_BIN) N times with --redis and --webhook. Starts the sessions
over HTTP, spread over the instances, each with an `until` deadline, the
deadlines spread evenly over --spread-ms; no command finishes them, so each
finish is recorded by countdown_v3_due and delivered by one instance. Reports
the receiver's figures (p50/p99/max lag, repeats) and Redis's commands and CPU
over the run. Writes JSON to bench/results/cluster-webhooks.json.
"""

from __future__ import annotations

import argparse
import base64
import http.client
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "IntegrationTests" / "e2e"))

from serverproc import start_server  # noqa: E402
from test_cluster import Redis  # noqa: E402


def redis_stats(redis: Redis) -> tuple[int, float]:
    """Commands processed so far and CPU seconds used so far, from INFO."""
    info = dict(line.split(":", 1) for line in redis.command("INFO").splitlines() if ":" in line)
    return int(info["total_commands_processed"]), float(info["used_cpu_sys"]) + float(info["used_cpu_user"])


def start_sessions(servers, count: int, connections: int, base_ms: float, spread_ms: int) -> None:
    def send(index: int) -> None:
        server = servers[index % len(servers)]
        conn = http.client.HTTPConnection(server.host, server.port, timeout=30)
        try:
            for n in range(index, count, connections):
                until = int(base_ms + n * spread_ms / count)
                conn.request("POST", f"/api/v1/sessions/hook-{n}/commands",
                             body=json.dumps({"op": "start", "until": until}),
                             headers={"Content-Type": "application/json"})
                response = conn.getresponse()
                body = response.read()
                if response.status != 200:
                    raise RuntimeError(f"start answered {response.status} {body[:80]!r}")
        finally:
            conn.close()

    threads = [threading.Thread(target=send, args=(i,)) for i in range(connections)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def run(args) -> dict:
    release = ROOT / ".build" / "release" / "countdown-server"
    if "COUNTDOWN_SERVER_BIN" not in os.environ and release.exists():
        os.environ["COUNTDOWN_SERVER_BIN"] = str(release)
    secret = Path(tempfile.mkdtemp(prefix="bench-hook-")) / "secret"
    secret.write_text("whsec_" + base64.b64encode(os.urandom(32)).decode())
    redis = Redis()
    receiver = subprocess.Popen([sys.executable, str(ROOT / "bench" / "hookrecv.py")],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    servers = []
    try:
        port = json.loads(receiver.stderr.readline().split(" ", 1)[1])["port"]
        flags = ("--redis", redis.url, "--webhook", f"http://127.0.0.1:{port}/hook",
                 "--webhook-secret-file", str(secret), "--webhook-events", "session.finished",
                 "--max-commands-per-second", "100000", "--log-level", "warn")
        servers = [start_server(*flags) for _ in range(args.instances)]
        commands0, cpu0 = redis_stats(redis)
        base = time.time() * 1000 + args.lead_ms
        start_sessions(servers, args.finishes, args.connections, base, args.spread_ms)
        if time.time() * 1000 >= base:
            raise RuntimeError("the starts took past the first deadline: raise --lead-ms")

        def arrived() -> int:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            try:
                conn.request("GET", "/count")
                return int(conn.getresponse().read())
            finally:
                conn.close()

        while arrived() < args.finishes and time.time() * 1000 < base + args.spread_ms + 60_000:
            time.sleep(0.2)  # polling another process's count: no event to await here
        commands1, cpu1 = redis_stats(redis)
        receiver.send_signal(signal.SIGTERM)
        report = json.loads(receiver.communicate(timeout=30)[0])
    finally:
        for server in servers:
            server.terminate()
        if receiver.poll() is None:
            receiver.kill()
        redis.stop()
    return {"binary": os.environ.get("COUNTDOWN_SERVER_BIN", "debug"), "instances": args.instances,
            "finishes": args.finishes, "spread_ms": args.spread_ms, **report,
            "redis_commands": commands1 - commands0, "redis_cpu_s": round(cpu1 - cpu0, 3)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--finishes", type=int, default=1000)
    parser.add_argument("--spread-ms", type=int, default=1000)
    parser.add_argument("--lead-ms", type=int, default=4000, help="from the first start to the first deadline")
    parser.add_argument("--instances", type=int, default=2)
    parser.add_argument("--connections", type=int, default=20)
    result = run(parser.parse_args())
    print(json.dumps(result, indent=2))
    out = ROOT / "bench" / "results" / "cluster-webhooks.json"
    out.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
