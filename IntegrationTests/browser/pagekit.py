"""Helpers for the browser tests: starting Chromium, reading the page, and a
protocol-level observer that tells the truth about a session.

The observer is an independent client (Python `websockets`, sync API) on the same
session. It is the "server's remaining time" the page is compared with: the server
and the browser run on this machine, so the server's clock is time.time().
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import struct
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

CHROMIUM_NAMES = ("chromium", "chromium-browser")
CHROMEDRIVER = "/usr/bin/chromedriver"
SUBPROTOCOL = "countdown.v1"
FINISHED_EN = "Countdown finished"
FINISHED_ZH = "倒計時結束"

DESKTOP = {"name": "desktop", "width": 1280, "height": 800, "mobile": False, "dpr": 1}
PHONE = {"name": "phone", "width": 390, "height": 844, "mobile": True, "dpr": 1}


# -- tools ------------------------------------------------------------------------------
@dataclass
class Tools:
    chromium: str
    chromedriver: str


def check_tools() -> Tools:
    """Fail (never skip) with a clear message when something is missing."""
    hint = "run scripts/setup-browser (apt: chromium chromium-driver fonts-noto-cjk; pip: selenium==4.51.0)"
    chromium = next((p for p in map(shutil.which, CHROMIUM_NAMES) if p), None)
    if not chromium:
        pytest.fail(f"Chromium is not installed (no `chromium` on PATH): {hint}", pytrace=False)
    if not os.access(CHROMEDRIVER, os.X_OK):
        pytest.fail(f"chromedriver is missing at {CHROMEDRIVER}: {hint}", pytrace=False)
    try:
        import selenium  # noqa: F401
    except ImportError:
        pytest.fail(f"the Python package selenium is not installed: {hint}", pytrace=False)
    return Tools(chromium, CHROMEDRIVER)


def make_driver(tools: Tools, *, performance_log: bool = False, extra_args: tuple[str, ...] = ()):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    os.environ["SE_OFFLINE"] = "true"  # never let selenium-manager fetch a driver
    opts = webdriver.ChromeOptions()
    opts.binary_location = tools.chromium
    for arg in (
        "--headless=new",
        "--no-sandbox",  # the tests run as root
        "--disable-dev-shm-usage",
        "--disable-gpu",
        "--window-size=1280,800",
        "--lang=en-US",
        "--hide-scrollbars",
        "--no-first-run",
        "--disable-extensions",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        *extra_args,
    ):
        opts.add_argument(arg)
    opts.add_experimental_option("prefs", {"intl.accept_languages": "en-US,en"})
    prefs = {"browser": "ALL"}
    if performance_log:
        prefs["performance"] = "ALL"
    opts.set_capability("goog:loggingPrefs", prefs)
    driver = webdriver.Chrome(options=opts, service=Service(executable_path=tools.chromedriver))
    driver.set_page_load_timeout(15)
    driver.set_script_timeout(5)
    return driver


# -- console ------------------------------------------------------------------------------
@dataclass
class ConsoleEntry:
    test: str
    level: str
    message: str
    allowed_reason: str = ""  # why this entry is expected; empty means it counts


CONSOLE: list[ConsoleEntry] = []  # every console entry of the whole run, per test

# The one expected console error: Chromium logs each failed reconnect attempt while the
# server is deliberately down (test 3). Only entries drained during that outage may match.
WS_FAILED_RE = re.compile(r"WebSocket connection to 'ws://[^']+/ws/[^']*' failed")


def drain_console(driver, test: str, *, outage: bool = False) -> list[ConsoleEntry]:
    """Moves the browser's console log (read and cleared by get_log) into CONSOLE."""
    out = []
    for e in driver.get_log("browser"):
        entry = ConsoleEntry(test, e.get("level", ""), e.get("message", ""))
        if outage and entry.level == "SEVERE" and WS_FAILED_RE.search(entry.message):
            entry.allowed_reason = "reconnect attempt during the deliberate server outage"
        out.append(entry)
    CONSOLE.extend(out)
    return out


