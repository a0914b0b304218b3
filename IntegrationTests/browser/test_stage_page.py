"""The page on a stage (issue 20), in headless Chromium against the built server: the
level colours (warning, danger, overtime) on the label and the button with their
contrast computed from the computed styles, in light and dark mode, and the frame in
which they turn; overtime counting up and Stop with the time over; the start's options
checked before anything is sent; the presenter message in every view (the overlay's
over a transparent background); the blackout on a viewer, a view and the controller;
the chime at a level change; axe-core on each of those states.

Screenshots: docs/level-normal.png, docs/level-warning.png, docs/level-danger.png,
docs/level-over.png and docs/overlay-message.png (refreshed with COUNTDOWN_UPDATE_DOCS=1,
or when missing). The session's truth is an independent protocol client (pagekit's
Observer); the server runs on this machine, so its clock is time.time().
"""

from __future__ import annotations

import math
import time

import pytest

import pagekit as pk
from serverproc import start_server
from test_views import (STAGE, audio_spied, keep_in_docs, open_view, open_without_chime, overlay_picture, png_pixels,
                        shown, spy, transparent_screenshot)

LEVEL_ORDER = ("normal", "warning", "danger", "over")
WRAP_UP = "Wrap up, please: five minutes for questions"

# Contrast from the computed styles, WCAG 2.1's formula: the label against the nearest
# opaque background up its ancestors, the button's text and its spinner against the
# button's own background.
CONTRAST_JS = """
const parse = (c) => {
  const p = c.match(/rgba?\\(([^)]+)\\)/)[1].split(/[\\s,\\/]+/).filter(Boolean).map(Number);
  return {r: p[0], g: p[1], b: p[2], a: p.length > 3 ? p[3] : 1};
};
const lin = (v) => { v /= 255; return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4; };
const lum = (c) => 0.2126 * lin(c.r) + 0.7152 * lin(c.g) + 0.0722 * lin(c.b);
const ratio = (a, b) => { const [x, y] = [lum(a), lum(b)].sort((p, q) => q - p); return (x + 0.05) / (y + 0.05); };
const under = (n) => {
  for (; n; n = n.parentElement) { const c = parse(getComputedStyle(n).backgroundColor); if (c.a > 0) return c; }
  return {r: 255, g: 255, b: 255, a: 1};
};
const label = document.getElementById('label');
const start = document.getElementById('start');
const bs = getComputedStyle(start);
const sp = getComputedStyle(start.querySelector('.spinner'));
return {
  level: document.documentElement.dataset.level,
  text: document.getElementById('label-text').textContent,
  labelColor: getComputedStyle(label).color,
  buttonBackground: bs.backgroundColor,
  label: ratio(parse(getComputedStyle(label).color), under(label)),
  button: ratio(parse(bs.color), parse(bs.backgroundColor)),
  spinner: sp.display === 'none' ? null : ratio(parse(sp.borderTopColor), parse(bs.backgroundColor)),
  buttonOpacity: bs.opacity,
  textShown: getComputedStyle(start.querySelector('.start-text')).visibility === 'visible',
};
"""

# Every change of data-level, with the label's text at that moment and the time: render()
# writes the label before the level, so a record shows the digit the colour came with.
LEVEL_LOG_JS = """
window.__levels = [];
new MutationObserver(() => {
  window.__levels.push({level: document.documentElement.dataset.level,
                        text: document.getElementById('label-text').textContent, at: Date.now()});
}).observe(document.documentElement, {attributes: true, attributeFilter: ['data-level']});
// What the polite live region was given to say, each time it was given something.
window.__said = [];
const region = document.getElementById('announce');
new MutationObserver(() => { if (region.textContent) window.__said.push(region.textContent); })
  .observe(region, {childList: true, characterData: true, subtree: true});
"""

SAID = {
    "en": ["Warning: 12 seconds left", "Danger: 6 seconds left", "Overtime"],
    "zh-Hant": ["警告：剩下 12 秒", "危險：剩下 6 秒", "已超時"],
}


