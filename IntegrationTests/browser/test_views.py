"""The views chosen by the URL (?view=overlay, ?view=presenter), the chime at zero, the
flash at zero, and embedding the page in another site's iframe (--frame-ancestors), in
headless Chromium against the built server.

The overlay's screenshot is taken with a transparent default background (CDP), so its
alpha channel is what OBS would composite; the test reads the PNG's pixels to prove it.
The chime is checked with a spy on AudioContext and AudioBufferSourceNode.start,
installed by the test before any page script runs (the page itself has no test hook).
"""

from __future__ import annotations

import base64
import os
import shutil
import struct
import threading
import time
import zlib
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

import pagekit as pk
from serverproc import start_server

REPO_ROOT = Path(__file__).resolve().parent.parent.parent
DOCS_DIR = REPO_ROOT / "docs"
UPDATE_DOCS = os.environ.get("COUNTDOWN_UPDATE_DOCS") == "1"
STAGE = {"name": "stage", "width": 1280, "height": 720, "mobile": False, "dpr": 1}  # an OBS canvas

HIDDEN_IN_VIEWS = ("#start", "#controls", ".meta", "#chime", "#view-only", "#status")


def open_view(d, server, session: str, **params) -> None:
    d.get(pk.page_url(server, session, **params))
    pk.wait(d, 5, lambda d: d.execute_script(
        "return document.documentElement.classList.contains('state-live')"), "the view to be live")


def shown(d, selector: str) -> bool:
    return d.execute_script(
        "const n = document.querySelector(arguments[0]); return !!n && n.getClientRects().length > 0", selector)


def label(d) -> str:
    return d.execute_script("return document.getElementById('label-text').textContent")


def style(d, selector: str, prop: str) -> str:
    return d.execute_script("return getComputedStyle(document.querySelector(arguments[0]))[arguments[1]]",
                            selector, prop)


def keep_in_docs(path: Path, name: str) -> None:
    """docs/<name> is tracked: refreshed only with COUNTDOWN_UPDATE_DOCS=1 or when missing."""
    doc = DOCS_DIR / name
    if UPDATE_DOCS or not doc.exists():
        shutil.copyfile(path, doc)


# -- a PNG's pixels (no imaging library needed) ----------------------------------------------
def png_pixels(data: bytes) -> tuple[int, int, list[bytes], int]:
    """(width, height, rows of raw pixel bytes, bytes per pixel) of an 8-bit RGB or RGBA PNG."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, header = 8, b"", None
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        chunk = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", chunk)
        elif kind == b"IDAT":
            idat += chunk
        pos += 12 + length
    width, height, depth, colour, _, _, interlace = header
    assert depth == 8 and colour in (2, 6) and interlace == 0, header
    bpp = 4 if colour == 6 else 3
    raw, stride, rows, prev = zlib.decompress(idat), width * bpp, [], bytearray(width * bpp)
    for y in range(height):
        kind, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b, c = prev[i], prev[i - bpp] if i >= bpp else 0
            if kind == 1:
                line[i] = (line[i] + a) & 255
            elif kind == 2:
                line[i] = (line[i] + b) & 255
            elif kind == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif kind == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(bytes(line))
        prev = line
    return width, height, rows, bpp


def transparent_screenshot(d) -> bytes:
    """A PNG of the viewport with the browser's default (white) background made transparent."""
    d.execute_cdp_cmd("Emulation.setDefaultBackgroundColorOverride", {"color": {"r": 0, "g": 0, "b": 0, "a": 0}})
    try:
        return base64.b64decode(d.execute_cdp_cmd("Page.captureScreenshot", {"format": "png"})["data"])
    finally:
        d.execute_cdp_cmd("Emulation.setDefaultBackgroundColorOverride", {})


