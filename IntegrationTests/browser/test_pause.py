"""Pause, resume and adjust, clock-style labels and counting down to a picked time, in
a real browser against the built server (issue 9).

Waits are WebDriverWait conditions (pagekit.wait); the "stays frozen" checks sample
the pages for a fixed span, as a WebDriverWait condition that ends when the span has
passed.
"""

from __future__ import annotations

import time

import pagekit as pk

RUN_CONTROLS = ["pause", "minus", "plus", "cancel"]
ADJUST_LIMIT_S = 0.2  # the issue: +1 min shows the new value in both windows within 200 ms


def is_paused_at(r: dict, text: str) -> bool:
    """The page shows a paused run frozen on `text`: no spinner, the button back and
    reading Resume, −1/+1 min and Cancel but no Pause."""
    return (r["label"] == text and r["busy"] is None and not r["disabled"]
            and r["spinnerDisplay"] == "none" and r["startText"] == "Resume"
            and r["shown"] == ["minus", "plus", "cancel"])


def is_running(r: dict) -> bool:
    return (pk.clock_seconds(r["label"]) is not None and r["busy"] == "true" and r["disabled"]
            and r["spinnerDisplay"] != "none" and r["shown"] == RUN_CONTROLS)


def shows_right_second(driver, endsAt: float) -> bool:
    """The page's label is a second the server's remaining time rounds up to."""
    r, t0, t1 = pk.read_timed(driver)
    return pk.clock_seconds(r["label"]) in pk.right_seconds(endsAt, t0, t1)


def stays(drivers, span_s: float, check, what: str) -> int:
    """Reads every driver about every 100 ms for `span_s` seconds; each read must pass
    `check`. Returns how many rounds were read."""
    from selenium.webdriver.support.ui import WebDriverWait

    start = time.monotonic()
    rounds = [0]

    def sample(_):
        for d in drivers:
            r = pk.read(d)
            assert check(r), f"{what}: {r}"
        rounds[0] += 1
        return time.monotonic() - start >= span_s

    WebDriverWait(drivers[0], span_s + 5, poll_frequency=0.1).until(sample)
    return rounds[0]


def wait_both_within(drivers, endsAt: float, since: float, what: str) -> float:
    """Waits until every driver shows the right second for `endsAt`; returns the
    seconds from `since` (time.monotonic()) until the last of them did."""
    pending = set(range(len(drivers)))

    def all_right(_):
        for i in list(pending):
            if shows_right_second(drivers[i], endsAt):
                pending.discard(i)
        return not pending

    pk.wait(drivers[0], 3, all_right, what, poll=0.005)
    return time.monotonic() - since