@pytest.fixture(scope="module")
def key_server():
    """A server run with --control key, for the blackout's viewer and controller."""
    srv = start_server("--control", "key")
    yield srv
    srv.stop_and_check()


def js(d, script: str, *args):
    return d.execute_script(script, *args)


def level(d) -> str:
    return js(d, "return document.documentElement.dataset.level || ''")


def label(d) -> str:
    return js(d, "return document.getElementById('label-text').textContent")


def audit(d, state: str) -> None:
    r = pk.axe_audit(d)
    assert r["rules"] >= 30, f"{state}: axe checked only {r['rules']} rules"
    assert not r["violations"], f"{state}:\n" + pk.format_violations(r["violations"])


def open_stage(d) -> None:
    """Opens the footer's Stage area (message, blackout, the next start's options)."""
    from selenium.webdriver.common.by import By

    if not js(d, "return document.getElementById('stage').open"):
        d.find_element(By.CSS_SELECTOR, "#stage > summary").click()
    pk.wait(d, 2, lambda d: d.find_element(By.ID, "message-text").is_displayed(), "the open Stage area")


def type_into(d, element_id: str, text: str) -> None:
    from selenium.webdriver.common.by import By

    box = d.find_element(By.ID, element_id)
    box.clear()
    if text:
        box.send_keys(text)


def status(d) -> str:
    return js(d, "return document.getElementById('status').textContent")


# -- levels ------------------------------------------------------------------------------------
@pytest.mark.parametrize("scheme,lang", [("light", "en"), ("dark", "zh-Hant")])
def test_levels_colour_the_label_and_the_button_in_the_digits_frame(server, pool, session_id, artifacts_dir,
                                                                     scheme, lang):
    """A run started with warnAtSeconds 12, dangerAtSeconds 6 and overtime: the page's
    data-level turns to warning in the very render that shows "12" (no later than a
    frame after endsAt - 12 s on the server's clock), to danger with "6", to over with
    "+0" once the server says overtime, and each level gives the label and the button a
    colour of its own, with at least 4.5:1 contrast for the label on the page and the
    button's text on the button (3:1 for its spinner), in light and dark mode. Each
    change is given to the polite live region once, in words, in the page's language
    (English, Traditional Chinese). axe-core finds no violation at warning, danger and
    overtime. docs/level-*.png (light)."""
    d = pool(0)
    pk.emulate_viewport(d, pk.DESKTOP)
    d.execute_cdp_cmd("Emulation.setEmulatedMedia", {"features": [{"name": "prefers-color-scheme", "value": scheme}]})
    session = "talk" if scheme == "light" else session_id  # a readable name for the pictures
    obs = pk.Observer(server.ws_url(session))
    try:
        pk.open_page(d, server, session, lang=lang)
        js(d, LEVEL_LOG_JS)
        obs.start(16, overtime=True, warnAtSeconds=12, dangerAtSeconds=6)
        s = obs.snapshot()
        ends = s["endsAt"]
        assert (s["warnAtSeconds"], s["dangerAtSeconds"], s["overtime"], s["level"]) == (12, 6, True, "normal"), s
        seen = {}
        for name, timeout in (("normal", 2), ("warning", 6), ("danger", 8), ("over", 9)):
            pk.wait(d, timeout, lambda d: level(d) == name and pk.read(d)["busy"] == "true", f"the {name} level")
            seen[name] = js(d, CONTRAST_JS)
            assert seen[name]["level"] == name
            if scheme == "light":
                path = artifacts_dir / f"level-{name}.png"
                assert d.save_screenshot(str(path))
                keep_in_docs(path, f"level-{name}.png")
            if name != "normal":
                audit(d, f"{name} ({scheme})")
        assert obs.command("stop")["type"] == "ack"
        finished = pk.FINISHED_EN if lang == "en" else pk.FINISHED_ZH
        pk.wait(d, 3, lambda d: level(d) == "normal" and label(d) == finished, "normal after the stop")
        assert js(d, "return window.__said") == SAID[lang]

        log = js(d, "return window.__levels")
        changes = [e for i, e in enumerate(log) if i == 0 or log[i - 1]["level"] != e["level"]]
        assert [e["level"] for e in changes] == ["normal", "warning", "danger", "over", "normal"], log
        warning, danger, over = changes[1], changes[2], changes[3]
        # The colour comes with the digit, predicted from the times: not a patch later.
        assert warning["text"] == "12" and danger["text"] == "6" and over["text"] == "+0", changes
        for entry, boundary in ((warning, ends - 12_000), (danger, ends - 6_000)):
            assert boundary - 30 <= entry["at"] <= boundary + 250, f"{entry} against the boundary {boundary}"
        assert over["at"] >= ends - 30, f"{over} before the deadline {ends}"

        for name in LEVEL_ORDER:
            m = seen[name]
            assert m["label"] >= 4.5, f"{scheme} {name}: the label's contrast is {m['label']:.2f}: {m}"
            # A level's button text (shown on Resume while paused) is always checked; the
            # normal running button's text is hidden under its spinner (the seed's colours).
            if name != "normal" or m["textShown"]:
                assert m["button"] >= 4.5, f"{scheme} {name}: the button's contrast is {m['button']:.2f}: {m}"
            if m["spinner"] is not None:
                assert m["spinner"] >= 3, f"{scheme} {name}: the spinner's contrast is {m['spinner']:.2f}: {m}"
            assert m["buttonOpacity"] == "1", m
        assert len({seen[n]["labelColor"] for n in LEVEL_ORDER}) == 4, seen
        assert len({seen[n]["buttonBackground"] for n in LEVEL_ORDER}) == 4, seen
    finally:
        obs.close()


