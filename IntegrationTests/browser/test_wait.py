"""The waiting phase in a real browser against the built server (issue 18): the seed's
spinner held until something outside says "done" or "fail" (or the timeout passes),
the time elapsed counting up under the label, Done, Fail and Cancel for a host and
none for a viewer, and how a finished wait reads, in words and in its colour, in both
languages.

The waits are started by an independent protocol client (pagekit.Observer), as a CI
job would. The server and the browser run on this machine, so the server's clock is
time.time(). Waits are WebDriverWait conditions (pagekit.wait) or the observer's own
wait for a state; nothing sleeps for a fixed time.
"""

from __future__ import annotations

import math
import re
import shutil
import time

import pytest

import pagekit as pk
from test_a11y import key_server, open_with_role  # noqa: F401 - key_server is a fixture
from test_host import focused, hold_enter, keys, tab_to, wait_focus
from test_page import DOCS_DIR, DOCS_SIZE, UPDATE_DOCS

WAIT_JS = """
const shown = (id) => { const e = document.getElementById(id); return !!e && e.getClientRects().length > 0; };
const b = document.getElementById('start');
const label = document.getElementById('label');
const root = getComputedStyle(document.documentElement);
return {
  conn: [...document.documentElement.classList].find(c => c.startsWith('state-')) || '',
  phase: document.documentElement.dataset.phase || '',
  outcome: document.documentElement.dataset.outcome || '',
  text: document.getElementById('label-text').textContent,
  elapsed: shown('elapsed') ? document.getElementById('elapsed').textContent : '',
  badge: shown('outcome') ? document.getElementById('outcome').textContent : '',
  words: document.getElementById('label-words').textContent,
  title: document.title,
  busy: b.getAttribute('aria-busy'),
  spinner: getComputedStyle(b.querySelector('.spinner')).display !== 'none',
  spinnerText: document.getElementById('spinner-text').textContent,
  pressable: !(b.disabled || b.getAttribute('aria-disabled') === 'true'),
  buttonDisabled: b.disabled,
  hostWait: shown('host-wait'),
  controls: ['mode', 'seconds', 'pause', 'minus', 'plus', 'done', 'fail', 'cancel'].filter(shown),
  controlsName: document.getElementById('run-controls').getAttribute('aria-label'),
  confirm: shown('confirm') ? document.getElementById('confirm-text').textContent : '',
  confirmYes: document.getElementById('confirm-yes').textContent,
  color: getComputedStyle(label).color,
  badgeColor: getComputedStyle(document.getElementById('outcome')).color,
  ok: root.getPropertyValue('--ok').trim(),
  bad: root.getPropertyValue('--bad').trim(),
  warn: root.getPropertyValue('--warn').trim(),
  fg: root.getPropertyValue('--fg').trim(),
};
"""

# The words a correct page shows, written here rather than read from i18n.js.
WORDS = {
    "en": {"waiting": "Waiting", "busy": "Waiting for a result", "done": "Done", "failed": "Failed",
           "timeout": "Timed out", "askDone": "Mark it done for everyone?", "askFail": "Mark it failed for everyone?",
           "askEnd": "End for everyone?", "start": "Start", "ready": "Ready", "controls": "Wait controls",
           "sep": ": ", "elapsed": "elapsed"},
    "zh-Hant": {"waiting": "等待中", "busy": "等待結果中", "done": "完成", "failed": "失敗", "timeout": "逾時",
                "askDone": "要為所有人標記為完成嗎？", "askFail": "要為所有人標記為失敗嗎？",
                "askEnd": "要為所有人結束嗎？", "start": "開始", "ready": "準備就緒", "controls": "等待控制",
                "sep": "：", "elapsed": "已過"},
}
COLOUR = {"done": "ok", "failed": "bad", "timeout": "warn"}
WAIT_CONTROLS = ["done", "fail", "cancel"]
LANGS = pytest.mark.parametrize("lang", ["en", "zh-Hant"])