def overlay_picture(d, artifacts_dir: Path, name: str, selector: str) -> None:
    """Saves the overlay as OBS would composite it (artifacts and docs/<name>) and proves
    it: transparent at the corners and the left edge, opaque pixels across `selector`."""
    png = transparent_screenshot(d)
    path = artifacts_dir / name
    path.write_bytes(png)
    width, height, rows, bpp = png_pixels(png)
    assert (width, height) == (STAGE["width"], STAGE["height"]) and bpp == 4, (width, height, bpp)
    for x, y in ((0, 0), (width - 1, 0), (0, height - 1), (width - 1, height - 1), (5, height // 2)):
        assert rows[y][x * 4 + 3] == 0, f"pixel {x},{y} is not transparent: {rows[y][x * 4:x * 4 + 4]}"
    box = pk.rect(d, selector)
    # Three rows across the box: its middle may fall between two lines of text.
    opaque = max(sum(1 for x in range(int(box["x"]), int(box["x"] + box["w"])) if rows[y][x * 4 + 3] == 255)
                 for y in (int(box["y"] + box["h"] * f) for f in (0.25, 0.5, 0.75)))
    assert opaque > 10, f"{selector}'s rows have only {opaque} opaque pixels"
    keep_in_docs(path, name)


# -- the views --------------------------------------------------------------------------------
def test_overlay_is_the_label_alone_on_a_transparent_page(server, pool, session_id, artifacts_dir):
    """?view=overlay shows the label and nothing else (no button, controls, footer or
    chime toggle); its page is transparent, so a screenshot with no default background
    has transparent corners and opaque label pixels (docs/overlay.png); axe-core finds
    no violation, in light and dark mode, which looks the same; the countdown runs in it
    as on the full page."""
    d = pool(0)
    pk.emulate_viewport(d, STAGE)
    obs = pk.Observer(server.ws_url(session_id))
    try:
        open_view(d, server, session_id, view="overlay")
        assert d.execute_script("return document.documentElement.dataset.view") == "overlay"
        for sel in HIDDEN_IN_VIEWS:
            assert not shown(d, sel), f"{sel} is shown in the overlay"
        assert shown(d, "#label")
        assert style(d, "html", "backgroundColor") == "rgba(0, 0, 0, 0)"
        assert style(d, "body", "backgroundColor") == "rgba(0, 0, 0, 0)"

        obs.start(30)
        pk.wait(d, 3, lambda d: pk.clock_seconds(label(d)) in (29, 30), "the overlay counting down")
        r = pk.axe_audit(d)
        assert r["rules"] >= 30 and not r["violations"], pk.format_violations(r["violations"])

        overlay_picture(d, artifacts_dir, "overlay.png", "#label-text")

        # A dark system scheme changes nothing: the same type, still no violation.
        colour = style(d, "#label", "color")
        d.execute_cdp_cmd("Emulation.setEmulatedMedia",
                          {"features": [{"name": "prefers-color-scheme", "value": "dark"}]})
        assert style(d, "#label", "color") == colour
        assert style(d, "html", "backgroundColor") == "rgba(0, 0, 0, 0)"
        r = pk.axe_audit(d)
        assert not r["violations"], pk.format_violations(r["violations"])
    finally:
        obs.close()


@pytest.mark.parametrize("size,weight,want_vh,want_weight", [
    ("20", "300", 20, "300"),
    ("40", "900", 40, "900"),
    ("1e400", "bold", 60, "700"),  # bad values fall back to the defaults
    ("101", "450", 60, "700"),
    ("-0", "-100", 60, "700"),
])
def test_overlay_size_and_weight_come_from_the_url(server, pool, session_id, size, weight, want_vh, want_weight):
    """&size= sets the overlay label's height in percent of the view (a one-digit clock,
    whose width allows more, is exactly that tall), &weight= its weight; a value out of
    range or not a plain whole number gives the default (60, 700)."""
    d = pool(1)
    pk.emulate_viewport(d, STAGE)
    obs = pk.Observer(server.ws_url(session_id))
    try:
        obs.start(9)
        open_view(d, server, session_id, view="overlay", size=size, weight=weight)
        pk.wait(d, 3, lambda d: d.execute_script(
            "return document.getElementById('label').dataset.clock") == "1", "a one-character clock")
        px = float(style(d, "#label", "fontSize").removesuffix("px"))
        assert abs(px - want_vh / 100 * STAGE["height"]) < 0.5, f"font-size {px}px for size={size}"
        assert style(d, "#label", "fontWeight") == want_weight
    finally:
        obs.close()


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_presenter_fills_the_screen_with_the_label_and_the_time_of_day(server, pool, session_id, artifacts_dir,
                                                                       scheme):
    """?view=presenter: no controls or footer, the label's box at least 80% of the
    screen's height, the time of day under it (the machine's local time, to the minute),
    a mark while the spinner is on and none after; axe-core finds no violation, in light
    and dark mode (docs/presenter.png, light)."""
    d = pool(0)
    pk.emulate_viewport(d, STAGE)
    d.execute_cdp_cmd("Emulation.setEmulatedMedia", {"features": [{"name": "prefers-color-scheme", "value": scheme}]})
    obs = pk.Observer(server.ws_url(session_id))
    try:
        open_view(d, server, session_id, view="presenter")
        for sel in HIDDEN_IN_VIEWS:
            assert not shown(d, sel), f"{sel} is shown in the presenter view"
        assert pk.rect(d, "#label")["h"] >= 0.8 * STAGE["height"]
        assert style(d, ".view-spinner", "visibility") == "hidden"

        def time_matches(d) -> bool:
            before = time.strftime("%H:%M")
            shown_time = d.execute_script("return document.getElementById('time-of-day').textContent")
            return shown_time in (before, time.strftime("%H:%M"))

        pk.wait(d, 2, time_matches, "the time of day")
        assert shown(d, "#time-of-day")
        obs.start(90)
        pk.wait(d, 3, lambda d: label(d) in ("1:30", "1:29"), "the presenter counting down")
        pk.wait(d, 2, lambda d: style(d, ".view-spinner", "visibility") == "visible", "the spinner's mark")
        r = pk.axe_audit(d)
        assert r["rules"] >= 30 and not r["violations"], pk.format_violations(r["violations"])
        box = pk.rect(d, "#label-text")
        assert box["w"] >= 0.5 * STAGE["width"], f"the clock is only {box['w']}px wide"
        sw, sh = d.execute_script(
            "return [document.documentElement.scrollWidth, document.documentElement.scrollHeight]")
        assert sw <= STAGE["width"] and sh <= STAGE["height"], f"the presenter view overflows: {sw}x{sh}"
        if scheme == "light":
            path = artifacts_dir / "presenter.png"
            assert d.save_screenshot(str(path))
            keep_in_docs(path, "presenter.png")
        obs.command("cancel")
        pk.wait(d, 2, lambda d: style(d, ".view-spinner", "visibility") == "hidden", "no mark once idle")
    finally:
        obs.close()


# -- the flash at zero -----------------------------------------------------------------------
@pytest.mark.parametrize("view", ["overlay", "presenter"])
def test_views_flash_at_zero_but_not_under_reduced_motion(server, pool, session_id, view):
    """When a countdown reaches zero the view flashes (the label animates), and under
    prefers-reduced-motion: reduce it is marked the same but does not move. The full page
    does not flash."""
    d = pool(1)
    obs = pk.Observer(server.ws_url(session_id))
    try:
        for motion, animation in (("no-preference", "zero-flash"), ("reduce", "none")):
            d.execute_cdp_cmd("Emulation.setEmulatedMedia",
                              {"features": [{"name": "prefers-reduced-motion", "value": motion}]})
            open_view(d, server, session_id, view=view)
            assert d.execute_script("return 'flash' in document.documentElement.dataset") is False
            obs.start(1)
            pk.wait(d, 4, lambda d: d.execute_script("return 'flash' in document.documentElement.dataset"),
                    f"the flash at zero ({motion})")
            assert label(d) == pk.FINISHED_EN
            assert style(d, ".label-box", "animationName") == animation, motion
        # The full page never flashes.
        d.execute_cdp_cmd("Emulation.setEmulatedMedia", {"features": []})
        open_view(d, server, session_id)
        obs.start(1)
        obs.wait_for(lambda s: s["phase"] == "finished", 4, "the finish")
        pk.wait(d, 2, lambda d: label(d) == pk.FINISHED_EN, "finished on the full page")
        assert d.execute_script("return 'flash' in document.documentElement.dataset") is False
        assert style(d, ".label-box", "animationName") == "none"
    finally:
        obs.close()


# -- the chime --------------------------------------------------------------------------------
AUDIO_SPY = """
(() => {
  const spy = { created: 0, starts: [] };
  Object.defineProperty(window, '__audioSpy', { value: spy });
  const Real = window.AudioContext;
  window.AudioContext = class extends Real {
    constructor(...args) { super(...args); spy.created += 1; }
  };
  const start = AudioBufferSourceNode.prototype.start;
  AudioBufferSourceNode.prototype.start = function (...args) {
    const root = document.documentElement;
    spy.starts.push({ at: Date.now(), phase: root.dataset.phase || '', level: root.dataset.level || '' });
    return start.apply(this, args);
  };
})();
"""


@contextmanager
def audio_spied(d):
    """AUDIO_SPY in every page `d` loads meanwhile; the chime's switch forgotten after."""
    script = d.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": AUDIO_SPY})["identifier"]
    try:
        yield
    finally:
        d.execute_cdp_cmd("Page.removeScriptToEvaluateOnNewDocument", {"identifier": script})
        d.execute_script("localStorage.removeItem('countdown.chime')")


def open_without_chime(d, server, session: str) -> None:
    """Opens the full page with the chime's switch forgotten, as on a first visit (off)."""
    open_view(d, server, session)
    d.execute_script("localStorage.removeItem('countdown.chime')")
    open_view(d, server, session)


def through_zero(d, obs, seconds: int) -> None:
    """Starts a countdown and waits until this page has taken in its finish (the page sets
    data-phase in the same handler that plays the chime, just before it)."""
    obs.start(seconds)
    phase = "return document.documentElement.dataset.phase"
    pk.wait(d, 2, lambda d: d.execute_script(phase) == "running", "the page to see the run")
    pk.wait(d, seconds + 3, lambda d: d.execute_script(phase) == "finished", "the page to see zero")


def spy(d) -> dict:
    return d.execute_script("return {created: window.__audioSpy.created, starts: window.__audioSpy.starts}")


def test_chime_is_unlocked_by_its_toggle_and_plays_at_zero(server, pool, session_id):
    """The chime is off by default: a page that sees a countdown reach zero creates no
    AudioContext. The toggle's click creates one (the user gesture autoplay rules ask
    for), plays the sound once to say so, and is remembered in localStorage; then the
    next zero calls start() within a moment of the server's deadline. After a reload the
    switch reads on, but nothing is created until the page gets a click. Checked with a
    spy on AudioContext and start() installed before any page script."""
    d = pool(2)
    obs = pk.Observer(server.ws_url(session_id))
    try:
        with audio_spied(d):
            open_without_chime(d, server, session_id)
            assert d.execute_script("return document.getElementById('chime').getAttribute('aria-pressed')") == "false"
            through_zero(d, obs, 1)
            assert spy(d) == {"created": 0, "starts": []}

            pk.click(d, "chime")
            pk.wait(d, 2, lambda d: spy(d)["created"] == 1, "the AudioContext, made by the click")
            pk.wait(d, 3, lambda d: len(spy(d)["starts"]) == 1, "the chime heard once when turned on")
            assert d.execute_script("return document.getElementById('chime').getAttribute('aria-pressed')") == "true"
            assert d.execute_script("return localStorage.getItem('countdown.chime')") == "on"
            r = pk.axe_audit(d)
            assert not r["violations"], pk.format_violations(r["violations"])

            obs.start(2)
            ends = obs.snapshot()["endsAt"]
            pk.wait(d, 5, lambda d: len(spy(d)["starts"]) == 2, "the chime at zero")
            at_zero = spy(d)["starts"][1]
            assert at_zero["phase"] == "finished"
            assert ends - 50 <= at_zero["at"] <= ends + 600, f"start() at {at_zero['at']}, the deadline {ends}"
            assert spy(d)["created"] == 1

            # Remembered; but without a gesture on this page, nothing is made.
            open_view(d, server, session_id)
            assert d.execute_script("return document.getElementById('chime').getAttribute('aria-pressed')") == "true"
            assert spy(d)["created"] == 0
            pk.click(d, "label")
            pk.wait(d, 2, lambda d: spy(d)["created"] == 1, "the AudioContext after the first click on the page")
            through_zero(d, obs, 1)
            assert len(spy(d)["starts"]) == 1, "no chime at zero after the reload"

            # Off again: a zero is silent.
            pk.click(d, "chime")
            assert d.execute_script("return localStorage.getItem('countdown.chime')") == "off"
            through_zero(d, obs, 1)
            assert len(spy(d)["starts"]) == 1
    finally:
        obs.close()


# -- embedding: --frame-ancestors --------------------------------------------------------------
class Embedder:
    """Another site on loopback (its own port, so its own origin): one page that frames `src`."""

    def __init__(self):
        self.src = ""
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 - http.server's name
                body = (f'<!doctype html><html lang="en"><title>embedder</title>'
                        f'<iframe id="f" title="countdown" width="800" height="450" src="{owner.src}"></iframe>'
                        ).encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/html; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.origin = f"http://127.0.0.1:{self.httpd.server_port}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


def is_frame_refusal(message: str) -> bool:
    text = message.lower()
    return ("framing '" in text and "frame-ancestors" in text) or "x-frame-options" in text


def framed_page(d, embedder: Embedder, src: str, test: str, *, refused: bool) -> str:
    """Opens the embedder framing `src`; returns the frame's address once it has loaded
    (the page's own when allowed; Chromium's error page when refused). A refusal is also
    awaited in the console, where Chromium reports it as a CSP error (expected here)."""
    embedder.src = src
    d.get(embedder.origin + "/")
    d.switch_to.frame(d.find_element("id", "f"))
    try:
        pk.wait(d, 5, lambda d: d.execute_script(
            "return document.documentElement.classList.contains('state-live')"
            " || location.protocol === 'chrome-error:'"), "the frame to load or be refused")
        href = d.execute_script("return location.href")
    finally:
        d.switch_to.default_content()
    seen = []

    def refusal_logged(d) -> bool:
        for e in pk.drain_console(d, test):
            if is_frame_refusal(e.message):
                e.allowed_reason = "a frame this test has the server refuse"
                seen.append(e)
        return bool(seen)

    if refused:
        pk.wait(d, 3, refusal_logged, "Chromium's report of the refused frame")
    else:
        refusal_logged(d)
        assert not seen, f"an allowed frame was reported refused: {seen}"
    return href


def test_frame_ancestors_lets_the_named_site_frame_the_page(browser_tools, server, pool, session_id, request):
    """With --frame-ancestors naming one site, that site's iframe shows the live page
    (its header names the site in frame-ancestors and has no X-Frame-Options), while a
    site not named is refused; without the flag, every site is refused (today's deny)."""
    import urllib.request

    d = pool(0)
    allowed, other = Embedder(), Embedder()
    srv = start_server("--frame-ancestors", f"'self',{allowed.origin}")
    try:
        with urllib.request.urlopen(f"{srv.http_base}/") as resp:
            csp = resp.headers.get("Content-Security-Policy", "")
            assert f"frame-ancestors 'self' {allowed.origin};" in csp, csp
            assert resp.headers.get("X-Frame-Options") is None
        with urllib.request.urlopen(f"{server.http_base}/") as resp:
            assert "frame-ancestors 'none'" in resp.headers.get("Content-Security-Policy", "")
            assert resp.headers.get("X-Frame-Options", "").lower() == "deny"

        page = pk.page_url(srv, session_id, view="overlay")
        test = request.node.nodeid
        assert framed_page(d, allowed, page, test, refused=False) == page
        assert framed_page(d, other, page, test, refused=True).startswith("chrome-error:")
        assert framed_page(d, allowed, pk.page_url(server, session_id), test, refused=True).startswith(
            "chrome-error:")
    finally:
        allowed.close()
        other.close()
        srv.stop_and_check()