# -- overtime, Stop and the start's options ----------------------------------------------------
def test_overtime_counts_up_and_stop_shows_the_time_over(server, pool, session_id):
    """The Stage area's start options are checked before anything is sent (a danger time
    not below the warning time is refused in words, on its field, and the session stays
    idle). With "Count into overtime" ticked, a 2-second run reaches zero and the label
    counts "+0", "+1", "+2" from the server's overSince (each reading matches the server's
    clock), the spinner stays on and Stop shows in place of Pause; Stop asks, then
    finishes the run "stopped" with the finish text and, under it, the time over the
    server kept in overMs; a reload keeps the overtime option. axe-core finds no
    violation in overtime nor once stopped."""
    d = pool(1)
    pk.emulate_viewport(d, pk.DESKTOP)
    obs = pk.Observer(server.ws_url(session_id))
    try:
        pk.open_page(d, server, session_id)
        open_stage(d)
        type_into(d, "warn-at", "5")
        type_into(d, "danger-at", "10")
        pk.set_seconds(d, 2)
        pk.press_start(d)
        pk.wait(d, 2, lambda d: status(d) == "The danger time must be below the warning time.", "the refusal")
        assert js(d, "return document.getElementById('danger-at').getAttribute('aria-invalid')") == "true"
        assert js(d, "return document.activeElement.id") == "danger-at"
        assert obs.snapshot()["phase"] == "idle"  # the page's own words: it never sent the start

        type_into(d, "warn-at", "")
        type_into(d, "danger-at", "")
        d.find_element("id", "overtime").click()
        pk.press_start(d)
        s = obs.wait_for(lambda s: s["phase"] == "running", 3, "the page's start")
        assert s["overtime"] is True and s.get("warnAtSeconds") is None and s.get("dangerAtSeconds") is None, s
        ends = s["endsAt"]
        s = obs.wait_for(lambda s: s["phase"] == "overtime", 4, "overtime")
        assert s["overSince"] == ends and s["level"] == "over" and s["spinner"] is True, s

        readings = set()
        deadline = time.monotonic() + 6
        while "+2" not in readings:
            assert time.monotonic() < deadline, f"the label did not reach +2: {readings}"
            r, t0, t1 = pk.read_timed(d)
            text = r["label"]
            right = {f"+{pk.clock_label(max(0, math.floor((t - ends) / 1000)))}" for t in (t0 - 20, t1 + 20)}
            assert text in right, f"{text} read between {t0} and {t1}, overSince {ends}: want {right}"
            readings.add(text)
            time.sleep(0.05)
        assert {"+0", "+1", "+2"} <= readings, readings
        r = pk.read(d)
        assert r["busy"] == "true" and r["spinnerDisplay"] != "none", r
        assert "pause" not in r["shown"] and shown(d, "#stop") and shown(d, "#cancel"), r
        assert js(d, "return document.title").startswith("+")
        audit(d, "overtime")

        pk.click(d, "stop")
        pk.wait(d, 2, lambda d: shown(d, "#confirm-yes"), "Stop for everyone?")
        assert js(d, "return document.getElementById('confirm-text').textContent") == "Stop for everyone?"
        assert js(d, "return document.activeElement.id") == "confirm-no"
        pk.click(d, "confirm-yes")
        s = obs.wait_for(lambda s: s["phase"] == "finished", 3, "the stop")
        assert s["outcome"] == "stopped" and s["overMs"] >= 2000 and s["level"] == "normal", s
        over = f"+{pk.clock_label(s['overMs'] // 1000)} over"
        pk.wait(d, 2, lambda d: label(d) == pk.FINISHED_EN, "the finish text")
        pk.wait(d, 2, lambda d: js(d, "return document.getElementById('outcome').textContent") == over, over)
        assert shown(d, "#outcome") and level(d) == "normal"
        assert js(d, "return document.documentElement.dataset.outcome") == "stopped"
        audit(d, "stopped")
        # The next show starts from the same options: remembered for the session.
        pk.open_page(d, server, session_id)
        assert js(d, "return document.getElementById('overtime').checked") is True
    finally:
        obs.close()