def is_problem(entry: ConsoleEntry) -> bool:
    if entry.allowed_reason:
        return False
    text = entry.message.lower()
    return entry.level == "SEVERE" or "content security policy" in text or "content-security-policy" in text


class BrowserPool:
    """Three browsers at most, started lazily, reused across tests (each costs ~1 s)."""

    def __init__(self, tools: Tools):
        self.tools = tools
        self.drivers: dict[int, object] = {}

    def __call__(self, i: int):
        if i not in self.drivers:
            self.drivers[i] = make_driver(self.tools)
        return self.drivers[i]

    def reset(self, test: str) -> None:
        for d in self.drivers.values():
            try:
                d.get("about:blank")
                d.execute_cdp_cmd("Emulation.setEmulatedMedia", {"media": "", "features": []})
                d.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})
            finally:
                drain_console(d, test)

    def close(self) -> None:
        for d in self.drivers.values():
            try:
                d.quit()
            except Exception:  # noqa: BLE001 - best effort at teardown
                pass


# -- the page -----------------------------------------------------------------------------
READ_JS = """
const b = document.getElementById('start');
const sp = b.querySelector('.spinner');
const st = getComputedStyle(sp);
return {
  label: document.getElementById('label').textContent,
  words: document.getElementById('label-words').textContent,
  busy: b.getAttribute('aria-busy'),
  // Takes no press: disabled (a viewer), or aria-disabled (a controller's
  // button keeps the focus while it waits).
  disabled: b.disabled || b.getAttribute('aria-disabled') === 'true',
  conn: [...document.documentElement.classList].find(c => c.startsWith('state-')) || '',
  status: document.getElementById('status').textContent,
  epoch: document.documentElement.dataset.epoch || '',
  spinnerDisplay: st.display,
  textVisibility: getComputedStyle(b.querySelector('.start-text')).visibility,
  startText: b.querySelector('.start-text').textContent,
  // The run's controls and the start fields that are on screen now.
  shown: ['mode', 'seconds', 'until', 'pause', 'minus', 'plus', 'cancel']
    .filter((id) => document.getElementById(id).getClientRects().length > 0),
};
"""


def page_url(server, session: str, **params) -> str:
    q = "&".join(f"{k}={v}" for k, v in {"session": session, **params}.items())
    return f"{server.http_base}/?{q}"


def read(driver) -> dict:
    return driver.execute_script(READ_JS)


def read_timed(driver) -> tuple[dict, float, float]:
    """The page's state with the wall-clock interval (ms) in which it was read."""
    t0 = time.time() * 1000
    r = read(driver)
    t1 = time.time() * 1000
    return r, t0, t1


def wait(driver, timeout: float, cond, what: str, poll: float = 0.05):
    from selenium.common.exceptions import TimeoutException
    from selenium.webdriver.support.ui import WebDriverWait

    try:
        return WebDriverWait(driver, timeout, poll_frequency=poll).until(cond)
    except TimeoutException:
        pytest.fail(f"timed out after {timeout}s waiting for: {what}; page: {read(driver)}")


def open_page(driver, server, session: str, **params) -> dict:
    """Loads the page and waits until it is live with the session's snapshot."""
    driver.get(page_url(server, session, **params))
    wait(driver, 5, lambda d: read(d)["conn"] == "state-live", "the page to be live")
    return read(driver)


def set_seconds(driver, seconds: int) -> None:
    from selenium.webdriver.common.by import By

    box = driver.find_element(By.ID, "seconds")
    box.clear()
    box.send_keys(str(seconds))


def press_start(driver) -> None:
    click(driver, "start")


def cancel_run(driver) -> None:
    """Cancels the way a host must: Cancel, then Yes in "End for everyone?"."""
    from selenium.webdriver.common.by import By

    click(driver, "cancel")
    wait(driver, 2, lambda d: d.find_element(By.ID, "confirm-yes").is_displayed(), "End for everyone?")
    click(driver, "confirm-yes")


