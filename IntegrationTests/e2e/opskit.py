"""Helpers for the operating tests: scrape /metrics with prometheus_client's own
parser, read the server's JSON log lines from its stderr, and its memory from /proc."""

from __future__ import annotations

import json
import time

from prometheus_client.parser import text_string_to_metric_families

from cdclient import http_get


def scrape(host: str, port: int) -> dict[tuple[str, frozenset], float]:
    """Every sample of GET /metrics, by (sample name, labels). Fails on a parse error."""
    status, headers, body = http_get(host, port, "/metrics")
    assert status == 200, (status, body[:200])
    assert headers.get("content-type", "").startswith("text/plain; version=0.0.4"), headers
    samples: dict[tuple[str, frozenset], float] = {}
    for family in text_string_to_metric_families(body.decode("utf-8")):
        for sample in family.samples:
            key = (sample.name, frozenset(sample.labels.items()))
            assert key not in samples, f"duplicate sample {key}"
            samples[key] = sample.value
    return samples


def value(samples: dict, name: str, **labels: str) -> float:
    """One sample's value; a labelled counter not yet rendered counts as 0."""
    return samples.get((name, frozenset(labels.items())), 0.0)


def delta(before: dict, after: dict, name: str, **labels: str) -> float:
    return value(after, name, **labels) - value(before, name, **labels)


def wait_scrape(host: str, port: int, ready, timeout: float = 5.0, what: str = "") -> dict:
    """Scrapes until `ready(samples)` holds: counters of closes move when the server
    has finished its side of the close, a moment after the client's."""
    deadline = time.monotonic() + timeout
    while True:
        samples = scrape(host, port)
        if ready(samples):
            return samples
        if time.monotonic() > deadline:
            raise AssertionError(f"/metrics never showed {what or ready}")
        time.sleep(0.02)


def log_lines(server) -> list[dict]:
    """The server's stderr as JSON objects; every line must parse."""
    lines = []
    text = server.stderr()
    # A line still being written has no newline yet: it is read next time.
    for raw in text[: text.rfind("\n") + 1].splitlines():
        if not raw.strip():
            continue
        try:
            obj = json.loads(raw)
        except ValueError as exc:
            raise AssertionError(f"stderr line is not JSON: {raw!r}") from exc
        assert isinstance(obj, dict) and {"ts", "level", "event"} <= obj.keys(), raw
        lines.append(obj)
    return lines


def wait_log(server, pred, timeout: float = 5.0, what: str = "") -> dict:
    """The first log line for which `pred(line)` holds. Lines are written by a
    background queue, so one may land a moment after the event it reports."""
    deadline = time.monotonic() + timeout
    while True:
        for line in log_lines(server):
            if pred(line):
                return line
        if time.monotonic() > deadline:
            raise AssertionError(f"no log line {what}; stderr:\n{server.stderr()}")
        time.sleep(0.02)


def wait_event(server, event: str, timeout: float = 5.0, **fields) -> dict:
    return wait_log(server, lambda l: l["event"] == event and all(l.get(k) == v for k, v in fields.items()),
                    timeout, f"{event} {fields}")


def rss_kb(pid: int) -> int:
    """The process's resident set size in KiB (VmRSS in /proc/<pid>/status)."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError(f"no VmRSS for pid {pid}")