def state(driver) -> dict:
    return driver.execute_script(WAIT_JS)


def rgb(hex_colour: str) -> str:
    """A #rrggbb custom property as getComputedStyle writes a colour."""
    h = hex_colour.lstrip("#")
    return "rgb({}, {}, {})".format(*(int(h[i:i + 2], 16) for i in (0, 2, 4)))


def elapsed_seconds(text: str) -> int | None:
    """The seconds an m:ss (or h:mm:ss) elapsed clock shows, or None."""
    if not re.fullmatch(r"\d+:\d\d(:\d\d)?", text):
        return None
    return pk.clock_seconds(text)


def right_elapsed(started_at: int, t0: float, t1: float, slack_ms: float = 50) -> set[int]:
    """The whole seconds a correct page may show when read between t0 and t1 (ms): the
    clock estimate may be off by a few ms, so a little slack at each end."""
    return set(range(max(0, math.floor((t0 - slack_ms - started_at) / 1000)),
                     math.floor((t1 + slack_ms - started_at) / 1000) + 1))


def is_waiting(s: dict, text: str, *, host: bool) -> bool:
    """The seed's spinner on a button that takes no press, the text as the label, a
    clock under it, and the wait's controls for a host (none for a viewer)."""
    return (s["phase"] == "waiting" and s["busy"] == "true" and s["spinner"] and not s["pressable"]
            and s["text"] == text and elapsed_seconds(s["elapsed"]) is not None and not s["badge"]
            and not s["hostWait"] and s["controls"] == (WAIT_CONTROLS if host else []))


def start_wait(obs: pk.Observer, **fields) -> dict:
    """Sends `wait` as a CI job would and returns the server's waiting state."""
    reply = obs.command("wait", **fields)
    assert reply["type"] == "ack", reply
    return obs.wait_for(lambda s: s["phase"] == "waiting", 3, "the wait on the server")


def count_up(driver, started_at: int, upto: int, timeout: float) -> list[int]:
    """Reads the page every 50 ms until its clock shows `upto` seconds; every read must
    be the second the server's startedAt gives at that moment, and never go back.
    Returns the seconds seen, in order."""
    seen: list[int] = []

    def check(d):
        t0 = time.time() * 1000
        s = state(d)
        t1 = time.time() * 1000
        assert s["phase"] == "waiting", s
        secs = elapsed_seconds(s["elapsed"])
        assert secs in right_elapsed(started_at, t0, t1), f"shows {s['elapsed']} at {(t0 - started_at):.0f} ms"
        assert not seen or secs >= seen[-1], f"went back from {seen[-1]} to {secs}"
        if not seen or seen[-1] != secs:
            seen.append(secs)
        return secs >= upto

    pk.wait(driver, timeout, check, f"the clock to reach {upto} s")
    return seen


def press_and_confirm(driver, op: str, ask: str) -> None:
    """Presses Done, Fail or Cancel, checks the question and that No holds the focus,
    then answers Yes."""
    pk.click(driver, op)
    pk.wait(driver, 2, lambda d: state(d)["confirm"] == ask, f"the question {ask!r}")
    assert focused(driver) == "confirm-no", "a stray Enter must answer No"
    pk.click(driver, "confirm-yes")


def assert_finished(s: dict, lang: str, outcome: str, text: str, *, host: bool = True) -> None:
    """A finished wait: the text, the outcome in words (a badge when the text does not
    say it) and in its colour, no spinner, and the big button back for a host (a viewer
    gets "Waiting for the host" in its place)."""
    w = WORDS[lang]
    assert s["phase"] == "finished" and s["outcome"] == outcome, s
    assert s["text"] == text, s
    assert s["badge"] == ("" if text == w[outcome] else w[outcome]), s
    assert s["words"] == (text if text == w[outcome] else f"{w[outcome]}{w['sep']}{text}"), s
    colour = rgb(s[COLOUR[outcome]])
    assert s["color"] == colour, f"the label is {s['color']}, not the {outcome} colour {colour}"
    if s["badge"]:
        assert s["badgeColor"] == colour, s
    assert s["busy"] is None and not s["spinner"], s
    assert (s["pressable"] and "seconds" in s["controls"]) if host else (s["hostWait"] and s["controls"] == []), s
    assert s["elapsed"] == "", s