def click(driver, element_id: str) -> None:
    from selenium.webdriver.common.by import By

    driver.find_element(By.ID, element_id).click()


def clock_seconds(label: str) -> int | None:
    """The whole seconds a clock-style label shows ("5", "1:05", "1:02:05",
    "1d 02:03:04"), or None for words."""
    m = re.fullmatch(r"(?:(\d+)d )?(?:(\d+):)?(?:(\d+):)?(\d+)", label)
    if not m:
        return None
    days, a, b, secs = m.groups()
    # With one colon part it is minutes; with two, hours then minutes.
    hours, minutes = (a, b) if b is not None else (None, a)
    return ((int(days or 0) * 24 + int(hours or 0)) * 60 + int(minutes or 0)) * 60 + int(secs)


def clock_label(seconds: int) -> str:
    """The label a correct page shows for `seconds` (the issue's clock format),
    written independently of the page's own code."""
    d, rest = divmod(seconds, 86400)
    h, rest = divmod(rest, 3600)
    m, sec = divmod(rest, 60)
    if seconds < 60:
        return str(seconds)
    if seconds < 3600:
        return f"{m}:{sec:02d}"
    if seconds < 86400:
        return f"{h}:{m:02d}:{sec:02d}"
    return f"{d}d {h:02d}:{m:02d}:{sec:02d}"


def rect(driver, selector: str) -> dict:
    return driver.execute_script(
        "const r = document.querySelector(arguments[0]).getBoundingClientRect();"
        "return {x: r.x, y: r.y, w: r.width, h: r.height};",
        selector,
    )


def emulate_viewport(driver, size: dict) -> None:
    driver.execute_cdp_cmd(
        "Emulation.setDeviceMetricsOverride",
        {
            "width": size["width"],
            "height": size["height"],
            "deviceScaleFactor": size["dpr"],
            "mobile": size["mobile"],
        },
    )


