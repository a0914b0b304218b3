"""Who may press Start, in a real browser, against a server run with --control key.

The first page to open a session becomes its controller: it gets the session's key,
keeps it in its address, and offers a viewer link and a controller link. A page opened
with the viewer link only watches; one opened with the controller link controls. The
server refuses a viewer's start anyway, and the page says so in words.

Waits are WebDriverWait conditions (pagekit.wait); nothing sleeps for a fixed time.
The tests run in file order; the last one checks this file's console entries.
"""

from __future__ import annotations

import re
from urllib.parse import parse_qs, urlsplit

import pytest

import pagekit as pk
from serverproc import start_server

KEY_RE = re.compile(r"^[0-9a-f]{32}$")
HERE = __name__

# Every key these tests saw, to prove none of them reached a browser console.
KEYS_SEEN: set[str] = set()

CONTROL_JS = """
const shown = (id) => {
  const e = document.getElementById(id);
  return !!e && e.getClientRects().length > 0 && getComputedStyle(e).visibility !== 'hidden';
};
const share = document.getElementById('share');
return {
  role: document.documentElement.dataset.role || '',
  conn: [...document.documentElement.classList].find(c => c.startsWith('state-')) || '',
  label: document.getElementById('label').textContent,
  controls: shown('options'),
  start: shown('start'),
  hostWait: shown('host-wait') ? document.getElementById('host-wait').textContent : '',
  controllerShare: shown('share-controller'),
  startDisabled: document.getElementById('start').disabled,
  viewOnly: shown('view-only'),
  viewOnlyText: document.getElementById('view-only').innerText.replace(/\\s+/g, ' ').trim(),
  share: shown('share'),
  shareOpen: share.open,
  viewerLink: document.getElementById('viewer-link').value,
  controllerLink: document.getElementById('controller-link').value,
  shareStatus: document.getElementById('share-status').textContent,
  status: document.getElementById('status').textContent,
  href: location.href,
};
"""


def control(driver) -> dict:
    return driver.execute_script(CONTROL_JS)


def open_as(driver, url: str, role: str, timeout: float = 8) -> dict:
    """Loads `url` and waits until the page is live and knows its role."""
    driver.get(url)
    pk.wait(driver, timeout, lambda d: (lambda c: c["conn"] == "state-live" and c["role"] == role)(control(d)),
            f"the page to be live as {role}")
    return control(driver)


def key_in_address(driver) -> str | None:
    """A key in the address bar, in the query or the fragment: there should be none."""
    parts = urlsplit(driver.current_url)
    keys = parse_qs(parts.query).get("key") or parse_qs(parts.fragment).get("key")
    return keys[0] if keys else None


def held_key(driver) -> str | None:
    """The controller key the page keeps for this tab (sessionStorage), or None."""
    return driver.execute_script(
        "const s = new URLSearchParams(location.search).get('session') || 'default';"
        "return sessionStorage.getItem('countdown.key.' + s);")


def page_key(driver) -> str | None:
    """The page's key: held for the tab, never in the address bar."""
    assert key_in_address(driver) is None, f"the address bar shows a key: {driver.current_url}"
    return held_key(driver)


def wait_countdown_then_finish(drivers, obs, timeout: float = 10) -> None:
    """Every page shows a number while the server runs, then the finish text."""
    obs.wait_for(lambda s: s and s["phase"] == "running", 5, "the run on the server")
    for d in drivers:
        pk.wait(d, 5, lambda d: pk.read(d)["label"].isdigit() and pk.read(d)["busy"] == "true",
                "the countdown on this page")
    for d in drivers:
        pk.wait(d, timeout, lambda d: pk.read(d)["label"] == pk.FINISHED_EN, "the finish text")


@pytest.fixture(scope="module")
def key_server():
    """A server run with --control key, for this file."""
    srv = start_server("--control", "key")
    yield srv
    srv.stop_and_check()


