"""The browser's own EventSource follows a session from the page's origin: the page's CSP
lets it connect, the stream's events arrive as `snapshot` then `patch` with `lastEventId`
the frame's seq, and a countdown started by another client is seen to its end."""

from __future__ import annotations

import json

import pagekit as pk

COLLECT_JS = """
const [session] = arguments;
window.__events = [];
window.__errors = 0;
const source = new EventSource('/api/v1/sessions/' + session + '/events');
window.__source = source;
for (const type of ['snapshot', 'patch']) {
  source.addEventListener(type, (e) => window.__events.push(
    {type: e.type, id: e.lastEventId, data: e.data}));
}
source.onerror = () => { window.__errors += 1; };
"""


def events(driver) -> list[dict]:
    return driver.execute_script("return window.__events")


def test_event_source_from_the_page_follows_a_countdown(server, pool, session_id):
    """On the page (its origin, its CSP), `new EventSource('/api/v1/sessions/x/events')`
    gets a snapshot, then patches whose ids are their seqs, through a run another client
    starts, to its finish; it never errors, and closing it takes its viewer away."""
    d = pool(0)
    pk.open_page(d, server, "other" + session_id)
    observer = pk.Observer(server.ws_url(session_id))
    try:
        d.execute_script(COLLECT_JS, session_id)
        pk.wait(d, 5, lambda d: events(d), "the stream's first event")
        observer.wait_for(lambda s: s["viewers"] == 2, 3, "the EventSource counted as a viewer")
        observer.start(2)
        pk.wait(d, 8, lambda d: any('"finished"' in e["data"] for e in events(d)), "the finish patch")
        got = events(d)
        assert got[0]["type"] == "snapshot"
        assert all(e["type"] == "patch" for e in got[1:])
        frames = [json.loads(e["data"]) for e in got]
        for e, f in zip(got, frames):
            assert f["type"] == e["type"] and e["id"] == str(f["seq"]), (e, f)
        seqs = [f["seq"] for f in frames]
        assert seqs == sorted(set(seqs))
        assert frames[0]["session"] == session_id
        assert d.execute_script("return window.__errors") == 0
        d.execute_script("window.__source.close()")
        # A closed stream is found at its next write; a run gives it one each second.
        observer.start(30)
        observer.wait_for(lambda s: s["viewers"] == 1, 5, "the closed EventSource to leave")
    finally:
        observer.close()