# 1 ---------------------------------------------------------------------------------------
def test_pause_resume_and_adjust_in_two_windows(server, pool, session_id):
    """Two windows on one session. Pause in one: both freeze on the server's frozen
    second (button back, reading Resume, no spinner) and stay frozen for 3 s while the
    server sends nothing. Resume in the other: both count again from the new deadline.
    +1 min in the first: both show the new value within 200 ms; −1 min while paused
    moves the frozen value in both; Cancel while paused takes both back to Ready."""
    a, b = pool(0), pool(1)
    for d in (a, b):
        pk.open_page(d, server, session_id)
    obs = pk.Observer(server.ws_url(session_id))
    try:
        pk.set_seconds(a, 120)
        pk.press_start(a)
        obs.wait_for(lambda s: s["phase"] == "running", 3, "the run")
        for d in (a, b):
            pk.wait(d, 3, lambda d: is_running(pk.read(d)), "the run with Pause, −1 min, +1 min, Cancel")

        pk.click(a, "pause")
        st = obs.wait_for(lambda s: s["phase"] == "paused", 3, "paused")
        assert st["endsAt"] is None and st["remainingMs"] > 0 and not st["spinner"] and st["enabled"], st
        frozen = pk.clock_label(st["remaining"])
        for d in (a, b):
            pk.wait(d, 2, lambda d: is_paused_at(pk.read(d), frozen), f"both frozen on {frozen}")
        seq_before = dict(obs.snapshot())
        rounds = stays([a, b], 3.0, lambda r: is_paused_at(r, frozen), f"frozen on {frozen}")
        assert rounds >= 10, f"only {rounds} samples in 3 s"
        assert obs.snapshot() == seq_before, "the server sent changes while paused"

        pk.click(b, "start")  # reads Resume
        st = obs.wait_for(lambda s: s["phase"] == "running", 3, "resumed")
        resumed_ends = st["endsAt"]
        for d in (a, b):
            pk.wait(d, 2, lambda d: is_running(pk.read(d)) and shows_right_second(d, resumed_ends),
                    "both counting from the resumed deadline")

        before = obs.snapshot()["endsAt"]
        pk.click(a, "plus")
        took = wait_both_within([a, b], before + 60_000, time.monotonic(), "+1 min in both windows")
        print(f"+1 min showed in both windows {took * 1000:.0f} ms after the click")
        assert took <= ADJUST_LIMIT_S, f"+1 min took {took:.3f}s to show in both (limit {ADJUST_LIMIT_S}s)"
        st = obs.wait_for(lambda s: s["endsAt"] == before + 60_000, 2, "the server's new deadline")
        assert st["duration"] == 180, st

        pk.click(b, "pause")
        st = obs.wait_for(lambda s: s["phase"] == "paused", 3, "paused again")
        for d in (a, b):
            pk.wait(d, 2, lambda d: is_paused_at(pk.read(d), pk.clock_label(st["remaining"])), "frozen again")
        pk.click(a, "minus")
        st = obs.wait_for(lambda s: s["phase"] == "paused" and s["duration"] == 120, 3, "−1 min while paused")
        lowered = pk.clock_label(st["remaining"])
        for d in (a, b):
            pk.wait(d, 1, lambda d: is_paused_at(pk.read(d), lowered), f"both frozen on {lowered}")

        pk.cancel_run(b)
        obs.wait_for(lambda s: s["phase"] == "idle", 3, "idle after cancel while paused")
        for d in (a, b):
            pk.wait(d, 2, lambda d: (lambda r: r["label"] == "Ready" and r["startText"] == "Start"
                                     and not r["disabled"] and r["shown"] == ["mode", "seconds"])(pk.read(d)),
                    "Ready, with the seconds to start with again")
    finally:
        obs.close()


# 2 ---------------------------------------------------------------------------------------
def test_window_joining_while_paused_shows_the_frozen_value(server, pool, session_id):
    """A window opened on a paused session shows the frozen value (and its words for
    screen readers) at once, with the Resume button, and does not count."""
    c = pool(2)
    obs = pk.Observer(server.ws_url(session_id))
    try:
        obs.start(3725)
        reply = obs.command("pause")
        assert reply["type"] == "ack", reply
        st = obs.wait_for(lambda s: s["phase"] == "paused", 2, "paused")
        frozen = pk.clock_label(st["remaining"])
        assert frozen in ("1:02:05", "1:02:04"), frozen
        r = pk.open_page(c, server, session_id)
        pk.wait(c, 1, lambda d: is_paused_at(pk.read(d), frozen), f"the joiner frozen on {frozen}")
        assert pk.read(c)["words"].startswith("1 hour, 2 minutes, "), pk.read(c)
        stays([c], 1.5, lambda r: is_paused_at(r, frozen), "the joiner stays frozen")
    finally:
        obs.close()


