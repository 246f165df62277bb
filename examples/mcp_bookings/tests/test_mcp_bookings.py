"""The MCP bookings example (examples/mcp_bookings) on keel's real processes and a real MCP
server process (started over stdio for each call): the server's confirmation question
parks the execution until a person answers it, then the booking goes on, once (S57, a
worker killed mid-effect and a question answered with no worker alive:
tests/scenarios/test_agents_from_elsewhere.py).
"""

import json
import sys

import pytest

from executions.authoring import McpServer, mcp_tools
from executions.authoring.testing import Keel
from executions.errors import InvalidInput
from executions.models import Action, execution_for

MODULE = "examples.mcp_bookings.workflow"


@pytest.fixture
def keel(transactional_db, tmp_path, request):
    """The processes; ``param``: the failpoints, or ``"web"`` for the web server too (the API)."""
    bookings = tmp_path / "bookings.json"
    env = {"BOOKINGS_FILE": str(bookings)}
    param = getattr(request, "param", "")
    web, failpoints = param == "web", "" if param == "web" else param
    with Keel(modules=MODULE, tmp=tmp_path, env=env, web=web, failpoints=failpoints) as keel:
        keel.bookings = bookings
        yield keel


def server_record(keel) -> list[dict]:
    """The bookings as the MCP server keeps them."""
    return json.loads(keel.bookings.read_text() or "[]") if keel.bookings.exists() else []


@pytest.mark.parametrize("keel", ["web"], indirect=True)
def test_the_servers_question_waits_for_the_requester_then_books_once(keel):
    ref = keel.start("mcp_bookings", {"request": "A room for 6 people on 2026-12-14"})
    waiting = keel.wait(ref, "waiting")
    asked = waiting["pending_input"]
    assert asked["message"] == "Book Borealis on 2026-12-14 for 6 people?", waiting
    assert asked["schema"]["required"] == ["confirm"] and waiting["stuck"] is None
    assert waiting["pending_gate"]["kind"] == "input"
    assert server_record(keel) == []  # nothing booked before the answer
    api = keel.api()
    answer = {"type": "input.answer", "input_id": asked["id"], "answer": {"confirm": "yes please"}, "event_id": "a1"}
    refused = api.post(f"/executions/{ref}/events", answer)
    assert refused.status_code == 422, refused.text
    assert refused.json()["detail"][0]["loc"] == ["body", "answer", "confirm"], refused.text
    nothing = api.post(f"/executions/{ref}/events", {**answer, "input_id": "RUN_0001:nothing", "event_id": "a2"})
    assert nothing.status_code == 409 and "asks nothing under RUN_0001:nothing" in nothing.text, nothing.text
    with pytest.raises(InvalidInput, match="answer.confirm"):
        keel.answer(ref, {"confirm": "yes please"})
    keel.answer(ref, {"confirm": True, "note": "coffee for six"})
    done = keel.wait(ref, "completed")
    [booking] = server_record(keel)
    assert done["result"] == {
        "answer": f"Borealis is yours on 2026-12-14 ({booking['booking_id']}).",
        "booking": "BKG-0001",
    }
    assert booking["note"] == "coffee for six" and booking["people"] == 6
    [action] = Action.objects.filter(execution=execution_for(ref), beside=False)
    assert (action.status, booking["key"]) == ("succeeded", action.key)


def test_a_tool_the_server_does_not_list_is_refused_naming_it(tmp_path):
    server = McpServer(
        "bookings",
        command=[sys.executable, "examples/mcp_bookings/server.py"],
        env={"BOOKINGS_FILE": str(tmp_path / "b.json")},
    )
    with pytest.raises(ValueError, match="has no tool 'cancel_booking'"):
        mcp_tools(server, effects={"cancel_booking": lambda args, ctx: "k"})


def test_a_server_that_will_not_start_is_refused_with_its_stderr(tmp_path):
    broken = tmp_path / "broken.py"
    broken.write_text("import sys\nprint('no database configured', file=sys.stderr)\nsys.exit(3)\n")
    with pytest.raises(ValueError, match="MCP server bookings: .* did not start.*it said: no database configured"):
        mcp_tools(McpServer("bookings", command=[sys.executable, str(broken)]))