# -- the message -------------------------------------------------------------------------------
def test_message_in_every_view_and_checked_before_it_is_sent(server, pool, session_id, artifacts_dir):
    """A controller types a message in the Stage area (the counter counts it) and shows
    it: the session's state carries it, and it appears under the label on the full page,
    in the presenter view (larger, and the view still fits the screen), and in the
    overlay over a transparent background (docs/overlay-message.png: transparent corners,
    opaque message pixels). A message of 141 characters or one with a NUL is refused on
    the page, in words, and nothing changes; Clear removes it from every view. axe-core
    finds no violation on the three views with a message. On a phone, two lines of
    message need no scrolling, and the opened Stage area fits the width."""
    a, b, c = pool(0), pool(1), pool(2)
    for d in (b, c):
        pk.emulate_viewport(d, STAGE)
    obs = pk.Observer(server.ws_url(session_id))
    try:
        pk.open_page(a, server, session_id)
        open_view(b, server, session_id, view="presenter")
        open_view(c, server, session_id, view="overlay")
        obs.start(600)
        open_stage(a)
        type_into(a, "message-text", WRAP_UP)
        assert js(a, "return document.getElementById('message-count').textContent") == f"{len(WRAP_UP)}/140"
        pk.click(a, "message-send")
        obs.wait_for(lambda s: s.get("message") == WRAP_UP, 3, "the message in the state")
        for d in (a, b, c):
            pk.wait(d, 2, lambda d: js(d, "return document.getElementById('message').textContent") == WRAP_UP
                    and shown(d, "#message"), "the message on screen")
        size = {name: float(js(d, "return getComputedStyle(document.getElementById('message')).fontSize")[:-2])
                for name, d in (("full", a), ("presenter", b))}
        assert size["presenter"] >= 2 * size["full"], size
        sw, sh = js(b, "return [document.documentElement.scrollWidth, document.documentElement.scrollHeight]")
        assert sw <= STAGE["width"] and sh <= STAGE["height"], f"the presenter view overflows: {sw}x{sh}"
        assert pk.rect(b, "#label")["h"] >= 0.5 * STAGE["height"]
        for name, d in (("full page", a), ("presenter", b), ("overlay", c)):
            audit(d, f"message, {name}")
        # On a phone the label's box makes room: two lines of message need no scrolling.
        pk.emulate_viewport(a, pk.PHONE)
        js(a, "document.getElementById('stage').open = false")
        pk.wait(a, 2, lambda d: js(d, "return innerWidth") == pk.PHONE["width"], "the phone's viewport")
        sw, sh = js(a, "return [document.documentElement.scrollWidth, document.documentElement.scrollHeight]")
        assert sw <= pk.PHONE["width"] and sh <= pk.PHONE["height"], f"the phone page overflows: {sw}x{sh}"
        lines = js(a, "const m = document.getElementById('message');"
                      "return m.getBoundingClientRect().height / parseFloat(getComputedStyle(m).lineHeight)")
        assert lines >= 1.9, f"the message takes {lines:.1f} lines on a phone: this proves less than it says"
        # The Stage area opened on a phone fits its width, every field and button in it.
        open_stage(a)
        assert js(a, "return document.documentElement.scrollWidth") <= pk.PHONE["width"]
        for sel in ("#message-text", "#message-send", "#message-clear", "#blackout", "#warn-at", "#danger-at"):
            r = pk.rect(a, sel)
            assert r["x"] >= 0 and r["x"] + r["w"] <= pk.PHONE["width"], f"{sel} sticks out on a phone: {r}"
        pk.emulate_viewport(a, pk.DESKTOP)

        overlay_picture(c, artifacts_dir, "overlay-message.png", "#message")

        # Refused on the page: too long, or a control character (set as a paste would).
        type_into(a, "message-text", "x" * 141)
        assert js(a, "return document.getElementById('message-count').dataset.over") == "true"
        pk.click(a, "message-send")
        pk.wait(a, 2, lambda d: status(d) == "A message can be at most 140 characters.", "the refusal")
        assert js(a, "return document.getElementById('message-text').getAttribute('aria-invalid')") == "true"
        js(a, "const m = document.getElementById('message-text'); m.value = 'a\\u0000b';"
              "m.dispatchEvent(new Event('input'));")
        pk.click(a, "message-send")
        pk.wait(a, 2, lambda d: status(d).startswith("A message cannot hold control characters"), "the refusal")
        assert obs.snapshot()["message"] == WRAP_UP  # the page's own words: it never sent them

        pk.click(a, "message-clear")
        obs.wait_for(lambda s: s.get("message") is None, 3, "the message cleared")
        pk.wait(a, 2, lambda d: js(d, "return document.activeElement.id") == "message-text",
                "the focus on the field once Clear goes away")
        for d in (a, b, c):
            pk.wait(d, 2, lambda d: not shown(d, "#message"), "no message on screen")
        assert obs.command("cancel")["type"] == "ack"
    finally:
        obs.close()