# 3 ---------------------------------------------------------------------------------------
def test_long_runs_read_like_a_clock(server, pool, session_id):
    """A 3725 s run reads 1:02:05 (and "1 hour, 2 minutes, 5 seconds" to a screen
    reader; in Traditional Chinese "1 小時 2 分 5 秒"), and a 5 s run reads 5."""
    d = pool(0)
    for lang, words in (("en", "1 hour, 2 minutes, 5 seconds"), ("zh-Hant", "1 小時 2 分 5 秒")):
        pk.open_page(d, server, session_id, lang=lang)
        obs = pk.Observer(server.ws_url(session_id))
        try:
            obs.start(3725)
            pk.wait(d, 2, lambda d: pk.read(d)["label"] == "1:02:05", "1:02:05", poll=0.02)
            # The label and the words are drawn together; within the first second both say 5 s.
            r = pk.read(d)
            assert r["label"] != "1:02:05" or r["words"] == words, r
            pk.wait(d, 2, lambda d: pk.read(d)["label"] == "1:02:04", "the next second, 1:02:04")
            assert obs.command("cancel")["type"] == "ack"
            pk.wait(d, 2, lambda d: pk.read(d)["busy"] is None, "idle")
        finally:
            obs.close()
    pk.open_page(d, server, session_id)
    obs = pk.Observer(server.ws_url(session_id))
    try:
        obs.start(5)
        pk.wait(d, 2, lambda d: pk.read(d)["label"] == "5", "5", poll=0.02)
        assert pk.read(d)["words"] in ("5 seconds", "4 seconds"), pk.read(d)
    finally:
        obs.close()


# 4 ---------------------------------------------------------------------------------------
LOCAL_VALUE_JS = """
const d = new Date(arguments[0]);
const p = (n) => String(n).padStart(2, '0');
return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())}T${p(d.getHours())}:${p(d.getMinutes())}:${p(d.getSeconds())}`;
"""

SET_UNTIL_JS = """
const input = document.getElementById('until');
input.value = arguments[0];
input.dispatchEvent(new Event('input', {bubbles: true}));
return input.value;
"""


def picker_holds(shown: str, value: str) -> bool:
    """A datetime-local input shows a time on a whole minute without its ":00"."""
    return shown == value or (value.endswith(":00") and shown == value[:-3])


def test_start_until_a_picked_time(server, pool, session_id):
    """Choosing "Until" offers a local date-and-time picker. A time in the past is
    refused in words before anything is sent; a time 90 s ahead sends start with that
    `until`, and the server's run ends exactly then."""
    from selenium.webdriver.support.ui import Select

    d = pool(0)
    pk.open_page(d, server, session_id)
    obs = pk.Observer(server.ws_url(session_id))
    try:
        Select(d.find_element("id", "mode")).select_by_value("until")
        pk.wait(d, 1, lambda d: "until" in pk.read(d)["shown"] and "seconds" not in pk.read(d)["shown"],
                "the date-and-time picker in place of the seconds")
        assert d.execute_script("return document.getElementById('until').type") == "datetime-local"
        assert d.execute_script("return document.getElementById('until').value"), "the picker starts with a time"

        past = d.execute_script(LOCAL_VALUE_JS, int(time.time() * 1000) - 60_000)
        assert picker_holds(d.execute_script(SET_UNTIL_JS, past), past)
        pk.press_start(d)
        pk.wait(d, 1, lambda d: pk.read(d)["status"].startswith("Pick a time at least"), "the refusal in words")
        assert d.execute_script("return document.getElementById('until').getAttribute('aria-invalid')") == "true"
        assert obs.snapshot()["phase"] == "idle", "nothing may be sent for a time in the past"

        target = (int(time.time()) + 90) * 1000  # a whole second: the picker has no ms
        value = d.execute_script(LOCAL_VALUE_JS, target)
        assert picker_holds(d.execute_script(SET_UNTIL_JS, value), value)
        pk.press_start(d)
        st = obs.wait_for(lambda s: s["phase"] == "running", 3, "the run")
        assert st["endsAt"] == target, f"endsAt {st['endsAt']} is not the picked time {target}"
        pk.wait(d, 2, lambda d: shows_right_second(d, target) and pk.read(d)["busy"] == "true",
                "the page counting to the picked time")
        assert pk.read(d)["label"] in ("1:30", "1:29", "1:28"), pk.read(d)
        assert obs.command("cancel")["type"] == "ack"
    finally:
        obs.close()
