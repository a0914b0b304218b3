#!/usr/bin/env python3
"""When the stage's level changes reach viewers, on one instance and on two through Redis.

Each round starts a 4 s run with warnAtSeconds 3, dangerAtSeconds 2 and overtime, watched
on every instance, and records when the patch that turns the level to warning, danger
and over arrives, against the moment it is due (endsAt − 3 s, endsAt − 2 s, endsAt), on
each instance's own clock (its serverTime, offset by the ping with the shortest round
trip), and how far apart the instances' patches arrive. Prints medians and maxima and
writes them to bench/results/level-timing.json, replacing the last run's.

    swift build -c release && python3 bench/level_timing.py --rounds 5
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "IntegrationTests" / "e2e"))

from cdclient import Client  # noqa: E402
from serverproc import start_server  # noqa: E402
from test_cluster import Redis  # noqa: E402
from test_cluster_clock import clock_offset  # noqa: E402

LEVELS = {"warning": 3000, "danger": 2000, "over": 0}


async def one_round(servers, offsets) -> dict:
    session = f"lv-{uuid.uuid4().hex[:12]}"
    clients = [await Client.connect(s.ws_url(session), name=str(n)) for n, s in enumerate(servers)]
    try:
        await clients[0].command({"op": "start", "seconds": 4, "warnAtSeconds": 3, "dangerAtSeconds": 2,
                                  "overtime": True})
        ends = clients[0].state["endsAt"]
        await asyncio.gather(*(c.wait_state(lambda s: s.get("label") == "+1", timeout=10) for c in clients))
        late: dict[str, list[float]] = {level: [] for level in LEVELS}
        for client, offset in zip(clients, offsets):
            for arrival, message in client.log:
                level = message.get("patch", {}).get("level") if message["type"] == "patch" else None
                if level in LEVELS:
                    late[level].append(arrival + offset - (ends - LEVELS[level]))
        return late
    finally:
        for client in clients:
            await client.close()


async def measure(servers, rounds: int) -> dict:
    offsets = [await clock_offset(s, f"lv-ping-{n}") for n, s in enumerate(servers)]
    lateness, apart = [], []
    for _ in range(rounds):
        late = await one_round(servers, offsets)
        for values in late.values():
            assert len(values) == len(servers), late
            lateness.extend(values)
            apart.append(max(values) - min(values))
    return {"instances": len(servers), "rounds": rounds, "changes": len(lateness),
            "late_ms_median": round(statistics.median(lateness), 2), "late_ms_max": round(max(lateness), 2),
            "late_ms_min": round(min(lateness), 2),
            "apart_ms_median": round(statistics.median(apart), 2), "apart_ms_max": round(max(apart), 2)}


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    os.environ.setdefault("COUNTDOWN_SERVER_BIN", str(REPO / ".build" / "release" / "countdown-server"))
    results = {}
    single = start_server()
    try:
        results["one instance"] = await measure([single], args.rounds)
    finally:
        single.stop_and_check()
    redis = Redis()
    pair = [start_server("--redis", redis.url) for _ in range(2)]
    try:
        results["two instances, one Redis"] = await measure(pair, args.rounds)
    finally:
        for server in pair:
            server.stop_and_check()
        redis.stop()
    for name, row in results.items():
        print(f"{name}: {row['changes']} level changes, late {row['late_ms_median']} ms median "
              f"({row['late_ms_min']}..{row['late_ms_max']}), instances apart {row['apart_ms_median']} ms "
              f"median, {row['apart_ms_max']} ms max")
    out = REPO / "bench" / "results" / "level-timing.json"
    out.write_text(json.dumps({"meta": {"timestamp": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                                        "nproc": os.cpu_count(), "loadavg": os.getloadavg(),
                                        "server_bin": os.environ["COUNTDOWN_SERVER_BIN"]},
                               "results": results}, indent=1) + "\n")
    print(f"wrote {out.relative_to(REPO)}")


if __name__ == "__main__":
    asyncio.run(main())