# -- the blackout ------------------------------------------------------------------------------
def test_blackout_blanks_viewers_and_views_but_not_the_controller(key_server, pool, session_id):
    """With --control key, the controller's Blackout toggle sets blackout in the state:
    the viewer's page and the presenter view go black (nothing drawn: every sampled pixel
    of a screenshot is black), with a note for screen readers, the overlay is wholly
    transparent, while the controller keeps
    its page and a "Blackout on" mark, the toggle pressed. axe-core finds no violation on
    the blank viewer nor on the controller. Off again, the viewer sees the countdown."""
    from selenium.webdriver.common.by import By
    import base64

    a, b, c = pool(0), pool(1), pool(2)
    for d in (a, b, c):
        pk.emulate_viewport(d, pk.DESKTOP)
    url = pk.page_url(key_server, session_id)
    a.get(url)
    pk.wait(a, 8, lambda d: js(d, "return document.documentElement.dataset.role") == "controller"
            and js(d, "return document.documentElement.classList.contains('state-live')"), "the controller")
    b.get(url)
    pk.wait(b, 8, lambda d: js(d, "return document.documentElement.dataset.role") == "viewer"
            and js(d, "return document.documentElement.classList.contains('state-live')"), "the viewer")
    open_view(c, key_server, session_id, view="presenter")
    obs = pk.Observer(key_server.ws_url(session_id))
    try:
        assert not shown(b, "#stage"), "a viewer has no Stage area"
        pk.click(a, "start")
        obs.wait_for(lambda s: s["phase"] == "running", 3, "the run")
        open_stage(a)
        pk.click(a, "blackout")
        obs.wait_for(lambda s: s.get("blackout") is True, 3, "the blackout in the state")
        for d in (b, c):
            pk.wait(d, 2, lambda d: js(d, "return document.documentElement.dataset.blackout") == "blank", "blank")
            assert js(d, "return getComputedStyle(document.querySelector('.board')).visibility") == "hidden"
            assert js(d, "return getComputedStyle(document.body).backgroundColor") == "rgb(0, 0, 0)"
            png = base64.b64decode(d.execute_cdp_cmd("Page.captureScreenshot", {"format": "png"})["data"])
            width, height, rows, bpp = png_pixels(png)
            lit = [(x, y) for y in range(0, height, 4) for x in range(0, width, 4)
                   if any(rows[y][x * bpp + i] for i in range(3))]
            assert not lit, f"{len(lit)} sampled pixels are not black, e.g. {lit[:5]}"
            assert js(d, "return document.getElementById('blanked-note').hidden") is False
        # The overlay, opened during the blackout, is all transparent: the stream shows its scene.
        open_view(c, key_server, session_id, view="overlay")
        assert js(c, "return document.documentElement.dataset.blackout") == "blank"
        width, height, rows, bpp = png_pixels(transparent_screenshot(c))
        seen = [(x, y) for y in range(0, height, 4) for x in range(0, width, 4) if rows[y][x * bpp + 3]]
        assert bpp == 4 and not seen, f"{len(seen)} sampled overlay pixels are not transparent, e.g. {seen[:5]}"
        pk.wait(a, 2, lambda d: shown(d, "#blackout-on"), "the controller's Blackout on mark")
        assert js(a, "return document.getElementById('blackout-on').textContent") == \
            "Blackout on: viewers see a blank screen"
        assert js(a, "return document.documentElement.dataset.blackout") == "indicator"
        assert js(a, "return getComputedStyle(document.querySelector('.board')).visibility") == "visible"
        assert a.find_element(By.ID, "blackout").get_attribute("aria-pressed") == "true"
        audit(a, "blackout, controller")
        audit(b, "blackout, viewer")

        pk.click(a, "blackout")
        obs.wait_for(lambda s: s.get("blackout") is False, 3, "the blackout off")
        pk.wait(b, 2, lambda d: js(d, "return document.documentElement.dataset.blackout") == "off"
                and js(d, "return getComputedStyle(document.querySelector('.board')).visibility") == "visible",
                "the viewer's countdown back")
        assert not shown(a, "#blackout-on")
    finally:
        obs.close()


