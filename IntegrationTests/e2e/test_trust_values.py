"""End-to-end tests of values at the edges of every range, over a real WebSocket to the
built binary: the 50-byte `until` that stopped the server, and each of seconds, until,
adjust and a ping's t at ±2^63, 2^64, 1e308, 1e400, -0, 0 and far past or future. Each
gets bad_request (or, where valid, works); afterwards the server still serves another
client, and the session's state is what it was."""

from __future__ import annotations

import json

import pytest

from cdclient import Client, http_get, norm_state, now_ms, run_async, settle

OVERFLOW = '{"op":"start","until":-9223372036854775808}'

# Literals no command field takes (Python's json cannot write most of them).
NEVER_VALID = [
    "-9223372036854775808", "9223372036854775807", "9223372036854775808", "-9223372036854775809",
    "18446744073709551616", "1e308", "-1e308", "1e400", "-1e400", "-0", "0", "0.0", "1.5", "1e-1",
    "9" * 400,
]
FAR_PAST = "1"  # 1 ms after the epoch
FAR_FUTURE = "253402300799999"  # the last ms of year 9999: within the epoch range, not 30 days ahead
PAST_EPOCH_RANGE = "253402300800000"


def frames():
    for v in NEVER_VALID + ["-1", "86401"]:
        yield pytest.param('{"op":"start","seconds":%s,"id":"e"}' % v, id=f"seconds={v[:24]}")
    for v in NEVER_VALID + [FAR_PAST, FAR_FUTURE, PAST_EPOCH_RANGE, "-1"]:
        yield pytest.param('{"op":"start","until":%s,"id":"e"}' % v, id=f"until={v[:24]}")
    for v in NEVER_VALID + ["86401", "-86401"]:
        yield pytest.param('{"op":"adjust","seconds":%s,"id":"e"}' % v, id=f"adjust={v[:24]}")
    for v in ["1e400", "-1e400", "1" * 33, '"1"', "null"]:
        yield pytest.param('{"op":"ping","t":%s,"id":"e"}' % v, id=f"ping-t={v[:24]}")
    for c in ["\\u0000", "\\u001f", "\\u007f", "\\n"]:
        yield pytest.param('{"op":"start","seconds":5,"finishedLabel":"a%sb","id":"e"}' % c, id=f"label-{c}")


async def idle_pair(url: str) -> tuple[Client, Client]:
    """A controller and an observer on an idle session, settled: nothing ticks, so any
    message the observer gets next comes from a command."""
    x = await Client.connect(url, name="X")
    o = await Client.connect(url, name="observer")
    await settle(x, o)
    return x, o


async def unchanged_and_serving(server, session_id: str, x: Client, o: Client, before: dict) -> None:
    """The state is what it was; the observer's next message is the patch of the next
    valid command (nothing came from the bad one); a new client elsewhere is served."""
    assert norm_state(x.state) == before and norm_state(o.state) == before
    patch, ack = await x.command({"op": "start", "seconds": 300, "id": "after"})
    msg = await o.recv()
    assert msg == {"type": "patch", "seq": ack["seq"], "patch": patch}, msg
    await x.command({"op": "cancel"})
    status, _, body = http_get(server.host, server.port, "/healthz")
    assert status == 200 and json.loads(body) == {"status": "ok"}
    other = await Client.connect(server.ws_url(session_id + "-other"))
    await other.command({"op": "start", "seconds": 5, "id": "other"})
    await other.close()


@run_async
async def test_the_50_byte_until_overflow_is_refused(server, session_id):
    """The message that stopped the release build is bad_request; the server stays up,
    the session is unchanged, and both it and another session are still served."""
    assert len(OVERFLOW.encode()) <= 50
    x, o = await idle_pair(server.ws_url(session_id))
    before = norm_state(x.state)
    await x.expect_error(OVERFLOW, "bad_request", id=None)
    await unchanged_and_serving(server, session_id, x, o, before)
    await x.close()
    await o.close()


@pytest.mark.parametrize("frame", frames())
@run_async
async def test_edge_value_is_bad_request(server, session_id, frame):
    """Each edge value gets bad_request with its id as the
    very next message; nothing changes, and the server serves the next command."""
    x, o = await idle_pair(server.ws_url(session_id))
    before = norm_state(x.state)
    await x.expect_error(frame, "bad_request", id="e")
    await unchanged_and_serving(server, session_id, x, o, before)
    await x.close()
    await o.close()


@pytest.mark.parametrize("t", ["-0", "0", "1e308", "-9223372036854775808", "18446744073709551616", "1" * 32])
@run_async
async def test_ping_t_at_the_edges_is_echoed_verbatim(server, session_id, t):
    """A ping's t that is a finite number literal of at most 32 characters comes back
    in the pong exactly as written, however large."""
    c = await Client.connect(server.ws_url(session_id))
    await c.send('{"op":"ping","t":%s}' % t)
    raw = await c.recv_raw()
    assert raw.startswith('{"type":"pong","t":%s,"serverTime":' % t), raw
    await c.close()


@run_async
async def test_valid_edges_work(server, session_id):
    """The valid ends of each range work: seconds 1 and 86400, until 1 s and 30 days
    ahead, adjust ±86400 (the duration never below 0)."""
    x = await Client.connect(server.ws_url(session_id))
    for frame in ('{"op":"start","seconds":86400}', '{"op":"start","seconds":1}'):
        await x.command(frame)
        await x.command({"op": "cancel"})
    ahead = int(now_ms()) + 30 * 86_400_000 - 5_000
    await x.command('{"op":"start","until":%d}' % ahead)
    await x.command({"op": "cancel"})
    await x.command('{"op":"start","until":%d}' % (int(now_ms()) + 2_000))
    await x.command({"op": "cancel"})
    await x.command('{"op":"start","seconds":60}')
    await x.command('{"op":"adjust","seconds":86400}')
    assert norm_state(x.state)["duration"] == 86_460, x.state
    await x.command({"op": "cancel"})
    await x.command('{"op":"start","seconds":60}')
    patch, _ = await x.command('{"op":"adjust","seconds":-86400}')
    assert patch["phase"] == "finished" and norm_state(x.state)["duration"] == 0, x.state
    await x.close()


@run_async
async def test_echoed_input_is_cut(server, session_id):
    """An unknown op of 4 KB or a duplicate key of 2 KB is quoted in the error's message cut to
    32 characters and an ellipsis, not echoed whole."""
    x = await Client.connect(server.ws_url(session_id))
    for frame in ('{"op":"%s"}' % ("z" * 4000), '{"%s":1,"%s":2}' % ("z" * 2000, "z" * 2000)):
        assert len(frame.encode()) <= 4096
        msg = await x.expect_error(frame, "bad_request")
        assert len(msg["message"]) < 64 and msg["message"].endswith('…"'), msg
        assert ("z" * 32) in msg["message"] and ("z" * 33) not in msg["message"], msg
    await x.close()
