"""A page whose WebSocket the server refuses for its origin says why, in words that
name --allow-origin (Public/origin.js), instead of "reconnecting" forever.

Chromium is pointed at the server under a domain name (host-resolver-rules maps it to
127.0.0.1). On the loopback --host the suite's server uses, a domain name is not the
server's own origin (DNS rebinding), so its upgrade gets 403. The browser is one of
its own, outside the pool: its console shows the refused socket, which is the point.
"""

from __future__ import annotations

import pagekit
from serverproc import start_server

NAME = "countdown.example.test"


def _driver(browser_tools):
    return pagekit.make_driver(browser_tools, extra_args=(f"--host-resolver-rules=MAP {NAME} 127.0.0.1",))


def test_refused_origin_names_allow_origin(browser_tools, server, session_id):
    """Served as http://countdown.example.test:PORT from a loopback server, the page
    cannot connect and its status says the server does not accept its origin, naming
    `--allow-origin http://countdown.example.test:PORT`."""
    origin = f"http://{NAME}:{server.port}"
    driver = _driver(browser_tools)
    try:
        driver.get(f"{origin}/?session={session_id}")
        pagekit.wait(driver, 10, lambda d: "--allow-origin" in pagekit.read(d)["status"],
                     "the status to name --allow-origin")
        page = pagekit.read(driver)
        assert page["status"] == (f"This server does not accept pages from {origin}. "
                                  f"Start it with --allow-origin {origin}"), page
        assert page["conn"] != "state-live"
    finally:
        driver.quit()


def test_allowed_origin_connects_and_says_nothing_of_it(browser_tools, session_id):
    """Control: the same name, allowed with --allow-origin '*' (the port is known
    only once the server listens), connects, and no refusal is shown."""
    srv = start_server("--allow-origin", "*")
    driver = _driver(browser_tools)
    try:
        driver.get(f"http://{NAME}:{srv.port}/?session={session_id}")
        pagekit.wait(driver, 10, lambda d: pagekit.read(d)["conn"] == "state-live", "the page to be live")
        assert "--allow-origin" not in pagekit.read(driver)["status"]
    finally:
        driver.quit()
        srv.stop_and_check()