# 1 ---------------------------------------------------------------------------------------
def test_controller_viewer_and_co_host(key_server, pool, session_id):
    """Window A opens a new session without a key and becomes its controller: it shows
    the controls and a Share area whose viewer and controller links are right, and its
    address gains ?key= so a reload keeps control (proved by reloading). Window B, opened
    with the viewer link, has no visible Start button, shows "View only", has no Share
    area and holds the key nowhere in its DOM. Window C, opened with the controller link,
    presses Start; A, B and C all count down and finish together. The viewer sees the
    seed's button throughout (disabled, spinning while the run lasts) but none of the
    controls."""
    a, b, c = pool(0), pool(1), pool(2)
    srv = key_server

    ca = open_as(a, pk.page_url(srv, session_id), "controller")
    key = page_key(a)
    assert key and KEY_RE.match(key), f"the first joiner holds no controller key: {ca['href']}"
    KEYS_SEEN.add(key)
    assert ca["start"] and ca["controls"] and not ca["viewOnly"], f"the controller must see the controls: {ca}"
    assert ca["share"] and not ca["shareOpen"], f"the Share area must be there, closed: {ca}"
    assert f"session={session_id}" in ca["href"], ca["href"]

    from selenium.webdriver.common.by import By

    a.find_element(By.CSS_SELECTOR, "#share > summary").click()
    pk.wait(a, 2, lambda d: d.find_element(By.ID, "viewer-link").is_displayed(), "the open Share area")
    assert not a.find_element(By.ID, "controller-link").is_displayed(), \
        "the controller link stays folded away, so a projected Share panel does not show it"
    a.find_element(By.CSS_SELECTOR, "#share-controller > summary").click()
    ca = control(a)
    viewer_link = f"{srv.http_base}/?session={session_id}"
    controller_link = f"{srv.http_base}/?session={session_id}#key={key}"
    assert ca["viewerLink"] == viewer_link, ca
    assert ca["controllerLink"] == controller_link, ca
    for button in ("copy-viewer", "copy-controller"):
        assert a.find_element(By.ID, button).is_displayed()

    # A reload keeps control: the tab keeps the key (sessionStorage), not the address.
    a.refresh()
    pk.wait(a, 8, lambda d: (lambda c: c["conn"] == "state-live" and c["role"] == "controller")(control(d)),
            "the reloaded page to be the controller again")
    assert page_key(a) == key, "the reload must keep the same key"
    assert control(a)["start"]

    cb = open_as(b, viewer_link, "viewer")
    assert not cb["start"] and cb["hostWait"] == "Waiting for the host", \
        f"an idle viewer sees words in the button's place: {cb}"
    assert not cb["controls"], f"a viewer must not see the controls: {cb}"
    assert cb["viewOnly"] and cb["viewOnlyText"].startswith("View only"), cb
    assert "not accepted" not in cb["viewOnlyText"], "no key was offered, so none was rejected"
    assert cb["share"] and not cb["controllerShare"] and cb["controllerLink"] == "", \
        f"a viewer shares the viewer link only: {cb}"
    assert cb["viewerLink"] == viewer_link, cb
    assert key_in_address(b) is None and held_key(b) is None
    assert key not in b.execute_script("return document.documentElement.outerHTML"), \
        "the viewer's page must not hold the key"

    cc = open_as(c, controller_link, "controller")
    assert cc["start"] and cc["share"], f"the co-host must control: {cc}"
    assert page_key(c) == key, "the link's key is kept for the tab and taken out of the address"

    obs = pk.Observer(srv.ws_url(session_id))  # no key: a watcher that tells the truth
    try:
        pk.set_seconds(c, 2)
        pk.press_start(c)
        wait_countdown_then_finish([a, b, c], obs)
        assert obs.snapshot()["duration"] == 2
        for d in (a, b, c):
            assert pk.read(d)["status"] == "Live", pk.read(d)
        cb = control(b)
        assert cb["hostWait"] and not cb["start"] and not cb["controls"], \
            f"after the run the viewer waits for the host again, with no controls: {cb}"
    finally:
        obs.close()


# 2 ---------------------------------------------------------------------------------------
def test_viewer_is_refused_in_words(key_server, pool, session_id):
    """A page opened with a wrong key, in Traditional Chinese, is a viewer: it shows
    僅供觀看 and says the link's key was not accepted. Even with its disabled button
    enabled by script and clicked, the server refuses with "forbidden", the page says
    so in words, and the session never runs."""
    a, b = pool(0), pool(1)
    open_as(a, pk.page_url(key_server, session_id), "controller")  # the session's controller
    KEYS_SEEN.add(page_key(a))
    wrong = "0" * 32
    cb = open_as(b, pk.page_url(key_server, session_id, key=wrong, lang="zh-Hant"), "viewer")
    assert cb["viewOnly"] and cb["startDisabled"] and not cb["controls"], cb
    assert cb["hostWait"] == "等待主持人", cb
    assert cb["viewOnlyText"] == "僅供觀看 這個連結中的主控金鑰未被接受。", cb

    obs = pk.Observer(key_server.ws_url(session_id))
    try:
        # In one script, so no render in between can hide the controls again.
        b.execute_script("const s = document.getElementById('start');"
                         "s.hidden = false; s.disabled = false; s.click();")
        pk.wait(b, 5, lambda d: control(d)["status"] == "只有這個場次的主控者可以控制倒計時。",
                "the forbidden error in words")
        assert b.execute_script("return document.getElementById('status').dataset.kind") == "error"
        assert control(b)["startDisabled"], "the page disables the button again"
        assert obs.snapshot()["phase"] == "idle", "the server must not have started anything"
        assert pk.read(a)["label"] == "Ready"
    finally:
        obs.close()


