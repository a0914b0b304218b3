"""Issue 20 through the HTTP API: the start options, stop, message and blackout as
POSTed commands, and every answer (acks in every new phase, the refusals) validated
against Public/openapi.json by apikit, so the document is tested to tell the truth
about the new fields, phase, outcome and levels."""

from __future__ import annotations

import json
import re
import tempfile
from pathlib import Path

import pytest
from openapi_schema_validator import OAS31Validator

from apikit import command, read
from cdclient import Client, check_state_shape, run_async
from serverproc import PUBLIC_DIR, start_server

TOKEN = "stage-token-0123456789abcdef"


def token_file(*tokens: str) -> str:
    path = Path(tempfile.mkdtemp(prefix="countdown-tokens-")) / "tokens"
    path.write_text("\n".join(tokens) + "\n")
    return str(path)


@pytest.fixture(scope="module")
def api():
    srv = start_server("--max-commands-per-second", "100000")
    yield srv
    srv.stop_and_check()


def document() -> dict:
    return json.loads((PUBLIC_DIR / "openapi.json").read_text())


def contract() -> dict:
    text = (PUBLIC_DIR / "constants.js").read_text()
    return json.loads(re.search(r"Object\.freeze\((\{.*\})\);", text, re.S).group(1))


def test_the_document_names_what_the_contract_names():
    """The document's phases, outcomes, ops and levels are the contract's (less ping and
    auth, which are WebSocket only), and its message limit is the contract's."""
    schemas = document()["components"]["schemas"]
    c = contract()
    assert schemas["Phase"]["enum"] == c["phases"]
    assert [o for o in schemas["State"]["properties"]["outcome"]["enum"] if o] == c["outcomes"]
    assert schemas["State"]["properties"]["level"]["enum"] == c["levels"]
    branches = [schemas[ref["$ref"].rsplit("/", 1)[1]] for ref in schemas["Command"]["oneOf"]]
    assert sorted(b["properties"]["op"]["const"] for b in branches) == sorted(set(c["ops"]) - {"ping", "auth"})
    assert schemas["State"]["properties"]["message"]["maxLength"] == c["messageMaxLength"]
    for field in ("warnAtSeconds", "dangerAtSeconds"):
        prop = schemas["StartCommand"]["properties"][field]
        assert (prop["minimum"], prop["maximum"]) == (c["levelSeconds"]["min"], c["levelSeconds"]["max"])


def test_the_state_examples_are_states_the_checks_take():
    """The State schema's examples validate against it, and each passes the test client's
    own checks of a state's invariants (overSince only in overtime, overMs only stopped)."""
    doc = document()
    # At the document's root, so the State schema's $ref to Phase resolves.
    validator = OAS31Validator({"components": doc["components"], "$ref": "#/components/schemas/State"})
    examples = doc["components"]["schemas"]["State"]["examples"]
    assert {e["phase"] for e in examples} >= {"running", "overtime", "finished"}
    for example in examples:
        validator.validate(example)
        check_state_shape(example)


def test_the_command_examples_are_commands(api, session_id):
    """Each of the Command schema's examples validates against it and the server applies
    it, in order, on one session (so an example the server refuses fails here)."""
    doc = document()
    examples = doc["components"]["schemas"]["Command"]["examples"]
    assert {e["op"] for e in examples} >= {"start", "stop", "message", "blackout"}
    # At the document's root, so the Command schema's $refs to each op's resolve.
    validator = OAS31Validator({"components": doc["components"], "$ref": "#/components/schemas/Command"})
    for example in examples:
        validator.validate(example)
        answer = command(api, session_id, example)
        assert answer.status == 200, (example, answer.json)


