"""libwebsockets' own timeouts keep time on both event loops: on libev, lws 4.1.6 cannot
bring its timer forward by itself (see `lwsTimers` in Sources/LWSServer/CountdownServer.swift)."""

from __future__ import annotations

import time

import pytest

from cdclient import run_async
from rawws import RawWS
from serverproc import start_server


@pytest.mark.parametrize("loop", ["poll", "libev"])
@run_async
async def test_unanswered_close_is_hung_up_after_lws_wait(loop):
    """A binary frame gets close 1003; a client that never answers the close is hung up
    when lws's 5 s wait for the reply ends, not seconds or minutes later."""
    srv = start_server("--event-loop", loop)
    try:
        ws = await RawWS.open(srv.host, srv.port, "/ws/timeouts")
        await ws.recv_frame(5)
        sent = time.monotonic()
        await ws.send_frame(0x2, b"\x00")
        assert await ws.wait_closed(12), f"{loop}: still open 12 s after the close"
        took = time.monotonic() - sent
        assert 4.0 <= took <= 7.0, f"{loop}: hung up after {took:.1f} s"
        ws.close()
    finally:
        srv.stop_and_check()