# 2b --------------------------------------------------------------------------------------
def test_viewer_keeps_the_seed_button_and_no_controls(key_server, pool, session_id):
    """The view-only page keeps the seed's button: disabled, with the spinner while a
    run lasts, and still disabled (reading Paused, no spinner) while paused, with the
    frozen value; it never shows Pause, −1 min, +1 min, Cancel or the fields to start
    with, and keeps its "View only" note below the button."""
    a, b = pool(0), pool(1)
    open_as(a, pk.page_url(key_server, session_id), "controller")
    KEYS_SEEN.add(page_key(a))
    cb = open_as(b, pk.page_url(key_server, session_id), "viewer")
    assert cb["hostWait"] and not cb["start"] and cb["viewOnly"], cb
    assert pk.read(b)["shown"] == [], f"a viewer has no fields or controls: {pk.read(b)}"
    assert pk.rect(b, "#view-only")["y"] > pk.rect(b, "#host-wait")["y"], "the note sits below the words"
    # The words take the button's box, so the label does not move when a run starts.
    idle_label, idle_wait = pk.rect(b, "#label"), pk.rect(b, "#host-wait")

    obs = pk.Observer(key_server.ws_url(session_id))
    try:
        pk.set_seconds(a, 120)
        pk.press_start(a)
        pk.wait(b, 3, lambda d: (lambda r: r["busy"] == "true" and r["disabled"] and r["spinnerDisplay"] != "none"
                                 and r["startText"] == "Start" and r["shown"] == [])(pk.read(d)),
                "the viewer's disabled button with the spinner, and no controls")
        assert abs(pk.rect(b, "#label")["y"] - idle_label["y"]) <= 1, "the label moved"
        assert abs(pk.rect(b, "#start")["h"] - idle_wait["h"]) <= 1, "the button took another box than the words"
        pk.click(a, "pause")
        st = obs.wait_for(lambda s: s["phase"] == "paused", 3, "paused")
        frozen = pk.clock_label(st["remaining"])
        pk.wait(b, 2, lambda d: (lambda r: r["label"] == frozen and r["busy"] is None and r["disabled"]
                                 and r["spinnerDisplay"] == "none" and r["startText"] == "Paused"
                                 and r["shown"] == [])(pk.read(d)),
                "the viewer's paused page: frozen, no spinner, disabled, no controls")
        assert control(b)["viewOnly"]
        pk.cancel_run(a)
        obs.wait_for(lambda s: s["phase"] == "idle", 3, "idle")
    finally:
        obs.close()


# 3 ---------------------------------------------------------------------------------------
def test_copy_button(key_server, pool, session_id):
    """The Copy button puts the link on the clipboard (the Clipboard API, allowed here)
    and says "Copied"; focusing a link's box selects the whole link, the fallback for
    browsers that cannot copy."""
    from selenium.webdriver.common.by import By

    a = pool(0)
    open_as(a, pk.page_url(key_server, session_id), "controller")
    key = page_key(a)
    KEYS_SEEN.add(key)
    origin = key_server.http_base
    a.execute_cdp_cmd("Browser.grantPermissions", {
        "origin": origin, "permissions": ["clipboardReadWrite", "clipboardSanitizedWrite"]})
    a.find_element(By.CSS_SELECTOR, "#share > summary").click()
    a.find_element(By.CSS_SELECTOR, "#share-controller > summary").click()
    a.find_element(By.ID, "copy-controller").click()
    pk.wait(a, 3, lambda d: control(d)["shareStatus"] == "Copied", "the copy to be confirmed")
    assert a.find_element(By.ID, "copy-controller").text == "Copied"
    pasted = a.execute_async_script(
        "const done = arguments[arguments.length - 1];"
        "navigator.clipboard.readText().then(done, (e) => done('error: ' + e.name));")
    assert pasted == f"{origin}/?session={session_id}#key={key}", pasted
    pk.wait(a, 5, lambda d: d.find_element(By.ID, "copy-controller").text == "Copy",
            "the button to say Copy again")

    a.find_element(By.ID, "viewer-link").click()
    selected = a.execute_script(
        "const i = document.getElementById('viewer-link');"
        "return [document.activeElement === i, i.selectionStart, i.selectionEnd, i.value.length];")
    assert selected[0] and selected[1] == 0 and selected[2] == selected[3] > 0, selected


