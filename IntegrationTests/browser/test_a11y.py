"""An outside accessibility audit: axe-core (as bundled by PyPI's axe-selenium-python,
injected from the installed file; nothing is downloaded) runs inside the page in every
state, in both languages and in dark mode, against a server run with --control key so
that the controller's Share area and the view-only page are audited too.

The target is zero violations of WCAG 2.1 A/AA and axe's best practices
(pagekit.AXE_TAGS). Waits are WebDriverWait conditions (pagekit.wait).
"""

from __future__ import annotations

import pytest

import pagekit as pk
from serverproc import start_server


@pytest.fixture(scope="module")
def key_server():
    """A server run with --control key, for this file."""
    srv = start_server("--control", "key")
    yield srv
    srv.stop_and_check()


def open_with_role(driver, url: str, role: str) -> None:
    driver.get(url)
    pk.wait(driver, 8, lambda d: d.execute_script(
        "return document.documentElement.classList.contains('state-live')"
        " && document.documentElement.dataset.role === arguments[0]", role),
        f"the page to be live as {role}")


def phase(driver) -> str:
    return driver.execute_script("return document.documentElement.dataset.phase || ''")


class Audit:
    """Runs axe-core in each state it is called for (in the colour scheme asked, set on
    every browser given), and keeps the violations found, to report them all at once."""

    def __init__(self, scheme: str, *drivers):
        self.scheme = scheme
        for d in drivers:
            d.execute_cdp_cmd("Emulation.setEmulatedMedia",
                              {"features": [{"name": "prefers-color-scheme", "value": scheme}]})
        self.found: dict[str, list] = {}
        self.audited: list[str] = []

    def __call__(self, d, state: str) -> None:
        r = pk.axe_audit(d)
        assert r["rules"] >= 30, f"{state}: axe checked only {r['rules']} rules"
        self.audited.append(state)
        if r["violations"]:
            self.found[state] = r["violations"]

    def check(self, states: int, lang: str) -> None:
        """Every one of `states` states was audited, and none had a violation."""
        assert len(self.audited) == states, self.audited
        assert not self.found, f"axe violations ({lang}, {self.scheme}):\n" + "\n".join(
            f"[{state}]\n{pk.format_violations(v)}" for state, v in self.found.items())


