"""Agents and tools from elsewhere survive a SIGKILL (issue 42) — S56: the pydantic-ai support
agent (examples/pydantic_support) killed after its approved refund went out, before the
step's checkpoint: another worker finishes from the journal and the ledger, one refund at
the provider, no model request asked twice. S57: the MCP bookings agent
(examples/mcp_bookings, a real MCP server process) asks its question while no worker is
alive, is answered, and its worker is killed after the server booked, before keel
recorded it: reconciled with the server's own lookup, one booking in its own record."""

import json
import time

import pytest

from executions.authoring.testing import Keel
from executions.models import Action, ModelCall, execution_for

REFUNDED = "after_effect_call:support"
BOOKED = "after_effect_call:book"


@pytest.fixture
def pydantic_keel(transactional_db, tmp_path, request):
    with Keel(
        modules="examples.pydantic_support.workflow", sandbox=True, tmp=tmp_path, failpoints=request.param
    ) as keel:
        yield keel


@pytest.fixture
def mcp_keel(transactional_db, tmp_path, request):
    env = {"BOOKINGS_FILE": str(tmp_path / "bookings.json")}
    with Keel(modules="examples.mcp_bookings.workflow", tmp=tmp_path, env=env, failpoints=request.param) as keel:
        keel.bookings = tmp_path / "bookings.json"
        yield keel


def asked_once(ref: str) -> int:
    """Every model request of the step was asked of the provider once (one revision a key)."""
    calls = list(ModelCall.objects.filter(execution=execution_for(ref), step="support").values_list("key", "revision"))
    assert calls and all(revision == 1 for _, revision in calls), calls
    return len(calls)


def server_record(keel) -> list[dict]:
    """The bookings as the MCP server keeps them."""
    return json.loads(keel.bookings.read_text() or "[]") if keel.bookings.exists() else []


@pytest.mark.parametrize("pydantic_keel", [f"{REFUNDED}=pause"], indirect=True)
def test_s56_a_worker_killed_after_the_approved_refund_finishes_without_a_second(pydantic_keel):
    ref = pydantic_keel.start("pydantic_support", {"message": "Refund ORD-1003 please"})
    pydantic_keel.wait(ref, "awaiting_approval")
    pydantic_keel.decide(ref, "approve")
    deadline = time.monotonic() + 30
    while not pydantic_keel.failpoint_reached(REFUNDED):  # sent, its receipt not yet recorded
        assert time.monotonic() < deadline, pydantic_keel.logs()
        time.sleep(0.1)
    pydantic_keel.crash_workers()
    done = pydantic_keel.wait(ref, "completed", timeout=90)
    assert done["result"]["refunded"] == ["ORD-1003"]
    [action] = Action.objects.filter(execution=execution_for(ref), beside=False)
    assert pydantic_keel.provider_calls(action.key)["effects"] == 1, pydantic_keel.provider_calls(action.key)
    asked_once(ref)


@pytest.mark.parametrize("mcp_keel", [f"{BOOKED}=pause"], indirect=True)
def test_s57_a_worker_killed_mid_mcp_effect_is_reconciled_and_a_question_waits_for_no_worker(mcp_keel):
    ref = mcp_keel.start("mcp_bookings", {"request": "Somewhere for 3 people on 2026-12-15"})
    mcp_keel.wait(ref, "waiting")
    for child in mcp_keel.processes.children:  # no worker alive while the person answers
        if child.name.startswith("worker-"):
            child.kill()
    mcp_keel.answer(ref, {"confirm": True})
    assert mcp_keel.execution(ref)["status"] == "running"  # woken; no worker has it yet
    mcp_keel.processes.worker("after-answer", beat=True)  # the failpoint pauses it after the server booked
    deadline = time.monotonic() + 60
    while not mcp_keel.failpoint_reached(BOOKED):
        assert time.monotonic() < deadline, mcp_keel.logs()
        time.sleep(0.1)
    assert len(server_record(mcp_keel)) == 1  # booked at the server; keel has not recorded it
    mcp_keel.crash_workers()
    done = mcp_keel.wait(ref, "completed", timeout=90)
    [booking] = server_record(mcp_keel)  # one booking: found again by its key, not made twice
    assert done["result"]["booking"] == booking["booking_id"]
    [action] = Action.objects.filter(execution=execution_for(ref), beside=False)
    assert action.status == "succeeded" and action.receipt["booking_id"] == booking["booking_id"]