# 4 ---------------------------------------------------------------------------------------
def test_open_mode_is_unchanged(server, pool, session_id):
    """With the default --control open the snapshot names no role: the page shows the
    controls, no "View only" note, a Share area with the viewer link only, and leaves
    its address alone."""
    a = pool(0)
    url = pk.page_url(server, session_id)
    ca = open_as(a, url, "open")
    assert ca["start"] and not ca["viewOnly"] and ca["share"], ca
    assert not ca["controllerShare"] and ca["controllerLink"] == "", ca
    assert ca["viewerLink"] == url, ca
    assert ca["href"] == url, "open mode must not touch the address"


# 5 ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("size", [pk.DESKTOP, pk.PHONE], ids=lambda s: s["name"])
def test_control_screenshots(key_server, pool, artifacts_dir, size, session_id):
    """Screenshots of the controller (Share closed and open; open in dark mode too on
    desktop) and of the viewer at desktop and phone sizes (the phone viewer also in
    Traditional Chinese), saved to artifacts/screenshots/. Proves the layout: nothing
    is wider than the viewport, the viewer and the closed controller page need no
    scrolling, the Share area's link boxes and Copy buttons fit the width, and opening
    Share scrolls the panel into view."""
    from selenium.webdriver.common.by import By

    a, b = pool(2), pool(1)
    for d in (a, b):
        pk.emulate_viewport(d, size)
    name = size["name"]
    open_as(a, pk.page_url(key_server, session_id), "controller")
    KEYS_SEEN.add(page_key(a))
    vw, vh = a.execute_script("return [innerWidth, innerHeight]")

    def fits(d, what, *, tall_ok=False):
        sw, sh = d.execute_script(
            "return [document.documentElement.scrollWidth, document.documentElement.scrollHeight]")
        assert sw <= vw, f"{what}: wider than the viewport ({sw} > {vw})"
        if not tall_ok:
            assert sh <= vh, f"{what}: taller than the viewport ({sh} > {vh})"

    def shoot(d, what):
        pk.wait(d, 2, lambda d: d.execute_script(
            "return getComputedStyle(document.querySelector('.board')).opacity") == "1", "opaque board")
        path = artifacts_dir / f"{what}-{name}.png"
        assert d.save_screenshot(str(path)), path

    fits(a, "controller")
    shoot(a, "controller")
    a.find_element(By.CSS_SELECTOR, "#share > summary").click()
    a.find_element(By.CSS_SELECTOR, "#share-controller > summary").click()
    pk.wait(a, 2, lambda d: d.find_element(By.ID, "controller-link").is_displayed(), "the open Share area")
    fits(a, "controller, Share open", tall_ok=True)
    for sel in ("#viewer-link", "#controller-link", "#copy-viewer", "#copy-controller"):
        r = pk.rect(a, sel)
        assert r["x"] >= 0 and r["x"] + r["w"] <= vw, f"{sel} sticks out: {r}"
    # The page fills the screen, so the panel opens below the fold: the page scrolls it in.
    pk.wait(a, 3, lambda d: d.execute_script(
        "return document.getElementById('share').getBoundingClientRect().bottom <= innerHeight + 1"),
        "the opened Share area to be scrolled into view")
    shoot(a, "controller-share")
    if name == "desktop":
        a.execute_cdp_cmd("Emulation.setEmulatedMedia",
                          {"features": [{"name": "prefers-color-scheme", "value": "dark"}]})
        shoot(a, "controller-share-dark")

    open_as(b, pk.page_url(key_server, session_id), "viewer")
    fits(b, "viewer")
    shoot(b, "viewer")
    if name == "phone":
        open_as(b, pk.page_url(key_server, session_id, lang="zh-Hant"), "viewer")
        fits(b, "viewer, zh-Hant")
        shoot(b, "viewer-zh-Hant")


