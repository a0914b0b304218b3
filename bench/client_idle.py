#!/usr/bin/env python3
"""What `countdown watch` (the CLI over CountdownClient's `changes()`) costs while it
waits: the share of one core it uses on an idle session and on a ticking one, each
through a pipe and on a terminal (a pty, where the line is redrawn every 80 ms), over
http and over https (a TLS front with a private CA's certificate, trusted with --cacert;
--system-trust instead leaves trust to the system's CAs, for a build without --cacert
on a machine that has the CA installed).

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
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "IntegrationTests" / "e2e"))
from tlskit import TLSFront, private_ca  # noqa: E402
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
    parser.add_argument("--schemes", default="http,https", help="http, https or both (comma)")
    parser.add_argument("--system-trust", metavar="DIR",
                        help="use the CA and certificate already made in DIR (ca.pem, cert.pem, "
                             "key.pem) and pass no --cacert")
    args = parser.parse_args()
    schemes = args.schemes.split(",")
    tls_dir = Path(args.system_trust or tempfile.mkdtemp(prefix="client-idle-tls-"))
    if args.system_trust:
        ca, cert, key = tls_dir / "ca.pem", tls_dir / "cert.pem", tls_dir / "key.pem"
    else:
        ca, cert, key = private_ca(tls_dir)

    server = subprocess.Popen([args.server, "--port", "0", "--public", str(REPO / "Public")],
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        line = server.stdout.readline()
        port = int(re.search(r":(\d+)/$", line.strip()).group(1))
        # Fresh names: a server started with a database of its own may remember the last run.
        idle, tick = (f"bench-{kind}-{os.getpid()}" for kind in ("idle", "tick"))
        command(port, tick, {"op": "start", "seconds": 86400})
        front = TLSFront(cert, key, ("127.0.0.1", port))
        watches = {}
        ptys = []
        for scheme in schemes:
            for session in (idle, tick):
                url = f"http://127.0.0.1:{port}/?session={session}"
                trust = []
                if scheme == "https":
                    url = f"https://127.0.0.1:{front.port}/?session={session}"
                    trust = [] if args.system_trust else ["--cacert", str(ca)]
                watches[(scheme, session, "pipe")] = subprocess.Popen(
                    [args.countdown, "watch", url, *trust], stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
                parent, child = pty.openpty()
                watches[(scheme, session, "terminal")] = subprocess.Popen(
                    [args.countdown, "watch", url, *trust], stdout=child, stderr=subprocess.DEVNULL,
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
        for (scheme, session, output), proc in watches.items():
            used = cpu_seconds(proc.pid) - start[(scheme, session, output)]
            alive = proc.poll() is None
            result["watches"].append({
                "scheme": scheme, "session": "idle" if session == idle else "ticking",
                "output": output, "cpu_seconds": round(used, 2),
                "core_percent": round(100 * used / span, 2), "alive": alive})
        for proc in watches.values():
            proc.kill()
            proc.wait()
        for fd in ptys:
            os.close(fd)
        front.close()
        result["tls_handshakes"] = front.handshakes
    finally:
        server.kill()
        server.wait()

    print(f"countdown watch over {result['seconds']} s ({args.countdown})")
    print("| scheme | session | output | CPU s | % of a core |")
    print("|---|---|---|---|---|")
    for w in result["watches"]:
        print(f"| {w['scheme']} | {w['session']} | {w['output']} | {w['cpu_seconds']} | "
              f"{w['core_percent']} |" + ("" if w["alive"] else " (exited)"))
    print(json.dumps(result))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
