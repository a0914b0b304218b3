"""Fixtures for the end-to-end tests: servers running the built binary (see serverproc.py)
and a unique session id per test."""

from __future__ import annotations

import uuid

import pytest

from serverproc import start_server


@pytest.fixture(scope="module")
def server():
    """One server (default settings, Public/ of the repo) shared by a test module."""
    srv = start_server()
    yield srv
    srv.stop_and_check()


@pytest.fixture(scope="module")
def server_default2():
    """A second server started with ``--default-seconds 2``."""
    srv = start_server("--default-seconds", "2")
    yield srv
    srv.stop_and_check()


@pytest.fixture
def session_id() -> str:
    """A fresh session id, unique per test, so tests never share a session."""
    return "t" + uuid.uuid4().hex