@run_async
async def test_overtime_levels_message_and_blackout_over_http(api, session_id):
    """A talk driven by HTTP alone: start with overtime, warn and danger; a message and a
    blackout; the read in overtime; stop with overMs; every answer valid by the document,
    and a WebSocket viewer sees the same state."""
    viewer = await Client.connect(api.ws_url(session_id))
    started = command(api, session_id, {"op": "start", "seconds": 1, "overtime": True, "warnAtSeconds": 60,
                                        "dangerAtSeconds": 1})
    assert started.status == 200, started.json
    state = started.json["state"]
    assert state["level"] == "danger" and state["overtime"] is True, state
    assert state["warnAtSeconds"] == 60 and state["dangerAtSeconds"] == 1, state
    msg = command(api, session_id, {"op": "message", "text": "Wrap up"})
    assert msg.status == 200 and msg.json["state"]["message"] == "Wrap up", msg.json
    dark = command(api, session_id, {"op": "blackout", "on": True})
    assert dark.status == 200 and dark.json["state"]["blackout"] is True, dark.json
    await viewer.wait_phase("overtime", timeout=3)
    over = read(api, session_id)
    assert over.status == 200, over.json
    s = over.json["state"]
    assert s["phase"] == "overtime" and s["level"] == "over" and s["label"].startswith("+"), s
    assert s["overSince"] == state["endsAt"] and s["message"] == "Wrap up" and s["blackout"] is True, s
    stopped = command(api, session_id, {"op": "stop"})
    assert stopped.status == 200, stopped.json
    s = stopped.json["state"]
    assert s["outcome"] == "stopped" and s["overMs"] >= 0 and s["overSince"] is None, s
    seen = await viewer.wait_state(lambda x: x["outcome"] == "stopped")
    assert seen["overMs"] == s["overMs"], seen
    cleared = command(api, session_id, {"op": "message", "text": None})
    assert cleared.status == 200 and cleared.json["state"]["message"] is None, cleared.json
    await viewer.close()


@pytest.mark.parametrize("body", [
    {"op": "start", "seconds": 60, "warnAtSeconds": 10, "dangerAtSeconds": 10},
    {"op": "start", "seconds": 60, "warnAtSeconds": 2**63},
    {"op": "start", "seconds": 60, "dangerAtSeconds": -(2**63) - 1},
    {"op": "start", "seconds": 60, "warnAtSeconds": 2**64},
    {"op": "start", "seconds": 60, "warnAtSeconds": 86401},
    {"op": "start", "seconds": 60, "warnAtSeconds": 1.5},
    {"op": "start", "seconds": 60, "overtime": "yes"},
    {"op": "start", "seconds": 60, "overtime": None},
    {"op": "message"},
    {"op": "message", "text": ""},
    {"op": "message", "text": 123},
    {"op": "message", "text": "x" * 141},
    {"op": "message", "text": "nul\u0000"},
    {"op": "message", "text": "y" * 4000},
    {"op": "blackout"},
    {"op": "blackout", "on": "yes"},
    {"op": "blackout", "on": 1},
], ids=lambda b: json.dumps(b)[:48])
def test_bad_values_are_400(api, session_id, body):
    """Each bad start option, text or on is a 400 bad_request the document describes."""
    answer = command(api, session_id, body)
    assert answer.status == 400 and answer.json["code"] == "bad_request", answer.json
    assert read(api, session_id).json["state"]["phase"] == "idle"


def test_raw_number_edges_are_400(api, session_id):
    """1e400 and -0 in the body's own bytes are refused, not rounded."""
    for raw in ('{"op":"start","seconds":60,"warnAtSeconds":1e400}',
                '{"op":"start","seconds":60,"dangerAtSeconds":-0}'):
        answer = command(api, session_id, raw, headers={"Content-Type": "application/json"})
        assert answer.status == 400 and answer.json["code"] == "bad_request", (raw, answer.json)


def test_stop_outside_a_run_is_409_not_running(api, session_id):
    """stop on an idle session is a 409 with not_running."""
    answer = command(api, session_id, {"op": "stop"})
    assert answer.status == 409 and answer.json["code"] == "not_running", answer.json


@run_async
async def test_key_mode_stop_message_blackout_need_the_key_or_a_token(session_id):
    """--control key: without a bearer stop, message and blackout are 403; the session's
    controller key and an API token both work."""
    srv = start_server("--control", "key", "--api-token-file", token_file(TOKEN),
                       "--max-commands-per-second", "100000")
    try:
        host = await Client.connect(srv.ws_url(session_id))
        key = host.snapshot["key"]
        for body in ({"op": "message", "text": "hi"}, {"op": "blackout", "on": True}, {"op": "stop"}):
            refused = command(srv, session_id, body)
            assert refused.status == 403 and refused.json["code"] == "forbidden", refused.json
        assert command(srv, session_id, {"op": "message", "text": "hi"}, token=key).status == 200
        assert command(srv, session_id, {"op": "blackout", "on": True}, token=TOKEN).status == 200
        assert command(srv, session_id, {"op": "start", "seconds": 60, "overtime": True}, token=key).status == 200
        assert command(srv, session_id, {"op": "stop"}, token=TOKEN).json["state"]["outcome"] == "stopped"
        await host.close()
    finally:
        srv.stop_and_check()