# 1 ---------------------------------------------------------------------------------------
@LANGS
def test_waiting_then_done_from_the_page(server, pool, session_id, lang):
    """A CI job's `wait` turns every page into the seed's spinner: the button spins and
    takes no press, the label is the job's text, and under it the time elapsed counts
    up in m:ss, each second the one the server's startedAt gives (read every 50 ms, never
    going back). A host gets Done, Fail and Cancel and nothing else. Done asks first
    (No focused), and Yes ends the wait for everyone: "Done" in the page's language, in
    the done colour, and the start fields are back."""
    d = pool(0)
    w = WORDS[lang]
    pk.open_page(d, server, session_id, lang=lang)
    obs = pk.Observer(server.ws_url(session_id))
    try:
        st = start_wait(obs, label="Deploying")
        pk.wait(d, 3, lambda d: is_waiting(state(d), "Deploying", host=True), "the waiting page")
        s = state(d)
        assert s["spinnerText"] == w["busy"] and s["controlsName"] == w["controls"], s
        seen = count_up(d, st["startedAt"], 2, 5)
        assert seen[-1] == 2 and len(seen) >= 2, seen
        s = state(d)
        assert w["elapsed"] in s["words"] and s["words"].startswith("Deploying"), s
        assert re.fullmatch(rf"Deploying 0:0[2-3] · {session_id}", s["title"]), s["title"]

        press_and_confirm(d, "done", w["askDone"])
        fin = obs.wait_for(lambda s: s["phase"] == "finished", 3, "the wait to finish")
        assert fin["outcome"] == "done", fin
        pk.wait(d, 3, lambda d: state(d)["phase"] == "finished", "the finished page")
        s = state(d)
        assert_finished(s, lang, "done", w["done"])
        assert "seconds" in s["controls"] and "done" not in s["controls"], s
    finally:
        obs.close()


# 2 ---------------------------------------------------------------------------------------
@LANGS
def test_waiting_then_failed(server, pool, session_id, lang):
    """Fail on the page asks "Mark it failed for everyone?" and Yes finishes the wait
    as failed: "Failed" in the page's language, in the failed colour. A `fail` from
    outside with its own text shows that text as is, with the outcome in the page's
    language beside it (and first in what a screen reader hears)."""
    d = pool(0)
    w = WORDS[lang]
    pk.open_page(d, server, session_id, lang=lang)
    obs = pk.Observer(server.ws_url(session_id))
    try:
        start_wait(obs)
        pk.wait(d, 3, lambda d: is_waiting(state(d), w["waiting"], host=True), "the default text, translated")
        press_and_confirm(d, "fail", w["askFail"])
        assert obs.wait_for(lambda s: s["phase"] == "finished", 3, "failed")["outcome"] == "failed"
        pk.wait(d, 3, lambda d: state(d)["outcome"] == "failed", "the failed page")
        assert_finished(state(d), lang, "failed", w["failed"])

        start_wait(obs, label="Deploying")
        pk.wait(d, 3, lambda d: is_waiting(state(d), "Deploying", host=True), "waiting again")
        assert state(d)["outcome"] == "", "a waiting page shows no outcome"
        reply = obs.command("fail", label="Deploy failed")
        assert reply["type"] == "ack", reply
        pk.wait(d, 3, lambda d: state(d)["text"] == "Deploy failed", "the job's own text")
        assert_finished(state(d), lang, "failed", "Deploy failed")
    finally:
        obs.close()