# -- the chime at a level change ---------------------------------------------------------------
def test_chime_plays_at_a_level_change(server, pool, session_id):
    """With the chime on, a run with a warning time chimes when the page turns to
    warning (start() called with data-level already "warning", within a moment of
    endsAt - warnAtSeconds) and again at zero; nothing else starts a sound. Checked with
    the spy on AudioContext and start() of test_views, installed before any page script."""
    d = pool(2)
    obs = pk.Observer(server.ws_url(session_id))
    try:
        with audio_spied(d):
            open_without_chime(d, server, session_id)
            pk.click(d, "chime")
            pk.wait(d, 3, lambda d: len(spy(d)["starts"]) == 1, "the chime heard once when turned on")
            obs.start(4, warnAtSeconds=2)
            ends = obs.snapshot()["endsAt"]
            pk.wait(d, 6, lambda d: len(spy(d)["starts"]) == 3, "the chimes at the warning and at zero")
            warning, zero = spy(d)["starts"][1:]
            assert warning["level"] == "warning" and warning["phase"] == "running", warning
            assert ends - 2000 - 50 <= warning["at"] <= ends - 2000 + 600, f"{warning}, the deadline {ends}"
            assert zero["phase"] == "finished" and ends - 50 <= zero["at"] <= ends + 600, zero
            assert spy(d)["created"] == 1
    finally:
        obs.close()