def png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()[:24]
    assert data[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    return struct.unpack(">II", data[16:24])


# -- accessibility audit -----------------------------------------------------------------
# axe-core as bundled by PyPI's axe-selenium-python, installed by scripts/setup-browser
# into a folder of its own (see there why); nothing is downloaded at test time.
AXE_PACKAGE_VERSION = "3.0.0"
AXE_JS = (Path(__file__).resolve().parent.parent.parent / ".cache"
          / f"axe-selenium-python-{AXE_PACKAGE_VERSION}" / "axe_selenium_python"
          / "node_modules" / "axe-core" / "axe.min.js")
AXE_TAGS = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa", "best-practice"]

AXE_RUN_JS = """
const done = arguments[arguments.length - 1];
axe.run(document, {runOnly: {type: 'tag', values: arguments[0]}, resultTypes: ['violations']})
  .then((r) => done({
    version: axe.version,
    rules: r.passes.length + r.violations.length + r.incomplete.length + r.inapplicable.length,
    violations: r.violations.map((v) => ({
      id: v.id, impact: v.impact, help: v.help,
      nodes: v.nodes.map((n) => n.target.join(' ') + ': ' + n.failureSummary),
    })),
  }), (e) => done({error: String(e)}));
"""


def axe_audit(driver) -> dict:
    """Runs axe-core in the page (injected from the installed package) with AXE_TAGS.
    Returns {version, rules, violations}; fails when axe is missing or errs."""
    if not AXE_JS.is_file():
        pytest.fail(f"axe-core is not installed ({AXE_JS}): run scripts/setup-browser", pytrace=False)
    if not driver.execute_script("return typeof axe !== 'undefined'"):
        driver.execute_script(AXE_JS.read_text(encoding="utf-8"))
    driver.set_script_timeout(30)
    try:
        result = driver.execute_async_script(AXE_RUN_JS, AXE_TAGS)
    finally:
        driver.set_script_timeout(5)
    assert "error" not in result, f"axe failed: {result}"
    return result


def format_violations(violations: list[dict]) -> str:
    return "\n".join(f"  {v['id']} ({v['impact']}): {v['help']}\n    " + "\n    ".join(v["nodes"])
                     for v in violations)


# -- the truth ------------------------------------------------------------------------------
def merge_patch(target, patch):
    if not isinstance(patch, dict):
        return patch
    out = dict(target) if isinstance(target, dict) else {}
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = merge_patch(out.get(k), v)
    return out


@dataclass
class Observer:
    """A protocol client on the session, in a background thread."""

    url: str
    state: dict | None = None
    epoch: str | None = None
    replies: list = field(default_factory=list)
    closed: bool = False
    phases: list = field(default_factory=list)  # every phase seen, in order, repeats folded

    def __post_init__(self):
        from contextlib import ExitStack

        from websockets.sync.client import connect

        self._stack = ExitStack()  # websockets >= 17.1 wants connect() used as a context
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._ws = self._stack.enter_context(connect(self.url, subprotocols=[SUBPROTOCOL], open_timeout=5))
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        self.wait_for(lambda s: s is not None, 5, "the observer's snapshot")

    def _run(self):
        try:
            for raw in self._ws:
                msg = json.loads(raw)
                with self._changed:
                    if msg["type"] == "snapshot":
                        self.state, self.epoch = msg["state"], msg.get("epoch")
                    elif msg["type"] == "patch":
                        self.state = merge_patch(self.state, msg["patch"])
                        self.state.setdefault("endsAt", None)
                    else:
                        self.replies.append(msg)
                    phase = (self.state or {}).get("phase")
                    if phase and (not self.phases or self.phases[-1] != phase):
                        self.phases.append(phase)
                    self._changed.notify_all()
        except Exception:  # noqa: BLE001 - the connection ended (server stopped)
            pass
        with self._changed:
            self.closed = True
            self._changed.notify_all()

    def wait_for(self, pred, timeout: float, what: str) -> dict:
        deadline = time.monotonic() + timeout
        with self._changed:
            while not pred(self.state):
                left = deadline - time.monotonic()
                if left <= 0 or self.closed:
                    pytest.fail(f"observer: timed out waiting for {what}; state {self.state}")
                self._changed.wait(left)
            return dict(self.state)

    def snapshot(self) -> dict:
        with self._lock:
            return dict(self.state or {})

    def start(self, seconds: int, **extra) -> None:
        self._ws.send(json.dumps({"op": "start", "seconds": seconds, **extra}))
        self.wait_for(lambda s: s and s["phase"] == "running", 3, "the run to start")

    def command(self, op: str, **fields) -> dict:
        """Sends a command with a fresh id and returns its ack or error."""
        with self._lock:
            self._next_id = getattr(self, "_next_id", 0) + 1
            cid = self._next_id
        self._ws.send(json.dumps({"op": op, **fields, "id": cid}))
        deadline = time.monotonic() + 3
        with self._changed:
            while True:
                reply = next((r for r in self.replies if r.get("id") == cid), None)
                if reply is not None:
                    return reply
                left = deadline - time.monotonic()
                if left <= 0 or self.closed:
                    pytest.fail(f"observer: no reply to {op}; state {self.state}")
                self._changed.wait(left)

    def remaining_s(self, at_ms: float) -> float | None:
        """The server's remaining time (fractional seconds) at wall time at_ms."""
        s = self.snapshot()
        if s.get("phase") != "running" or s.get("endsAt") is None:
            return None
        return (s["endsAt"] - at_ms) / 1000.0

    def close(self) -> None:
        try:
            self._stack.close()
        except Exception:  # noqa: BLE001 - the server may already be gone
            pass


def right_seconds(endsAt: float, t0: float, t1: float) -> set[int]:
    """The whole seconds a correct page may show if read between t0 and t1 (ms)."""
    return {max(1, math.ceil((endsAt - t) / 1000)) for t in (t0, t1)}