# 3 ---------------------------------------------------------------------------------------
@LANGS
def test_waiting_then_timed_out(server, pool, session_id, lang):
    """A wait with timeoutSeconds 2 that nobody ends: the page counts up to the timeout
    and never past it, then the server finishes it as timed out: "Timed out" in the
    page's language, in the timed-out colour. A timeoutLabel of the job's own is shown
    as is, with "Timed out" beside it."""
    d = pool(0)
    w = WORDS[lang]
    pk.open_page(d, server, session_id, lang=lang)
    obs = pk.Observer(server.ws_url(session_id))
    try:
        st = start_wait(obs, label="Building", timeoutSeconds=2)
        assert st["timeoutAt"] == st["startedAt"] + 2000, st
        pk.wait(d, 3, lambda d: is_waiting(state(d), "Building", host=True), "the waiting page")

        def waits_then_times_out(d):
            s = state(d)
            if s["phase"] == "waiting":
                assert elapsed_seconds(s["elapsed"]) <= 2, f"counted past the timeout: {s['elapsed']}"
                return False
            return s

        s = pk.wait(d, 6, waits_then_times_out, "the timeout")
        assert obs.wait_for(lambda s: s["phase"] == "finished", 3, "timeout")["outcome"] == "timeout"
        assert time.time() * 1000 >= st["timeoutAt"], "finished before its timeout"
        assert_finished(s, lang, "timeout", w["timeout"])

        start_wait(obs, label="Deploying", timeoutSeconds=1, timeoutLabel="Deploy timed out")
        pk.wait(d, 6, lambda d: state(d)["text"] == "Deploy timed out", "the job's own timeout text")
        assert_finished(state(d), lang, "timeout", "Deploy timed out")
    finally:
        obs.close()


# 4 ---------------------------------------------------------------------------------------
def test_elapsed_is_drawn_from_started_at(server, pool, session_id):
    """A page that opens on a wait already two seconds old shows 0:02 (or 0:03) at
    once, not 0:00: the clock is drawn from the server's startedAt, not from when the
    page saw the wait. Cancel (after "End for everyone?") takes both pages back to
    Ready."""
    a, b = pool(0), pool(1)
    pk.open_page(a, server, session_id)
    obs = pk.Observer(server.ws_url(session_id))
    try:
        st = start_wait(obs, label="Deploying")
        count_up(a, st["startedAt"], 2, 5)
        pk.open_page(b, server, session_id)
        t0 = time.time() * 1000
        s = state(b)
        t1 = time.time() * 1000
        assert is_waiting(s, "Deploying", host=True), s
        assert elapsed_seconds(s["elapsed"]) in right_elapsed(st["startedAt"], t0, t1), s
        assert elapsed_seconds(s["elapsed"]) >= 2, s
        press_and_confirm(a, "cancel", WORDS["en"]["askEnd"])
        obs.wait_for(lambda s: s["phase"] == "idle", 3, "idle")
        for d in (a, b):
            pk.wait(d, 3, lambda d: (lambda s: s["text"] == "Ready" and s["elapsed"] == "" and s["outcome"] == ""
                                     and s["pressable"])(state(d)), "Ready")
    finally:
        obs.close()


# 5 ---------------------------------------------------------------------------------------
# Records the op of every message the page sends from now on (the page's own socket
# is already open; its send is the prototype's).
RECORD_SENT_JS = """
window.__sentOps = [];
const send = WebSocket.prototype.send;
WebSocket.prototype.send = function (data) {
  try { window.__sentOps.push(JSON.parse(data).op); } catch (e) { window.__sentOps.push(String(data)); }
  return send.call(this, data);
};
"""


