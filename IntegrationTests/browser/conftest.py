"""Fixtures for the real-browser tests: Debian's headless Chromium driven by selenium
through the local chromedriver (SE_OFFLINE=true: selenium never downloads anything),
against the built countdown-server.

Nothing here skips. A missing browser, driver or selenium fails every test with a
message saying how to install them (scripts/setup-browser).
"""

from __future__ import annotations

import os
import shutil
import sys
import time
import uuid
from pathlib import Path

import pytest

BROWSER_DIR = Path(__file__).resolve().parent
REPO_ROOT = BROWSER_DIR.parent.parent
sys.path.insert(0, str(BROWSER_DIR))
sys.path.insert(0, str(REPO_ROOT / "IntegrationTests" / "e2e"))  # serverproc.py: start the built binary

from serverproc import start_server  # noqa: E402

import pagekit  # noqa: E402


@pytest.fixture(scope="session")
def browser_tools():
    """The browser, its driver and selenium, or a clear failure."""
    return pagekit.check_tools()


@pytest.fixture(scope="session")
def server():
    """One server (default settings, the repo's Public/) for the whole browser suite."""
    srv = start_server()
    yield srv
    srv.stop_and_check()


@pytest.fixture(scope="session")
def pool(browser_tools):
    """Up to three long-lived browsers, started on first use and reused by every test."""
    p = pagekit.BrowserPool(browser_tools)
    yield p
    p.close()


@pytest.fixture(autouse=True)
def _console_and_reset(request):
    """After each test: record every browser's console under the test's name (the
    console test checks them all), and put the pooled browsers back to a blank page
    with no emulation, so one test's page or settings never leak into the next."""
    yield
    pool = request.node.funcargs.get("pool")
    if pool is not None:
        pool.reset(request.node.nodeid)


@pytest.fixture
def session_id() -> str:
    """A fresh session id, so tests never share a session."""
    return "b" + uuid.uuid4().hex[:20]


@pytest.fixture(scope="session")
def artifacts_dir() -> Path:
    d = REPO_ROOT / "artifacts" / "screenshots"
    d.mkdir(parents=True, exist_ok=True)
    return d


def pytest_configure(config):
    os.environ["SE_OFFLINE"] = "true"
    config.addinivalue_line("markers", "browser: a real-browser test")


def pytest_report_header(config):
    chromium = shutil.which("chromium") or "MISSING"
    return [f"browser: {chromium}, driver: {pagekit.CHROMEDRIVER}, started {time.strftime('%H:%M:%S')}"]
