"""The page for the person running the show (issue 21), in a real browser against the
built server, driven by the keyboard alone: the focus never lands on a control that
ends the run, what ends a run asks first, quick time entry and a finish text, the time
in the tab title, the Share panel with QR codes that a reader nobody here wrote
(zbarimg, Debian's zbar-tools) decodes to a link that opens the session, the session
field in open mode, honest status, the layout on a phone and a 1400-px screen, and the
404 page.

Keys go to whatever has the focus (ActionChains, or CDP key events for a held key);
the only clicks are none. Waits are WebDriverWait conditions (pagekit.wait) and the
observer's own waits; nothing sleeps for a fixed time.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import uuid
from pathlib import Path

import pytest

import pagekit as pk
from serverproc import start_server

REPO_ROOT = Path(__file__).resolve().parent.parent.parent
DOCS_DIR = REPO_ROOT / "docs"
UPDATE_DOCS = os.environ.get("COUNTDOWN_UPDATE_DOCS") == "1"
WIDE = {"name": "wide-1400", "width": 1400, "height": 900, "mobile": False, "dpr": 1}
HERE = __name__


@pytest.fixture(scope="module")
def key_server():
    """A server run with --control key, for this file."""
    srv = start_server("--control", "key")
    yield srv
    srv.stop_and_check()


# -- the keyboard ---------------------------------------------------------------------------
def keys(driver, *sequence) -> None:
    """Types into whatever has the focus, as a keyboard does."""
    from selenium.webdriver.common.action_chains import ActionChains

    ActionChains(driver).send_keys(*sequence).perform()


def select_all(driver) -> None:
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.keys import Keys

    ActionChains(driver).key_down(Keys.CONTROL).send_keys("a").key_up(Keys.CONTROL).perform()


def shift_tab(driver) -> None:
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.keys import Keys

    ActionChains(driver).key_down(Keys.SHIFT).send_keys(Keys.TAB).key_up(Keys.SHIFT).perform()


ENTER_KEY = {"key": "Enter", "code": "Enter", "windowsVirtualKeyCode": 13, "nativeVirtualKeyCode": 13}


def hold_enter(driver, repeats: int = 12) -> None:
    """A held Enter: one keydown, `repeats` auto-repeated keydowns, one keyup (CDP)."""
    driver.execute_cdp_cmd("Input.dispatchKeyEvent", {"type": "keyDown", "text": "\r", **ENTER_KEY})
    for _ in range(repeats):
        driver.execute_cdp_cmd("Input.dispatchKeyEvent",
                               {"type": "keyDown", "text": "\r", "autoRepeat": True, **ENTER_KEY})
    driver.execute_cdp_cmd("Input.dispatchKeyEvent", {"type": "keyUp", **ENTER_KEY})


def focused(driver) -> str:
    """The focused element: its id, or a selector-like name for a summary."""
    return driver.execute_script(
        "const e = document.activeElement;"
        "if (!e || e === document.body) return 'body';"
        "if (e.tagName === 'SUMMARY') return '#' + e.parentElement.id + ' > summary';"
        "return e.id || e.tagName;")


def tab_to(driver, target: str, limit: int = 40) -> None:
    """Presses Tab until `target` (see focused) has the focus."""
    from selenium.webdriver.common.keys import Keys

    seen = []
    for _ in range(limit):
        if focused(driver) == target:
            return
        keys(driver, Keys.TAB)
        seen.append(focused(driver))
    pytest.fail(f"Tab never reached {target}; it went {seen}")


def wait_focus(driver, target: str, what: str, timeout: float = 3) -> None:
    pk.wait(driver, timeout, lambda d: focused(d) == target, f"the focus on {target} ({what})")


HOST_JS = """
const shown = (id) => { const e = document.getElementById(id); return !!e && e.getClientRects().length > 0; };
return {
  phase: document.documentElement.dataset.phase || '',
  title: document.title,
  understood: document.getElementById('understood').textContent,
  confirm: shown('confirm'),
  confirmText: document.getElementById('confirm-text').textContent,
  runControls: shown('run-controls'),
  seconds: document.getElementById('seconds').value,
  finish: document.getElementById('finish-text').value,
  status: document.getElementById('status').textContent,
  statusKind: document.getElementById('status').dataset.kind || '',
  viewers: document.getElementById('viewers').textContent,
  session: document.getElementById('session').textContent,
  sessionField: shown('open-session') ? document.getElementById('session-name').value : null,
  invalid: [...document.querySelectorAll('[aria-invalid="true"]')].map((e) => e.id),
};
"""


# No press in flight: the control that would take the next press takes it.
SETTLED_JS = """
const phase = document.documentElement.dataset.phase;
const next = document.getElementById(phase === 'paused' ? 'start' : 'pause');
return (phase === 'paused' || phase === 'running') && next.getAttribute('aria-disabled') !== 'true';
"""


def host(driver) -> dict:
    return driver.execute_script(HOST_JS)


def idle_page(driver) -> bool:
    r = pk.read(driver)
    return r["label"] == "Ready" and not r["disabled"] and r["conn"] == "state-live"


def type_duration(driver, text: str) -> None:
    """Focuses the duration field by Tab and replaces its text."""
    tab_to(driver, "seconds")
    select_all(driver)
    keys(driver, text)


# 1 ---------------------------------------------------------------------------------------
def test_keyboard_start_pause_resume_and_repeats(server, pool, session_id):
    """With the keyboard alone: the duration typed and Enter starts, and the focus is on
    Pause; Space pauses and the focus goes to the big button (Resume), never to Cancel;
    Enter resumes and the focus is back on Pause; Space and Enter work the same both
    ways. A burst of Spaces and a held Enter (auto-repeat) never cancel: the server
    never leaves running/paused, the focus is never on Cancel or −1 min, and a held
    Enter is one press."""
    from selenium.webdriver.common.keys import Keys

    d = pool(0)
    pk.open_page(d, server, session_id)
    obs = pk.Observer(server.ws_url(session_id))
    try:
        type_duration(d, "10m")
        pk.wait(d, 2, lambda d: host(d)["understood"] == "= 10 minutes", "the echo of what was understood")
        keys(d, Keys.ENTER)
        obs.wait_for(lambda s: s["phase"] == "running" and s["duration"] == 600, 3, "a 10-minute run")
        wait_focus(d, "pause", "after Start")
        for key, press in ((" ", "Space"), (Keys.ENTER, "Enter")):
            keys(d, key)
            obs.wait_for(lambda s: s["phase"] == "paused", 3, f"paused by {press}")
            wait_focus(d, "start", f"after Pause by {press}")
            pk.wait(d, 2, lambda d: pk.read(d)["startText"] == "Resume" and not pk.read(d)["disabled"],
                    "Resume, enabled")
            keys(d, key)
            obs.wait_for(lambda s: s["phase"] == "running", 3, f"resumed by {press}")
            wait_focus(d, "pause", f"after Resume by {press}")

        # A burst of Spaces, as fast as the driver sends them.
        keys(d, " ", " ", " ", " ", " ")
        pk.wait(d, 3, lambda d: d.execute_script(SETTLED_JS), "the burst to settle")
        assert focused(d) in ("pause", "start"), focused(d)
        assert set(obs.phases) <= {"idle", "running", "paused"} and obs.phases.count("idle") == 1, obs.phases

        # A held Enter on Pause is one press: one pause, nothing after it.
        if obs.snapshot()["phase"] == "paused":
            keys(d, " ")
            obs.wait_for(lambda s: s["phase"] == "running", 3, "running again")
        wait_focus(d, "pause", "before the held Enter")
        pk.wait(d, 2, lambda d: d.execute_script(
            "return document.getElementById('pause').getAttribute('aria-disabled') !== 'true'"), "Pause ready")
        before = len(obs.phases)
        hold_enter(d)
        obs.wait_for(lambda s: s["phase"] == "paused", 3, "paused by the held Enter")
        wait_focus(d, "start", "after the held Enter")
        pk.wait(d, 2, lambda d: pk.read(d)["startText"] == "Resume" and not pk.read(d)["disabled"], "settled")
        assert obs.phases[before:] == ["paused"], f"a held Enter must be one press: {obs.phases}"
        assert obs.phases.count("idle") == 1 and "finished" not in obs.phases, obs.phases
        assert obs.command("cancel")["type"] == "ack"
    finally:
        obs.close()


# 1b --------------------------------------------------------------------------------------
def test_the_issues_keyboard_trap_is_gone(browser_tools, pool, session_id):
    """The issue's trap, replayed with the server frozen (SIGSTOP) so the pause's
    answer is pending: Enter starts, Space pauses, and while the answer is pending the
    focus stays on Pause (aria-disabled, not disabled) and further Spaces send nothing;
    once the server answers, the focus is on Resume, and one more Space resumes. The
    run is never cancelled."""
    import signal

    srv = start_server()
    d = pool(0)
    obs = None
    try:
        pk.open_page(d, srv, session_id)
        obs = pk.Observer(srv.ws_url(session_id))
        type_duration(d, "5m")
        from selenium.webdriver.common.keys import Keys

        keys(d, Keys.ENTER)
        obs.wait_for(lambda s: s["phase"] == "running", 3, "running")
        wait_focus(d, "pause", "after Start")
        os.kill(srv.proc.pid, signal.SIGSTOP)
        try:
            keys(d, " ")
            pk.wait(d, 2, lambda d: d.execute_script(
                "return document.getElementById('pause').getAttribute('aria-disabled')") == "true",
                "Pause waiting for its answer")
            keys(d, " ", " ")
            assert focused(d) == "pause", f"the focus moved while the press was pending: {focused(d)}"
        finally:
            os.kill(srv.proc.pid, signal.SIGCONT)
        obs.wait_for(lambda s: s["phase"] == "paused", 3, "paused once the server answers")
        wait_focus(d, "start", "Resume once it can be pressed")
        keys(d, " ")
        obs.wait_for(lambda s: s["phase"] == "running", 3, "resumed by the next Space")
        assert obs.phases == ["idle", "running", "paused", "running"], obs.phases
    finally:
        if obs:
            obs.close()
        srv.stop_and_check()


# 2 ---------------------------------------------------------------------------------------
def test_cancel_only_through_the_confirmation(server, pool, session_id):
    """Cancel asks "End for everyone?" in the run controls' place, as an alertdialog
    with No focused: Enter, Space and Escape all answer No and give the focus back to
    Cancel, a held Enter on Cancel only asks; Yes (reached by Shift+Tab) ends the run
    and the focus goes to the duration field. −1 min with under a minute left asks the
    same; with more left it does not ask."""
    from selenium.webdriver.common.keys import Keys

    d = pool(0)
    pk.open_page(d, server, session_id)
    obs = pk.Observer(server.ws_url(session_id))
    try:
        type_duration(d, "2:00")
        keys(d, Keys.ENTER)
        obs.wait_for(lambda s: s["phase"] == "running", 3, "running")
        wait_focus(d, "pause", "after Start")
        tab_to(d, "cancel")
        dialog = d.execute_script(
            "const c = document.getElementById('confirm');"
            "return [c.getAttribute('role'), document.getElementById(c.getAttribute('aria-labelledby')).textContent]")
        assert dialog == ["alertdialog", "End for everyone?"], dialog
        for answer, name in ((Keys.ENTER, "Enter"), (" ", "Space"), (Keys.ESCAPE, "Escape")):
            keys(d, Keys.ENTER)
            pk.wait(d, 2, lambda d: host(d)["confirm"] and not host(d)["runControls"], "the question")
            wait_focus(d, "confirm-no", "the question opens on No")
            keys(d, answer)
            pk.wait(d, 2, lambda d: not host(d)["confirm"] and host(d)["runControls"], f"No by {name}")
            wait_focus(d, "cancel", f"back on Cancel after {name}")
            assert obs.snapshot()["phase"] == "running", f"{name} must not cancel"

        hold_enter(d)
        pk.wait(d, 2, lambda d: host(d)["confirm"], "the question after a held Enter")
        wait_focus(d, "confirm-no", "a held Enter stops at the question")
        assert obs.snapshot()["phase"] == "running" and obs.phases == ["idle", "running"], obs.phases
        shift_tab(d)
        wait_focus(d, "confirm-yes", "Shift+Tab reaches Yes")
        keys(d, Keys.ENTER)
        obs.wait_for(lambda s: s["phase"] == "idle", 3, "cancelled by Yes")
        pk.wait(d, 2, idle_page, "idle on the page")
        wait_focus(d, "seconds", "after the run ended")
        assert not host(d)["confirm"]

        # −1 min: asks only when it would end the run.
        type_duration(d, "2:00")
        keys(d, Keys.ENTER)
        obs.wait_for(lambda s: s["phase"] == "running", 3, "running again")
        tab_to(d, "minus")
        keys(d, Keys.ENTER)
        obs.wait_for(lambda s: s["phase"] == "running" and s["remaining"] <= 60, 3, "one minute off, no question")
        # The page decides from what it has been told: wait until it shows the minute off too.
        pk.wait(d, 3, lambda d: (pk.clock_seconds(pk.read(d)["label"]) or 999) <= 60, "a minute or less on the page")
        assert not host(d)["confirm"]
        assert focused(d) == "minus"
        keys(d, Keys.ENTER)
        pk.wait(d, 2, lambda d: host(d)["confirm"], "the question before a −1 min that ends the run")
        wait_focus(d, "confirm-no", "the −1 min question opens on No")
        keys(d, Keys.ENTER)
        wait_focus(d, "minus", "back on −1 min")
        assert obs.snapshot()["phase"] == "running"
        keys(d, Keys.ENTER)
        wait_focus(d, "confirm-no", "asked again")
        shift_tab(d)
        keys(d, Keys.ENTER)
        obs.wait_for(lambda s: s["phase"] == "finished", 3, "finished by the confirmed −1 min")
    finally:
        obs.close()


# 3 ---------------------------------------------------------------------------------------
FORMATS = [
    ("600", 600, "= 10 minutes"),
    ("10:00", 600, "= 10 minutes"),
    ("1:30:00", 5400, "= 1 hour, 30 minutes"),
    ("90s", 90, "= 1 minute, 30 seconds"),
    ("10m", 600, "= 10 minutes"),
    ("1h", 3600, "= 1 hour"),
]


def test_entry_formats_presets_and_finish_text(server, pool, session_id):
    """Each entry format (600, 10:00, 1:30:00, 90s, 10m, 1h) is echoed as understood and
    starts a run of exactly that length; a preset fills the field; a bad duration, a
    finish text with a control character and one over 64 characters are refused in
    words with nothing started; a finish text is sent as finishedLabel, shown at the
    finish and in the tab title; the last values come back after a reload, for this
    session only."""
    from selenium.webdriver.common.keys import Keys

    d = pool(0)
    pk.open_page(d, server, session_id)
    obs = pk.Observer(server.ws_url(session_id))
    try:
        for text, seconds, echo in FORMATS:
            type_duration(d, text)
            pk.wait(d, 2, lambda d: host(d)["understood"] == echo, f"the echo of {text!r}")
            keys(d, Keys.ENTER)
            st = obs.wait_for(lambda s: s["phase"] == "running", 3, f"the run of {text!r}")
            assert st["duration"] == seconds, (text, st)
            pk.wait(d, 2, lambda d: pk.clock_seconds(pk.read(d)["label"]) in (seconds, seconds - 1),
                    f"the page counting from {seconds}")
            assert obs.command("cancel")["type"] == "ack"
            pk.wait(d, 3, idle_page, "idle")

        tab_to(d, "seconds")
        keys(d, Keys.TAB)  # the first preset
        wait_focus(d, "BUTTON", "the 1 min preset")
        keys(d, Keys.TAB, " ")  # the 5 min preset, by Space
        pk.wait(d, 2, lambda d: host(d)["seconds"] == "5:00" and host(d)["understood"] == "= 5 minutes",
                "the preset in the field")
        assert obs.snapshot()["phase"] == "idle", "a preset fills the field, it does not start"

        type_duration(d, "ten minutes")
        keys(d, Keys.ENTER)
        pk.wait(d, 2, lambda d: "seconds" in host(d)["invalid"] and host(d)["statusKind"] == "error"
                and host(d)["status"].startswith("Enter a time such as"), "the refused duration")
        type_duration(d, "2s")
        for bad, words in (("Doors\topen", "control characters"), ("x" * 65, "at most 64")):
            # A keyboard cannot type these (Tab moves on; the field stops at 64):
            # what a paste or a script could leave in the field.
            d.execute_script("document.getElementById('finish-text').value = arguments[0]", bad)
            tab_to(d, "finish-text")
            keys(d, Keys.ENTER)
            pk.wait(d, 2, lambda d: "finish-text" in host(d)["invalid"] and words in host(d)["status"],
                    f"the refused finish text ({words})")
            assert obs.snapshot()["phase"] == "idle"
        select_all(d)
        keys(d, "Doors open · 開門")
        keys(d, Keys.ENTER)
        obs.wait_for(lambda s: s["phase"] == "running" and s["duration"] == 2, 3, "the 2 s run")
        st = obs.wait_for(lambda s: s["phase"] == "finished", 5, "the finish")
        assert st["label"] == "Doors open · 開門", st
        pk.wait(d, 3, lambda d: pk.read(d)["label"] == "Doors open · 開門", "the finish text on the page")
        assert host(d)["title"] == f"Doors open · 開門 · {session_id}", host(d)["title"]

        d.refresh()
        pk.wait(d, 5, lambda d: pk.read(d)["conn"] == "state-live", "live after the reload")
        assert (host(d)["seconds"], host(d)["finish"]) == ("2s", "Doors open · 開門"), host(d)
        pk.open_page(d, server, session_id + "-other")
        assert (host(d)["seconds"], host(d)["finish"]) == ("5", ""), "another session starts afresh"
    finally:
        obs.close()


# 4 ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("lang,finished", [("en", "Countdown finished"), ("zh-Hant", "倒計時結束")])
def test_tab_title(server, pool, session_id, lang, finished):
    """The tab's title shows the time left and the session while running ("4:59 ·
    id"), the same marked paused while paused, and the outcome once finished, in the
    page's language; idle it is the page's name and the session."""
    from selenium.webdriver.common.keys import Keys

    d = pool(0)
    pk.open_page(d, server, session_id, lang=lang)
    name = "Countdown" if lang == "en" else "倒計時"
    assert host(d)["title"] == f"{name} · {session_id}", host(d)["title"]
    obs = pk.Observer(server.ws_url(session_id))
    try:
        type_duration(d, "5m")
        keys(d, Keys.ENTER)
        obs.wait_for(lambda s: s["phase"] == "running", 3, "running")
        pk.wait(d, 3, lambda d: re.fullmatch(rf"[45]:\d\d · {session_id}", host(d)["title"]) is not None,
                "the time in the title")
        r = pk.read(d)
        assert host(d)["title"].split(" · ")[0] in (r["label"], pk.clock_label(pk.clock_seconds(r["label"]) + 1))
        assert obs.command("pause")["type"] == "ack"
        paused = "(paused)" if lang == "en" else "（已暫停）"
        pk.wait(d, 3, lambda d: re.fullmatch(rf"[45]:\d\d ?{re.escape(paused)} · {session_id}",
                                             host(d)["title"]) is not None, "paused in the title")
        left = obs.snapshot()["remaining"]
        assert obs.command("adjust", seconds=-(left - 2))["type"] == "ack"
        assert obs.command("resume")["type"] == "ack"
        obs.wait_for(lambda s: s["phase"] == "finished", 5, "the finish")
        pk.wait(d, 3, lambda d: host(d)["title"] == f"{finished} · {session_id}", "the outcome in the title")
    finally:
        obs.close()


# 5 ---------------------------------------------------------------------------------------
def qr_text(driver, img_id: str, tmp_path: Path) -> str:
    """Screenshots the QR image as the browser drew it and decodes it with zbarimg."""
    if not shutil.which("zbarimg"):
        pytest.fail("zbarimg is missing: run scripts/setup-browser (apt: zbar-tools)", pytrace=False)
    from selenium.webdriver.common.by import By

    pk.wait(driver, 3, lambda d: d.execute_script(
        "const i = document.getElementById(arguments[0]); return i.complete && i.naturalWidth > 0", img_id),
        f"the {img_id} image to load")
    # Opening the panel scrolls smoothly: wait for the page to stand still first.
    last = [None]

    def still(d):
        d.execute_script("document.getElementById(arguments[0]).scrollIntoView({block: 'nearest', behavior: 'instant'})",
                         img_id)
        now = pk.rect(d, f"#{img_id}")
        same, last[0] = now == last[0], now
        return same

    pk.wait(driver, 3, still, f"the {img_id} image to stand still")
    png = tmp_path / f"{img_id}.png"
    png.write_bytes(driver.find_element(By.ID, img_id).screenshot_as_png)
    out = subprocess.run(["zbarimg", "--quiet", "--raw", "-Sbinary", str(png)], capture_output=True, timeout=30)
    assert out.returncode == 0, f"zbarimg read no code in {png}: {out.stderr.decode()}"
    return out.stdout.decode()


def test_share_panel_qr_codes_open_the_session(key_server, server, pool, session_id, tmp_path):
    """In open mode the Share panel (opened by Enter on its summary) offers the viewer
    link with a QR code; zbarimg decodes the code to that link, and the link opens the
    session in another window. In key mode the controller's panel also offers the
    controller link behind its own toggle, whose code decodes to the controller link,
    which makes the other window a controller."""
    from selenium.webdriver.common.keys import Keys

    a, b = pool(0), pool(1)
    pk.open_page(a, server, session_id)
    tab_to(a, "#share > summary")
    keys(a, Keys.ENTER)
    pk.wait(a, 2, lambda d: d.find_element("id", "viewer-qr").is_displayed(), "the viewer's QR code")
    link = a.find_element("id", "viewer-link").get_attribute("value")
    assert link == pk.page_url(server, session_id)
    assert qr_text(a, "viewer-qr", tmp_path) == link
    assert not a.find_element("id", "share-controller").is_displayed(), "open mode has no controller link"
    b.get(link)
    pk.wait(b, 5, lambda d: pk.read(d)["conn"] == "state-live" and host(d)["sessionField"] == session_id,
            "the decoded link opens the session")

    keyed = session_id + "k"
    a.get(pk.page_url(key_server, keyed))
    pk.wait(a, 5, lambda d: d.execute_script("return document.documentElement.dataset.role") == "controller",
            "the controller")
    tab_to(a, "#share > summary")
    keys(a, Keys.ENTER)
    tab_to(a, "#share-controller > summary")
    keys(a, Keys.ENTER)
    pk.wait(a, 2, lambda d: d.find_element("id", "controller-qr").is_displayed(), "the controller's QR code")
    controller = a.find_element("id", "controller-link").get_attribute("value")
    assert qr_text(a, "controller-qr", tmp_path) == controller
    assert qr_text(a, "viewer-qr", tmp_path) == a.find_element("id", "viewer-link").get_attribute("value")
    b.get(controller)
    pk.wait(b, 5, lambda d: d.execute_script("return document.documentElement.dataset.role") == "controller",
            "the decoded controller link makes a controller")

    # On a phone, Share opens below the fold and the page brings its foot into view (the
    # picture for docs/). Nothing here scrolls meanwhile: qr_text's own scroll would cut
    # the page's smooth scroll short wherever it had got to.
    pk.emulate_viewport(a, pk.PHONE)
    a.get(pk.page_url(server, "team-a"))
    pk.wait(a, 5, lambda d: pk.read(d)["conn"] == "state-live", "live")
    tab_to(a, "#share > summary")
    keys(a, Keys.ENTER)
    pk.wait(a, 3, lambda d: d.execute_script(
        "const i = document.getElementById('viewer-qr'); return i.complete && i.naturalWidth > 0"), "the code")
    pk.wait(a, 3, lambda d: d.execute_script(
        "return document.getElementById('share').getBoundingClientRect().bottom <= innerHeight + 1"), "in view")
    if UPDATE_DOCS or not (DOCS_DIR / "share.png").exists():
        last = [None]

        def still(d):
            now = d.execute_script("return scrollY")
            same, last[0] = now == last[0], now
            return same

        pk.wait(a, 3, still, "the page to stand still", poll=0.2)
        DOCS_DIR.mkdir(exist_ok=True)
        assert a.save_screenshot(str(DOCS_DIR / "share.png"))


# 6 ---------------------------------------------------------------------------------------
def test_open_mode_session_field(server, pool, session_id):
    """In open mode with nothing running, the session's name is a field: a valid name
    and Enter open that session; an invalid one is refused in words and goes nowhere.
    While a run lasts the field gives way to the plain name."""
    from selenium.webdriver.common.keys import Keys

    d = pool(0)
    pk.open_page(d, server, session_id)
    assert host(d)["sessionField"] == session_id
    tab_to(d, "session-name")
    select_all(d)
    keys(d, "bad name!", Keys.ENTER)
    pk.wait(d, 2, lambda d: "session-name" in host(d)["invalid"] and "not a valid session name" in host(d)["status"],
            "the refused name")
    assert f"session={session_id}" in d.current_url
    other = session_id + "-z"
    select_all(d)
    keys(d, other, Keys.ENTER)
    pk.wait(d, 5, lambda d: f"session={other}" in d.current_url and pk.read(d)["conn"] == "state-live",
            "the other session")
    assert host(d)["sessionField"] == other
    obs = pk.Observer(server.ws_url(other))
    try:
        obs.start(60)
        pk.wait(d, 3, lambda d: host(d)["sessionField"] is None and host(d)["session"] == other,
                "the plain name while running")
        assert obs.command("cancel")["type"] == "ack"
    finally:
        obs.close()


# 7 ---------------------------------------------------------------------------------------
def test_status_is_honest(browser_tools, pool, session_id):
    """An error is never drawn beside a green light: the status's mark turns the error
    colour with the words. While the link is down the viewer count is marked as last
    known."""
    from selenium.webdriver.common.keys import Keys

    srv = start_server()
    d = pool(0)
    try:
        pk.open_page(d, srv, session_id)
        assert host(d)["viewers"] == "1 viewer"
        green = d.execute_script("return getComputedStyle(document.getElementById('status'), '::before').backgroundColor")
        type_duration(d, "0")
        keys(d, Keys.ENTER)
        pk.wait(d, 2, lambda d: host(d)["statusKind"] == "error", "the refusal")
        mark = d.execute_script("return getComputedStyle(document.getElementById('status'), '::before').backgroundColor")
        colour = d.execute_script("return getComputedStyle(document.getElementById('status')).color")
        assert mark != green and mark == colour, (green, mark, colour)
        srv.kill()
        pk.wait(d, 5, lambda d: pk.read(d)["conn"] == "state-reconnecting", "the lost link")
        assert host(d)["viewers"] == "1 viewer (last known)", host(d)
    finally:
        srv.kill()
        # Leave first: a reconnect attempt logged after the drain would be charged to
        # whichever test next uses this browser.
        d.get("about:blank")
        pk.drain_console(d, HERE, outage=True)


# 8 ---------------------------------------------------------------------------------------
LABEL_WIDTH_JS = """
const l = document.getElementById('label');
const r = document.createRange(); r.selectNodeContents(l);
const b = r.getBoundingClientRect();
return {text: l.textContent, w: b.width, left: b.left, right: b.right, scroll: l.scrollWidth, client: l.clientWidth,
        page: [document.documentElement.scrollWidth, document.documentElement.scrollHeight]};