def test_keyboard_cannot_end_a_wait_by_accident(server, pool, session_id):
    """A wait begun while the host types in the duration field puts the focus on the big
    button, which takes no press: Enter, Space and a held Enter there change nothing.
    Tab reaches Done; Enter asks with No focused, and a second Enter answers No, giving
    the focus back to Done. The wait still runs on the server throughout."""
    from selenium.webdriver.common.keys import Keys

    d = pool(0)
    pk.open_page(d, server, session_id)
    d.find_element("id", "seconds").click()
    obs = pk.Observer(server.ws_url(session_id))
    try:
        start_wait(obs, label="Deploying")
        pk.wait(d, 3, lambda d: is_waiting(state(d), "Deploying", host=True), "the waiting page")
        wait_focus(d, "start", "a wait begun from outside")
        d.execute_script(RECORD_SENT_JS)
        keys(d, Keys.ENTER)
        keys(d, " ")
        hold_enter(d)
        tab_to(d, "done")
        keys(d, Keys.ENTER)
        pk.wait(d, 2, lambda d: state(d)["confirm"] == WORDS["en"]["askDone"], "the question")
        wait_focus(d, "confirm-no", "the question")
        keys(d, Keys.ENTER)
        pk.wait(d, 2, lambda d: state(d)["confirm"] == "" and state(d)["controls"] == WAIT_CONTROLS, "No")
        wait_focus(d, "done", "No gives the focus back")
        # A press sends at once (in the key's own handler): none of these sent anything.
        sent = [op for op in d.execute_script("return window.__sentOps") if op != "ping"]
        assert sent == [], f"the keyboard sent {sent}"
        assert obs.snapshot()["phase"] == "waiting", obs.snapshot()
        # The wait ends from outside while the focus is on Done: it goes to the fields, not to nothing.
        assert obs.command("done")["type"] == "ack"
        pk.wait(d, 3, lambda d: state(d)["phase"] == "finished", "finished")
        wait_focus(d, "seconds", "Done went away")
    finally:
        obs.close()


# 6 ---------------------------------------------------------------------------------------
def held_key(driver) -> str:
    key = driver.execute_script(
        "return sessionStorage.getItem('countdown.key.' + new URLSearchParams(location.search).get('session'))")
    assert key, "the controller holds no key"
    return key


@LANGS
def test_viewer_sees_the_spinner_and_no_controls(key_server, pool, session_id, lang):
    """With --control key, the controller's page gets Done, Fail and Cancel while a wait
    lasts; a viewer's page gets the same spinner (its button disabled), text and clock,
    and no control at all. A wait that a CI job holding the key ends as done reads the
    same on both."""
    a, b = pool(0), pool(1)
    w = WORDS[lang]
    url = pk.page_url(key_server, session_id, lang=lang)
    open_with_role(a, url, "controller")
    open_with_role(b, url, "viewer")
    obs = pk.Observer(key_server.ws_url(session_id))
    try:
        assert obs.command("wait")["code"] == "forbidden", "a viewer may not start a wait"
        assert obs.command("auth", key=held_key(a))["type"] == "ack"
        st = start_wait(obs, label="Deploying")
        pk.wait(a, 3, lambda d: is_waiting(state(d), "Deploying", host=True), "the controller's waiting page")
        pk.wait(b, 3, lambda d: is_waiting(state(d), "Deploying", host=False), "the viewer's waiting page")
        s = state(b)
        assert s["buttonDisabled"] and s["spinnerText"] == w["busy"], s
        count_up(b, st["startedAt"], 1, 4)
        assert obs.command("done", label="Deployed")["type"] == "ack"
        for d, host in ((a, True), (b, False)):
            pk.wait(d, 3, lambda d: state(d)["phase"] == "finished", "finished")
            assert_finished(state(d), lang, "done", "Deployed", host=host)
    finally:
        obs.close()