# 5b --------------------------------------------------------------------------------------
ROLES_SEEN_JS = """
// Installed before the page's own scripts: every role the page ever shows
// ("" before the first snapshot is no role).
window.__roles = [];
new MutationObserver(() => {
  const r = document.documentElement.dataset.role;
  if (r && window.__roles[window.__roles.length - 1] !== r) window.__roles.push(r);
}).observe(document, {subtree: true, attributes: true, attributeFilter: ['data-role']});
"""


def socket_and_request_urls(driver) -> list[str]:
    """Every WebSocket and HTTP request URL the browser sent, from its performance log."""
    import json

    urls = []
    for entry in driver.get_log("performance"):
        msg = json.loads(entry["message"])["message"]
        if msg["method"] == "Network.webSocketCreated":
            urls.append(msg["params"]["url"])
        elif msg["method"] == "Network.requestWillBeSent":
            urls.append(msg["params"]["request"]["url"])
    return urls


def test_key_stays_out_of_urls(key_server, browser_tools, pool, session_id):
    """A controller link carries the key in its fragment: opening it makes a
    controller, the key goes in the first WebSocket message and in no URL the browser
    sends (WebSocket or HTTP, from Chromium's own network log), and the address bar
    loses it at once. An old ?key= link works too and is cleaned the same way. A
    reload presents the kept key again with no flicker: the page never shows "viewer"
    on the way back to controller."""
    a = pool(0)
    open_as(a, pk.page_url(key_server, session_id), "controller")
    key = page_key(a)
    KEYS_SEEN.add(key)
    base = f"{key_server.http_base}/?session={session_id}"

    d = pk.make_driver(browser_tools, performance_log=True)
    try:
        d.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": ROLES_SEEN_JS})
        for link in (f"{base}#key={key}", f"{base}&key={key}"):
            open_as(d, link, "controller")
            assert page_key(d) == key, link
            assert d.current_url == base, f"the address must lose the key: {d.current_url}"
            urls = socket_and_request_urls(d)
            sockets = [u for u in urls if u.startswith("ws")]
            assert sockets and all(key not in u for u in sockets), f"a WebSocket URL carries the key: {sockets}"
            if "#key=" in link:
                assert all(key not in u for u in urls), "no request of a #key= link may carry the key"
            assert d.execute_script("return window.__roles") == ["controller"], d.execute_script(
                "return window.__roles")
            d.get("about:blank")
        # The tab keeps the key: the plain viewer link in it is a controller again, without a flash.
        d.get(base)
        pk.wait(d, 8, lambda d: control(d)["role"] == "controller" and control(d)["conn"] == "state-live",
                "the tab's kept key to make a controller")
        assert d.execute_script("return window.__roles") == ["controller"]
        d.refresh()
        pk.wait(d, 8, lambda d: control(d)["role"] == "controller", "a controller after the reload")
        assert d.execute_script("return window.__roles") == ["controller"], "no viewer flash on a reload"
        assert all(key not in u for u in socket_and_request_urls(d) if u.startswith("ws"))
    finally:
        pk.drain_console(d, HERE)
        d.quit()


def network_log(driver) -> tuple[dict, dict]:
    """Chromium's network log: each request (its URL, method and body) and each response's
    headers (lowercased), by request id."""
    import json

    requests, headers = {}, {}
    for entry in driver.get_log("performance"):
        msg = json.loads(entry["message"])["message"]
        if msg["method"] == "Network.requestWillBeSent":
            requests[msg["params"]["requestId"]] = msg["params"]["request"]
        elif msg["method"] == "Network.responseReceived":
            headers[msg["params"]["requestId"]] = {k.lower(): v for k, v in msg["params"]["response"]["headers"].items()}
    return requests, headers