"""


@pytest.mark.parametrize("size", [pk.PHONE, WIDE], ids=lambda s: s["name"])
def test_big_on_big_screens_and_no_overflow_on_a_phone(server, pool, size):
    """The running clock fills most of a 1400-px screen's width ("4:59" at least 60 %,
    "10:00" at least 75 %), and on a phone the longest label, "1d 00:00:00", fits with
    nothing wider or taller than the viewport. Screenshots of both go to docs/ (with
    COUNTDOWN_UPDATE_DOCS=1, or when missing)."""
    d = pool(2)
    pk.emulate_viewport(d, size)
    session = "team-a"  # a readable name for the pictures; left idle at the end
    pk.open_page(d, server, session)
    vw, vh = d.execute_script("return [innerWidth, innerHeight]")
    obs = pk.Observer(server.ws_url(session))
    try:
        cases = [(86400, "1d 00:00:00", 0.5)] if size is pk.PHONE else [(300, None, 0.6), (600, None, 0.75)]
        for seconds, text, share in cases:
            obs.start(seconds)
            pk.wait(d, 3, lambda d: pk.clock_seconds(pk.read(d)["label"]) is not None, "the clock")
            m = d.execute_script(LABEL_WIDTH_JS)
            if text:
                pk.wait(d, 3, lambda d: d.execute_script(LABEL_WIDTH_JS)["text"] in (text, "23:59:59"), text)
            assert m["left"] >= 0 and m["right"] <= vw and m["scroll"] <= m["client"], m
            assert m["page"][0] <= vw and m["page"][1] <= vh, f"the page overflows: {m}"
            assert m["w"] >= share * vw, f"{m['text']} spans {m['w']:.0f}px of {vw}px"
            name = "phone" if size is pk.PHONE else size["name"]
            doc = DOCS_DIR / f"running-{name}.png"
            if UPDATE_DOCS or not doc.exists():
                DOCS_DIR.mkdir(exist_ok=True)
                assert d.save_screenshot(str(doc))
            assert obs.command("cancel")["type"] == "ack"
            pk.wait(d, 3, lambda d: pk.read(d)["label"] == "Ready", "idle")
    finally:
        obs.close()


# 9 ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_404_page_and_open_mode_states_pass_axe(server, pool, session_id, scheme):
    """The 404 page (both languages, the page's style) and the open-mode states this
    issue adds (the session field, the Share panel with its QR code, "End for
    everyone?", a refused finish text) have no axe-core violation, in light and dark."""
    from selenium.webdriver.common.keys import Keys

    d = pool(0)
    d.execute_cdp_cmd("Emulation.setEmulatedMedia",
                      {"features": [{"name": "prefers-color-scheme", "value": scheme}]})
    found = {}

    def audit(state):
        r = pk.axe_audit(d)
        assert r["rules"] >= 30, r["rules"]
        if r["violations"]:
            found[state] = r["violations"]

    d.get(f"{server.http_base}/no-such-page-{uuid.uuid4().hex[:6]}")
    # Chromium logs the page's own 404 status as a console error: that one is meant.
    for e in pk.drain_console(d, HERE):
        if "status of 404" in e.message:
            e.allowed_reason = "the 404 page's own status"
    text = d.find_element("tag name", "main").text
    assert "This page does not exist." in text and "找不到這個頁面。" in text, text
    audit("404")
    pk.open_page(d, server, session_id)
    audit("idle, open mode, session field")
    tab_to(d, "#share > summary")
    keys(d, Keys.ENTER)
    pk.wait(d, 3, lambda d: d.execute_script(
        "const i = document.getElementById('viewer-qr'); return i.complete && i.naturalWidth > 0"), "the QR code")
    audit("Share open, QR code")
    keys(d, Keys.ENTER)
    d.execute_script("document.getElementById('finish-text').value = 'a\\u0007b'")
    tab_to(d, "finish-text")
    keys(d, Keys.ENTER)
    pk.wait(d, 2, lambda d: "finish-text" in host(d)["invalid"], "the refused finish text")
    audit("a refused finish text")
    select_all(d)
    keys(d, Keys.DELETE)
    type_duration(d, "1m")
    keys(d, Keys.ENTER)
    wait_focus(d, "pause", "running")
    tab_to(d, "cancel")
    keys(d, Keys.ENTER)
    wait_focus(d, "confirm-no", "the question")
    audit("End for everyone?")
    shift_tab(d)
    keys(d, Keys.ENTER)
    pk.wait(d, 3, idle_page, "idle")
    assert not found, f"axe violations ({scheme}):\n" + "\n".join(
        f"[{state}]\n{pk.format_violations(v)}" for state, v in found.items())


# 10 --------------------------------------------------------------------------------------
def test_host_console_is_clean(pool, request):
    """No console errors or CSP violations in this file's tests (the QR images and the
    404 page included), apart from the deliberate outage's reconnect attempts."""
    for d in pool.drivers.values():
        pk.drain_console(d, request.node.nodeid)
    mine = [e for e in pk.CONSOLE if e.test.startswith(request.node.nodeid.split("::")[0]) or e.test == HERE]
    problems = [e for e in mine if pk.is_problem(e)]
    assert not problems, "console errors or CSP violations:\n" + "\n".join(
        f"  [{e.test}] {e.level}: {e.message}" for e in problems)