# 7 ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("size", [pk.DESKTOP, pk.PHONE], ids=lambda s: s["name"])
def test_wait_screenshots_and_layout(server, pool, artifacts_dir, size):
    """Screenshots of waiting, done, failed and timed out at desktop and phone sizes,
    saved to artifacts/screenshots/ (the phone ones also to docs/ with
    COUNTDOWN_UPDATE_DOCS=1, or when missing). Proves the layout holds with the line
    under the label: the label and the button are each at least 20% of the viewport's
    height, keep the boxes they had idle, and nothing overflows."""
    d = pool(2)
    pk.emulate_viewport(d, size)
    session = "deploy" if size["name"] == DOCS_SIZE else "deploy-b"
    pk.open_page(d, server, session)
    vw, vh = d.execute_script("return [innerWidth, innerHeight]")
    idle = (pk.rect(d, "#label"), pk.rect(d, "#start"))

    def shoot(name):
        for sel, box in zip(("#label", "#start"), idle):
            now = pk.rect(d, sel)
            assert now["h"] >= 0.2 * vh, f"{name}: {sel} is {now['h']:.0f}px, under 20% of {vh}px"
            assert all(abs(box[k] - now[k]) <= 1 for k in ("y", "h")), f"{name}: {sel} moved: {box} -> {now}"
        sw, sh = d.execute_script(
            "return [document.documentElement.scrollWidth, document.documentElement.scrollHeight]")
        assert sw <= vw and sh <= vh, f"{name}: the page overflows the viewport ({sw}x{sh} > {vw}x{vh})"
        for sel in ("#label-text", "#elapsed", "#outcome"):
            r = pk.rect(d, sel)
            if r["h"]:
                assert r["x"] >= 0 and r["x"] + r["w"] <= vw, f"{name}: {sel} leaves the screen: {r}"
                lab = idle[0]
                assert r["y"] >= lab["y"] - 1 and r["y"] + r["h"] <= lab["y"] + lab["h"] + 1, f"{name}: {sel} leaves the label's box"
        path = artifacts_dir / f"{name}-{size['name']}.png"
        assert d.save_screenshot(str(path)), path
        doc = DOCS_DIR / f"{name}.png"
        if size["name"] == DOCS_SIZE and (UPDATE_DOCS or not doc.exists()):
            shutil.copyfile(path, doc)

    obs = pk.Observer(server.ws_url(session))
    try:
        st = start_wait(obs, label="Deploying")
        count_up(d, st["startedAt"], 3, 6)
        shoot("waiting")
        assert obs.command("done", label="Deployed")["type"] == "ack"
        pk.wait(d, 3, lambda d: state(d)["badge"] == "Done", "done")
        shoot("done")
        start_wait(obs, label="Deploying")
        assert obs.command("fail", label="Deploy failed")["type"] == "ack"
        pk.wait(d, 3, lambda d: state(d)["badge"] == "Failed", "failed")
        shoot("failed")
        start_wait(obs, label="Deploying", timeoutSeconds=1, timeoutLabel="Deploy timed out")
        pk.wait(d, 5, lambda d: state(d)["badge"] == "Timed out", "timed out")
        shoot("timeout")
    finally:
        obs.close()


# 8 ---------------------------------------------------------------------------------------
def test_wait_console_is_clean(pool, request):
    """Checks every browser console entry recorded during this file's tests (which run
    after test_page.py's own console check): no errors and no CSP violations. Proves it
    is not vacuous: a probe written to the console is captured under this file."""
    d = pool(0)
    d.get("about:blank")
    d.execute_script("console.info('wait-console-probe')")
    for driver in pool.drivers.values():
        pk.drain_console(driver, request.node.nodeid)
    mine = [e for e in pk.CONSOLE if e.test.startswith(request.node.nodeid.split("::")[0])]
    assert any("wait-console-probe" in e.message for e in mine), "the probe was not captured"
    problems = [e for e in mine if pk.is_problem(e)]
    assert not problems, "console errors or CSP violations:\n" + "\n".join(
        f"  [{e.test}] {e.level}: {e.message}" for e in problems)
