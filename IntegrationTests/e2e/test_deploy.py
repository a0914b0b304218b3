"""The systemd unit and the install step: `scripts/install PREFIX` puts the binary,
Public/ and the unit where the unit expects them, `systemd-analyze verify` accepts the
installed unit without a single warning, the unit carries the hardening docs/operating.md
promises, and the installed server serves the installed page."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from cdclient import http_get
from serverproc import REPO_ROOT, ServerProcess, server_binary

UNIT = REPO_ROOT / "deploy" / "countdown-server.service"


def unit_settings(text: str) -> dict[str, list[str]]:
    settings: dict[str, list[str]] = {}
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith(("#", "[")):
            key, _, value = line.partition("=")
            settings.setdefault(key, []).append(value)
    return settings


def unit_sections(text: str) -> dict[str, dict[str, list[str]]]:
    """Each [Section]'s settings, for keys that systemd reads in one section only."""
    sections: dict[str, dict[str, list[str]]] = {}
    current = sections.setdefault("", {})
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("[") and line.endswith("]"):
            current = sections.setdefault(line[1:-1], {})
        elif line and not line.startswith("#"):
            key, _, value = line.partition("=")
            current.setdefault(key, []).append(value)
    return sections


def verify(unit_path) -> str:
    """systemd-analyze verify's complaints (empty when the unit is clean)."""
    res = subprocess.run(["systemd-analyze", "verify", str(unit_path)], capture_output=True, timeout=60)
    out = (res.stdout + res.stderr).decode()
    return out if res.returncode != 0 or out.strip() else ""


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    if shutil.which("systemd-analyze") is None:
        pytest.fail("systemd-analyze is missing: scripts/setup --test installs Debian's systemd")
    prefix = tmp_path_factory.mktemp("prefix")
    res = subprocess.run([str(REPO_ROOT / "scripts" / "install"), str(prefix)], capture_output=True, timeout=120,
                         env={**os.environ, "COUNTDOWN_SERVER_BIN": str(server_binary())})
    assert res.returncode == 0, res.stderr.decode()
    return prefix


def test_installed_unit_passes_systemd_analyze_verify(installed, tmp_path):
    """The installed unit verifies with no output at all; a misspelt key in a copy
    does not, so the check can fail."""
    unit = installed / "lib" / "systemd" / "system" / "countdown-server.service"
    assert f"ExecStart={installed}/bin/countdown-server" in unit.read_text()
    assert verify(unit) == ""
    broken = tmp_path / "countdown-server.service"
    broken.write_text(unit.read_text().replace("ProtectSystem=", "ProtectSytem="))
    assert "ProtectSytem" in verify(broken)


def test_unit_is_hardened_and_sized_for_the_connection_cap():
    settings = unit_settings(UNIT.read_text())
    for key, want in [("DynamicUser", "yes"), ("ProtectSystem", "strict"), ("ProtectHome", "yes"),
                      ("NoNewPrivileges", "yes"), ("Restart", "on-failure"), ("StateDirectory", "countdown-server")]:
        assert settings.get(key) == [want], (key, settings.get(key))
    env = dict(e.split("=", 1) for e in settings["Environment"])
    assert int(settings["LimitNOFILE"][0]) >= int(env["COUNTDOWN_MAX_CONNECTIONS"]) + 64
    assert "ExecReload" in UNIT.read_text(), "the unit must say why it has no ExecReload"
    # The stop timeout leaves room for the drain and the 2 s of closing.
    assert int(settings["TimeoutStopSec"][0]) > int(env["COUNTDOWN_DRAIN_SECONDS"]) + 2


def test_installed_server_serves_the_installed_page(installed):
    srv = ServerProcess(["--port", "0", "--public", str(installed / "share" / "countdown-server" / "Public")],
                        binary=installed / "bin" / "countdown-server").start()
    try:
        status, _, body = http_get(srv.host, srv.port, "/")
        assert status == 200 and body == (REPO_ROOT / "Public" / "index.html").read_bytes()
    finally:
        srv.stop_and_check()


def test_unit_restarts_a_crash_and_shows_a_crash_loop():
    """Restart=on-failure after RestartSec, and a start limit in [Unit]: more than one start
    is allowed (one crash is not fatal), and a loop that restarts every RestartSec hits the
    limit inside its interval (it ends failed, visibly, instead of cycling unseen)."""
    sections = unit_sections(UNIT.read_text())
    unit, service = sections["Unit"], sections["Service"]
    assert service.get("Restart") == ["on-failure"]
    restart_sec = float(service["RestartSec"][0])
    interval = float(unit["StartLimitIntervalSec"][0])
    burst = int(unit["StartLimitBurst"][0])
    assert restart_sec >= 1 and burst >= 2, (restart_sec, burst)
    assert burst * restart_sec < interval, (burst, restart_sec, interval)
    for key in ("StartLimitIntervalSec", "StartLimitBurst"):
        assert key not in service, f"{key} is documented as a [Unit] key"


def test_installed_start_limit_is_read_by_systemd(installed, tmp_path):
    """systemd-analyze verify accepts the installed start limit and complains about one it
    cannot parse, so a broken value would not pass unseen."""
    unit = installed / "lib" / "systemd" / "system" / "countdown-server.service"
    text = unit.read_text()
    assert "\nStartLimitBurst=5\n" in text and verify(unit) == ""
    broken = tmp_path / "countdown-server.service"
    broken.write_text(text.replace("\nStartLimitBurst=5\n", "\nStartLimitBurst=five\n"))
    assert "five" in verify(broken)
