#!/usr/bin/env python3
"""What `countdown watch` (the CLI over CountdownClient's `changes()`) costs while it
waits: the share of one core it uses on an idle session and on a ticking one, each
through a pipe and on a terminal (a pty, where the line is redrawn every 80 ms).

Starts the built server on a free port, makes the ticking session (a day's countdown,
one patch a second), then runs the four watches at once for --seconds and reads each
process's utime + stime from /proc/PID/stat after a settling second and at the end.
Prints a table and one JSON line; --json writes the JSON to a file.

    swift build && python3 bench/client_idle.py --seconds 60
    python3 bench/client_idle.py --seconds 10 --countdown /path/to/older/countdown
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import pty
import re
import subprocess
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
HZ = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / HZ


def command(port: int, session: str, body: dict) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    conn.request("POST", f"/api/v1/sessions/{session}/commands", json.dumps(body),
                 {"Content-Type": "application/json"})
    answer = conn.getresponse()
    assert answer.status == 200, (answer.status, answer.read())
    conn.close()


def drain(fd: int) -> None:
    """Reads a pty's output until it closes, so the watch never blocks on a full terminal."""
    try:
        while os.read(fd, 65536):
            pass
    except OSError:
        pass


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--server", default=str(REPO / ".build" / "debug" / "countdown-server"))
    parser.add_argument("--countdown", default=str(REPO / ".build" / "debug" / "countdown"))
    parser.add_argument("--json", help="also write the result here")
    args = parser.parse_args()

    server = subprocess.Popen([args.server, "--port", "0", "--public", str(REPO / "Public")],
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        line = server.stdout.readline()
        port = int(re.search(r":(\d+)/$", line.strip()).group(1))
        # Fresh names: a server started with a database of its own may remember the last run.
        idle, tick = (f"bench-{kind}-{os.getpid()}" for kind in ("idle", "tick"))
        command(port, tick, {"op": "start", "seconds": 86400})
        watches = {}
        ptys = []
        for session in (idle, tick):
            url = f"http://127.0.0.1:{port}/?session={session}"
            watches[(session, "pipe")] = subprocess.Popen(
                [args.countdown, "watch", url], stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
            parent, child = pty.openpty()
            watches[(session, "terminal")] = subprocess.Popen(
                [args.countdown, "watch", url], stdout=child, stderr=subprocess.DEVNULL,
                stdin=subprocess.DEVNULL)
            os.close(child)
            threading.Thread(target=drain, args=(parent,), daemon=True).start()
            ptys.append(parent)
        time.sleep(1)  # connected, first snapshot drawn
        start = {k: cpu_seconds(p.pid) for k, p in watches.items()}
        began = time.monotonic()
        time.sleep(args.seconds)
        span = time.monotonic() - began
        result = {"seconds": round(span, 1), "countdown": args.countdown, "watches": []}
        for (session, output), proc in watches.items():
            used = cpu_seconds(proc.pid) - start[(session, output)]
            result["watches"].append({
                "session": "idle" if session == idle else "ticking", "output": output,
                "cpu_seconds": round(used, 2), "core_percent": round(100 * used / span, 2)})
        for proc in watches.values():
            proc.kill()
            proc.wait()
        for fd in ptys:
            os.close(fd)
    finally:
        server.kill()
        server.wait()

    print(f"countdown watch over {result['seconds']} s ({args.countdown})")
    print("| session | output | CPU s | % of a core |")
    print("|---|---|---|---|")
    for w in result["watches"]:
        print(f"| {w['session']} | {w['output']} | {w['cpu_seconds']} | {w['core_percent']} |")
    print(json.dumps(result))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
