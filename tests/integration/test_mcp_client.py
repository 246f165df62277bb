"""keel's MCP client on real server processes (issue 42): the example bookings server over
streamable HTTP as well as stdio — listed, read, its question answered from the record —;
a server that dies mid-call is a transient failure for a read and an unknown outcome for
an effect (the ledger then reconciles), its stderr the evidence; arguments its schema
refuses never reach it."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest
import requests

from executions.authoring import McpServer, mcp_tools
from executions.authoring.foreign import asking
from executions.authoring.tools import Refused
from executions.errors import FailureKind, InputNeeded, StepFailure
from tests.support.procs import free_port

pytestmark = pytest.mark.processes
SERVER = Path(__file__).resolve().parents[2] / "examples" / "mcp_bookings" / "server.py"
DYING = '''
import os, sys
from mcp.server.mcpserver import MCPServer
server = MCPServer("dying")

@server.tool()
def look(day: str) -> dict:
    """A read."""
    print("lost the disk", file=sys.stderr, flush=True)
    os._exit(3)

@server.tool()
def book(room: str) -> dict:
    """A write."""
    print("lost the disk", file=sys.stderr, flush=True)
    os._exit(3)

server.run("stdio")
'''


@pytest.fixture
def http_bookings(tmp_path):
    port = free_port()
    env = {"BOOKINGS_FILE": str(tmp_path / "bookings.json"), "PATH": "/usr/bin:/bin"}
    server = subprocess.Popen([sys.executable, str(SERVER), "--http", str(port)], env=env, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}/mcp"
    deadline = time.monotonic() + 20
    while True:
        try:
            requests.get(url, timeout=1)
            break
        except requests.ConnectionError:
            assert time.monotonic() < deadline and server.poll() is None, "the MCP server did not listen"
            time.sleep(0.1)
    yield McpServer("bookings", url=url, honors_key=True)
    server.kill()
    server.wait()


def by_name(tools):
    return {tool.name: tool for tool in tools}


def test_a_server_over_streamable_http_is_listed_read_and_asked(http_bookings):
    tools = by_name(
        mcp_tools(
            http_bookings,
            effects={"book_room": lambda args, ctx: f"book:{args['room']}:{args['day']}"},
            lookups={"book_room": "find_booking"},
        )
    )
    assert set(tools) == {"list_rooms", "book_room"}  # the lookup is keel's, not the model's
    assert tools["list_rooms"].run({"day": "2026-12-20"}, None)["free"][0] == {"room": "Aurora", "seats": 4}
    with pytest.raises(Refused, match="people"):  # the server's own schema, fail closed
        tools["book_room"].effective_args({"room": "Aurora", "day": "2026-12-20", "people": "six"}, None)
    effect = tools["book_room"].run({"room": "Aurora", "day": "2026-12-20", "people": 2}, None, "RUN_9:book:r1:c2")
    assert effect.key == "book:Aurora:2026-12-20" and effect.honors_key  # the author's business key
    asked = []

    def nobody_yet(question, message, schema):
        asked.append(message)
        raise InputNeeded(input_id=question, tool="book_room", message=message, schema=schema)

    with asking(nobody_yet), pytest.raises(InputNeeded):
        effect.call(effect.args, effect.key)
    assert asked == ["Book Aurora on 2026-12-20 for 2 people?"]
    assert effect.lookup(effect.key, effect.args) is None  # it did nothing
    with asking(lambda question, message, schema: {"confirm": True}):
        booked = effect.call(effect.args, effect.key)
    assert booked["booked"] and booked["key"] == "book:Aurora:2026-12-20"  # sent in _meta
    assert effect.lookup(effect.key, effect.args)["booking_id"] == booked["booking_id"]


def test_a_server_dying_mid_call_is_transient_for_a_read_and_unknown_for_an_effect(tmp_path):
    script = tmp_path / "dying.py"
    script.write_text(DYING)
    tools = by_name(
        mcp_tools(McpServer("dying", command=[sys.executable, str(script)]), effects={"book": lambda a, c: "k"})
    )
    with pytest.raises(StepFailure) as read:
        tools["look"].run({"day": "2026-12-20"}, None)
    assert read.value.kind == FailureKind.TRANSIENT and "lost the disk" in read.value.evidence["stderr"]
    effect = tools["book"].run({"room": "Aurora"}, None, "RUN_9:book:2")
    with pytest.raises(StepFailure) as sent:
        effect.call(effect.args, effect.key)
    assert sent.value.kind == FailureKind.OUTCOME_UNKNOWN, sent.value.message


def test_a_server_that_will_not_start_is_transient_at_call_time(tmp_path):
    script = tmp_path / "flaky.py"
    script.write_text(DYING)
    [look, _] = mcp_tools(McpServer("flaky", command=[sys.executable, str(script)]))
    script.write_text("import sys\nprint('port 5432 refused', file=sys.stderr)\nsys.exit(1)\n")
    with pytest.raises(StepFailure) as failed:
        look.run({"day": "2026-12-20"}, None)
    assert failed.value.kind == FailureKind.TRANSIENT and "did not start" in failed.value.message
    assert "port 5432 refused" in failed.value.evidence["stderr"]


def test_only_a_form_a_person_can_fill_is_asked():
    from executions.authoring.mcp import _form_schema

    assert _form_schema({"type": "object", "properties": {"confirm": {"type": "boolean"}}, "required": ["confirm"]})
    assert not _form_schema({"type": "object", "properties": {"x": True}})  # not a schema a form can draw
    assert not _form_schema({"type": "object", "properties": {"rooms": {"type": "array"}}})
    assert not _form_schema({"type": "object", "properties": {"x": {"type": "nonsense"}}})
    assert not _form_schema(None)