@pytest.mark.parametrize("lang,scheme", [("en", "light"), ("zh-Hant", "light"), ("en", "dark")])
def test_axe_finds_no_violations_in_any_state(key_server, pool, session_id, lang, scheme):
    """axe-core reports no WCAG 2.1 A/AA or best-practice violation on the controller's
    page idle (Share closed and open with its QR codes and the controller link, a
    refused number and finish text, the date-and-time picker, the Stage area with a
    refused danger time), running (with "End for everyone?" too, a presenter message,
    the blackout's mark), paused and finished, nor on the view-only page idle ("Waiting
    for the host"), running (with a message, and blanked by the blackout) and paused; in
    English and Traditional Chinese, and in dark mode. Proves the audit ran: each run
    checked rules and applied the tags asked for."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    a, b = pool(0), pool(1)
    audit = Audit(scheme, a, b)

    url = pk.page_url(key_server, session_id, lang=lang)
    open_with_role(a, url, "controller")
    audit(a, "idle")
    a.find_element(By.CSS_SELECTOR, "#share > summary").click()
    pk.wait(a, 2, lambda d: d.find_element(By.ID, "viewer-link").is_displayed(), "the open Share area")
    pk.wait(a, 3, lambda d: d.execute_script(
        "const i = document.getElementById('viewer-qr'); return i.complete && i.naturalWidth > 0"), "the QR code")
    audit(a, "idle, Share open")
    a.find_element(By.CSS_SELECTOR, "#share-controller > summary").click()
    pk.wait(a, 2, lambda d: d.find_element(By.ID, "controller-qr").is_displayed(), "the controller link")
    audit(a, "idle, Share and the controller link open")
    a.find_element(By.CSS_SELECTOR, "#share-controller > summary").click()
    a.find_element(By.CSS_SELECTOR, "#share > summary").click()

    open_with_role(b, url.split("&key=")[0], "viewer")
    pk.wait(b, 2, lambda d: d.find_element(By.ID, "host-wait").is_displayed(), "Waiting for the host")
    audit(b, "view-only, idle: waiting for the host")

    a.execute_script("document.getElementById('finish-text').value = 'a\\u0007b'")
    pk.press_start(a)
    pk.wait(a, 2, lambda d: d.execute_script(
        "return document.getElementById('finish-text').getAttribute('aria-invalid') === 'true'"), "the refusal")
    audit(a, "idle, a refused finish text")
    a.execute_script("document.getElementById('finish-text').value = ''")

    pk.set_seconds(a, 0)
    pk.press_start(a)
    pk.wait(a, 2, lambda d: d.execute_script(
        "return document.getElementById('seconds').getAttribute('aria-invalid') === 'true'"), "the refusal")
    audit(a, "idle, a refused number")
    pk.set_seconds(a, 5)

    # The Stage area, open, with a danger time refused for not being below the warning time.
    a.find_element(By.CSS_SELECTOR, "#stage > summary").click()
    for field, value in (("warn-at", "5"), ("danger-at", "10")):
        a.find_element(By.ID, field).send_keys(value)
    pk.press_start(a)
    pk.wait(a, 2, lambda d: d.execute_script(
        "return document.getElementById('danger-at').getAttribute('aria-invalid') === 'true'"), "the refusal")
    audit(a, "idle, Stage open, a refused danger time")
    for field in ("warn-at", "danger-at"):
        a.find_element(By.ID, field).clear()
    a.find_element(By.CSS_SELECTOR, "#stage > summary").click()

    Select(a.find_element(By.ID, "mode")).select_by_value("until")
    pk.wait(a, 2, lambda d: "until" in pk.read(d)["shown"], "the date-and-time picker")
    audit(a, "idle, the date-and-time picker")
    Select(a.find_element(By.ID, "mode")).select_by_value("seconds")

    pk.set_seconds(a, 120)
    pk.press_start(a)
    pk.wait(a, 3, lambda d: phase(d) == "running" and pk.read(d)["busy"] == "true", "running")
    audit(a, "running")
    pk.click(a, "cancel")
    pk.wait(a, 2, lambda d: d.find_element(By.ID, "confirm-no").is_displayed(), "End for everyone?")
    audit(a, "running, End for everyone?")
    pk.click(a, "confirm-no")

    pk.wait(b, 3, lambda d: pk.read(d)["busy"] == "true", "the viewer's spinner")
    audit(b, "view-only, running")

    # A message, then the blackout: the controller's page and the viewer's blank one.
    a.find_element(By.CSS_SELECTOR, "#stage > summary").click()
    a.find_element(By.ID, "message-text").send_keys("Wrap up")
    pk.click(a, "message-send")
    pk.wait(b, 3, lambda d: d.find_element(By.ID, "message").is_displayed(), "the viewer's message")
    audit(a, "running, a message")
    audit(b, "view-only, running, a message")
    pk.click(a, "blackout")
    pk.wait(b, 3, lambda d: d.execute_script("return document.documentElement.dataset.blackout") == "blank", "blank")
    pk.wait(a, 3, lambda d: d.find_element(By.ID, "blackout-on").is_displayed(), "Blackout on")
    audit(a, "running, blackout on")
    audit(b, "view-only, blank")
    pk.click(a, "blackout")
    pk.click(a, "message-clear")
    pk.wait(b, 3, lambda d: d.execute_script("return document.documentElement.dataset.blackout") == "off"
            and not d.find_element(By.ID, "message").is_displayed(), "the viewer's page back")
    a.find_element(By.CSS_SELECTOR, "#stage > summary").click()

    pk.click(a, "pause")
    for d in (a, b):
        pk.wait(d, 3, lambda d: phase(d) == "paused" and pk.read(d)["busy"] is None, "paused")
    audit(a, "paused")
    audit(b, "view-only, paused")

    pk.cancel_run(a)
    pk.wait(a, 3, lambda d: phase(d) == "idle" and not pk.read(d)["disabled"], "idle")
    pk.set_seconds(a, 1)
    pk.press_start(a)
    pk.wait(a, 5, lambda d: phase(d) == "finished" and not pk.read(d)["disabled"], "finished")
    audit(a, "finished")

    audit.check(18, lang)


@pytest.mark.parametrize("lang,scheme", [("en", "light"), ("zh-Hant", "light"), ("en", "dark")])
def test_axe_finds_no_violations_while_waiting_and_in_each_outcome(key_server, pool, session_id, lang, scheme):
    """axe-core reports no WCAG 2.1 A/AA or best-practice violation while a wait lasts
    (the controller's page with Done, Fail and Cancel, its "Mark it done for everyone?"
    question, and the view-only page) nor once it has finished as done, failed (with a
    text of the job's own, so the outcome's word shows beside it) and timed out, on both
    pages; in English and Traditional Chinese, and in dark mode, whose outcome colours
    differ. Proves the audit ran: each run checked rules, and each state was reached."""
    a, b = pool(0), pool(1)
    audit = Audit(scheme, a, b)

    def outcome(d) -> str:
        return d.execute_script("return document.documentElement.dataset.outcome || ''")

    url = pk.page_url(key_server, session_id, lang=lang)
    open_with_role(a, url, "controller")
    open_with_role(b, url, "viewer")
    key = a.execute_script(f"return sessionStorage.getItem('countdown.key.{session_id}')")
    obs = pk.Observer(key_server.ws_url(session_id))
    try:
        assert obs.command("auth", key=key)["type"] == "ack"

        def wait_on_both(**fields) -> None:
            assert obs.command("wait", **fields)["type"] == "ack"
            for d in (a, b):
                pk.wait(d, 3, lambda d: phase(d) == "waiting" and pk.read(d)["busy"] == "true", "waiting")

        wait_on_both(label="Deploying")
        audit(a, "waiting")
        audit(b, "view-only, waiting")
        pk.click(a, "done")
        pk.wait(a, 2, lambda d: d.find_element("id", "confirm-no").is_displayed(), "the question")
        audit(a, "waiting, Mark it done for everyone?")
        pk.click(a, "confirm-yes")
        for d in (a, b):
            pk.wait(d, 3, lambda d: outcome(d) == "done", "done")
        audit(a, "done")
        audit(b, "view-only, done")

        wait_on_both()
        assert obs.command("fail", label="Deploy failed")["type"] == "ack"
        for d in (a, b):
            pk.wait(d, 3, lambda d: outcome(d) == "failed", "failed")
            assert d.find_element("id", "outcome").is_displayed(), "the outcome's word beside the job's text"
        audit(a, "failed")
        audit(b, "view-only, failed")

        wait_on_both(timeoutSeconds=1)
        for d in (a, b):
            pk.wait(d, 5, lambda d: outcome(d) == "timeout", "timed out")
        audit(a, "timed out")
        audit(b, "view-only, timed out")
    finally:
        obs.close()

    audit.check(9, lang)
