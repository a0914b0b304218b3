"""The documentation follows the code: every error code and op of the contract is in
docs/protocol.md, every log event the server's Swift code names is in docs/operating.md, and
each document's contents and links point at headings and files that exist. The flag
table is checked against --print-config in test_ops.py, the metric families against a
live /metrics in test_metrics.py."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from serverproc import REPO_ROOT

DOCS = ["README.md", "CONTRIBUTING.md", "docs/protocol.md", "docs/operating.md",
        "docs/architecture.md", "docs/testing.md", "docs/performance.md"]


def contract() -> dict:
    text = (REPO_ROOT / "Public" / "constants.js").read_text()
    return json.loads(re.search(r"Object\.freeze\((\{.*\})\);", text, re.S).group(1))


def section(doc: str, heading: str) -> str:
    """The text under `heading` up to the next heading of the same or a higher level."""
    text = (REPO_ROOT / doc).read_text()
    m = re.search(rf"^(#+) {re.escape(heading)}$", text, re.M)
    assert m, f"{doc} has no heading {heading!r}"
    level = len(m.group(1))
    return re.split(rf"^#{{1,{level}}} ", text[m.end():], flags=re.M)[0]


def slug(heading: str) -> str:
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    out, fenced = set(), False
    for line in path.read_text().split("\n"):
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and (m := re.match(r"^#{1,6} (.*)$", line)):
            out.add(slug(m.group(1)))
    return out


def test_every_error_code_has_a_row_in_the_protocol():
    """Each code of the contract's errorCodes has its own row in docs/protocol.md's table."""
    table = section("docs/protocol.md", "Error codes")
    for code in contract()["errorCodes"]:
        assert re.search(rf"^\| `{code}` \|", table, re.M), f"docs/protocol.md lacks error code {code}"


def test_every_op_is_shown_and_described_in_the_protocol():
    """Each op of the contract appears as a message and as a described bullet."""
    text = section("docs/protocol.md", "Client → server")
    for op in contract()["ops"]:
        assert f'{{"op":"{op}"' in text, f"no example of {op}"
        assert re.search(rf"^- \*\*`{op}`\*\*", text, re.M), f"no description of {op}"


def test_every_log_event_is_in_the_operating_table():
    """Every event name the server's Swift code logs has a row in docs/operating.md's Logs
    table."""
    table = section("docs/operating.md", "Logs")
    documented = set(re.findall(r"`([a-z][a-z0-9_]+)`", table))
    events = set()
    for path in (REPO_ROOT / "Sources").rglob("*.swift"):
        src = path.read_text()
        events |= set(re.findall(r'\b(?:log|Logger\.shared)\.(?:debug|info|warn|error)\(\s*"([a-z][a-z0-9_]*)"',
                                 src))
    assert len(events) > 20, f"found only {sorted(events)}: the pattern no longer matches the code"
    missing = sorted(e for e in events if e not in documented)
    assert not missing, f"docs/operating.md's Logs section lacks {missing}"


@pytest.mark.parametrize("doc", DOCS)
def test_contents_and_links_resolve(doc):
    """A document's contents list names its own headings, and every relative link points at
    a file that exists and, with #anchor, at a heading in it."""
    path = REPO_ROOT / doc
    text = path.read_text()
    if doc not in ("CONTRIBUTING.md",):
        assert "## Contents" in text, f"{doc} has no table of contents"
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"[a-z]+:", target):
            continue
        file, _, anchor = target.partition("#")
        dest = (path.parent / file).resolve() if file else path
        assert dest.exists(), f"{doc}: link to missing {target}"
        if anchor and dest.suffix == ".md":
            assert anchor in anchors(dest), f"{doc}: no heading for {target}"