def test_controller_qr_code_keeps_the_key_out_of_urls(key_server, browser_tools, session_id):
    """Unfolding the controller link draws its QR code without the key in any URL the
    browser sends (Chromium's own network log): the page POSTs the link to /qr.svg as the
    body, gets it back `no-store`, and shows it from a data: URL; the viewer link's code
    stays a GET that caches may keep."""
    d = pk.make_driver(browser_tools, performance_log=True)
    loaded = "const i = document.getElementById(arguments[0]); return i.complete && i.naturalWidth > 0 && !i.hidden"
    try:
        open_as(d, pk.page_url(key_server, session_id), "controller")
        key = page_key(d)
        KEYS_SEEN.add(key)
        d.execute_script("document.getElementById('share').open = true")
        pk.wait(d, 5, lambda d: d.execute_script(loaded, "viewer-qr"), "the viewer link's code")
        d.execute_script("document.getElementById('share-controller').open = true")
        pk.wait(d, 5, lambda d: d.execute_script(loaded, "controller-qr"), "the controller link's code")
        requests, headers = network_log(d)
        carrying = [r["url"] for r in requests.values() if key in r["url"]]
        assert not carrying, f"request URLs carry the key: {carrying}"
        assert d.execute_script("return document.getElementById('controller-qr').src").startswith("data:image/svg+xml")
        posts = [i for i, r in requests.items() if r["method"] == "POST" and r["url"].endswith("/qr.svg")]
        assert posts, f"no POST /qr.svg among {[r['url'] for r in requests.values()]}"
        assert all(headers[i].get("cache-control") == "no-store" for i in posts), [headers[i] for i in posts]
        gets = [i for i, r in requests.items() if r["method"] == "GET" and "/qr.svg?text=" in r["url"]]
        assert gets and all("max-age" in headers.get(i, {}).get("cache-control", "") for i in gets if i in headers)
    finally:
        pk.drain_console(d, HERE)
        d.quit()


def test_new_controller_link(key_server, pool, session_id):
    """"New controller link" asks first (No focused; No changes nothing), then gives
    this page a new key: its controller link changes and says so, the co-host holding
    the old link becomes a viewer whose page says the key was not accepted, the old
    link opened afresh only watches, and the new link makes a controller."""
    from selenium.webdriver.common.by import By

    a, b, c = pool(0), pool(1), pool(2)
    open_as(a, pk.page_url(key_server, session_id), "controller")
    old = page_key(a)
    KEYS_SEEN.add(old)
    old_link = f"{key_server.http_base}/?session={session_id}#key={old}"
    open_as(c, old_link, "controller")

    a.find_element(By.CSS_SELECTOR, "#share > summary").click()
    a.find_element(By.CSS_SELECTOR, "#share-controller > summary").click()
    a.find_element(By.ID, "rotate-key").click()
    pk.wait(a, 2, lambda d: d.find_element(By.ID, "rotate-confirm").is_displayed(), "the question")
    assert a.execute_script("return document.activeElement.id") == "rotate-no"
    a.find_element(By.ID, "rotate-no").click()
    pk.wait(a, 2, lambda d: not d.find_element(By.ID, "rotate-confirm").is_displayed(), "No")
    assert page_key(a) == old and control(c)["role"] == "controller", "No changes nothing"

    a.find_element(By.ID, "rotate-key").click()
    a.find_element(By.ID, "rotate-yes").click()
    pk.wait(a, 5, lambda d: control(d)["shareStatus"].startswith("A new controller link is ready"), "the new link")
    new = page_key(a)
    KEYS_SEEN.add(new)
    assert new and new != old and KEY_RE.match(new)
    assert control(a)["controllerLink"] == f"{key_server.http_base}/?session={session_id}#key={new}"
    assert control(a)["role"] == "controller"
    pk.wait(c, 5, lambda d: control(d)["role"] == "viewer", "the old link's holder demoted")
    assert "not accepted" in control(c)["viewOnlyText"], control(c)
    open_as(b, old_link, "viewer")
    assert "not accepted" in control(b)["viewOnlyText"]
    open_as(b, control(a)["controllerLink"], "controller")


# 6 ---------------------------------------------------------------------------------------
def test_control_console_is_clean(pool, request):
    """Checks every browser console entry recorded during this file's tests: no errors,
    no CSP violations, and none of the controller keys the tests saw, anywhere."""
    for d in pool.drivers.values():
        pk.drain_console(d, request.node.nodeid)
    mine = [e for e in pk.CONSOLE if e.test.startswith(request.node.nodeid.split("::")[0])]
    problems = [e for e in mine if pk.is_problem(e)]
    assert not problems, "console errors or CSP violations:\n" + "\n".join(
        f"  [{e.test}] {e.level}: {e.message}" for e in problems)
    keys = {k for k in KEYS_SEEN if k}
    assert keys, "the tests above should have seen at least one key"
    leaked = [e for e in mine if any(k in e.message for k in keys)]
    assert not leaked, "a controller key reached the console:\n" + "\n".join(
        f"  [{e.test}] {e.level}: (message withheld)" for e in leaked)
    print(f"{len(mine)} console entries checked for {len(keys)} keys")
