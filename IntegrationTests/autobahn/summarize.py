#!/usr/bin/env python3
"""Judges an Autobahn|Testsuite fuzzingclient report (index.json).

Usage: summarize.py INDEX_JSON EXPECTED_TXT SUMMARY_OUT

A case passes when both its behaviour and its close behaviour are OK or
INFORMATIONAL. Any other outcome (NON-STRICT, UNIMPLEMENTED, FAILED, FAILED BY
CLIENT, WRONG CODE, UNCLEAN, ...) passes only when EXPECTED_TXT lists that case
with that exact outcome and a reason; otherwise it fails the run.

EXPECTED_TXT lines: `case | outcome; outcome... | reason`, where an outcome is
`BEHAVIOR/CLOSE BEHAVIOR`, for example `OK/FAILED BY CLIENT`. `#` starts a
comment. A listed case may also come out OK: several depend on timing.

Writes a small, stable text summary (no timings) to SUMMARY_OUT, prints one
line per case that is not OK, and ends with `autobahn: N passed, M failed`.
Exit status: 0 when nothing unexpected happened, 1 otherwise.
"""

import collections
import json
import sys

PASSING = {"OK", "INFORMATIONAL"}


def case_key(case_id):
    return tuple(int(part) for part in case_id.split("."))


def read_expected(path):
    expected = {}
    with open(path, encoding="utf-8") as handle:
        for number, raw in enumerate(handle, 1):
            line = raw.split("#", 1)[0].strip()
            if not line:
                continue
            parts = [part.strip() for part in line.split("|")]
            if len(parts) != 3 or not parts[0] or not parts[1] or not parts[2]:
                sys.exit(f"{path}:{number}: expected `case | outcomes | reason`")
            outcomes = set()
            for outcome in parts[1].split(";"):
                behavior, _, close = outcome.strip().partition("/")
                if not close:
                    sys.exit(f"{path}:{number}: outcome {outcome!r} is not BEHAVIOR/CLOSE")
                outcomes.add((behavior.strip(), close.strip()))
            expected[parts[0]] = (outcomes, parts[2])
    return expected


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    index_path, expected_path, summary_path = sys.argv[1:]
    with open(index_path, encoding="utf-8") as handle:
        index = json.load(handle)
    if len(index) != 1:
        sys.exit(f"{index_path}: expected one agent, found {sorted(index)}")
    agent, cases = next(iter(index.items()))
    expected = read_expected(expected_path)

    counts = collections.Counter()
    passed = failed = allowed = 0
    lines = []
    for case_id in sorted(cases, key=case_key):
        result = cases[case_id]
        outcome = (result["behavior"], result["behaviorClose"])
        counts["%s/%s" % outcome] += 1
        close_code = result.get("remoteCloseCode")
        summary_line = "%-8s %-14s %-17s %s" % (case_id, outcome[0], outcome[1], close_code)
        lines.append(summary_line)
        if outcome[0] in PASSING and outcome[1] in PASSING:
            passed += 1
            continue
        listed = expected.get(case_id)
        if listed and outcome in listed[0]:
            passed += 1
            allowed += 1
            print("autobahn: %-7s %s/%s  allowed: %s" % (case_id, outcome[0], outcome[1], listed[1]))
        else:
            failed += 1
            print("autobahn: %-7s %s/%s  UNEXPECTED (close code %s, see %s)"
                  % (case_id, outcome[0], outcome[1], close_code, result.get("reportfile")))

    for case_id in sorted(set(expected) - set(cases), key=case_key):
        print(f"autobahn: {case_id} is listed in {expected_path} but did not run")

    header = [
        "Autobahn|Testsuite 0.8.2 fuzzingclient against countdown-server --autobahn-echo (/echo)",
        "libwebsockets 4.1.6 (Debian), cases 12.* and 13.* (compression) excluded.",
        "Written by scripts/autobahn from artifacts/autobahn/report/index.json.",
        "Non-OK cases and why: IntegrationTests/autobahn/README.md.",
        "",
        "%d cases: %s" % (len(cases), ", ".join(
            "%d %s" % (count, name) for name, count in sorted(counts.items(), key=lambda kv: -kv[1]))),
        "",
        "%-8s %-14s %-17s %s" % ("case", "behavior", "close behavior", "close code"),
    ]
    with open(summary_path, "w", encoding="utf-8") as handle:
        handle.write("\n".join(header + lines) + "\n")

    print("autobahn: %d cases against agent %s: %d OK or INFORMATIONAL, %d documented non-OK "
          "(%s), %d unexpected" % (len(cases), agent, passed - allowed, allowed, expected_path, failed))
    print("autobahn: %d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
