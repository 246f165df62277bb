"""The port's own tests, on keel's real processes (the author's kit) and the offline model:
a small refund at once, a costly one approved and sent once, one refused and never sent,
a worker SIGKILLed right after the approved refund went out. keel's test run collects
them through tests/examples/test_refunds_agent.py."""

import time

import pytest

from executions.authoring.testing import Keel

MODULE = "examples.refunds_agent.workflow"
REFUNDED_AFTER_THE_CALL = "after_effect_call:agent"


@pytest.fixture
def keel(transactional_db, tmp_path, request):
    failpoints = getattr(request, "param", "")  # a test's own, by indirect parametrisation
    with Keel(modules=MODULE, sandbox=True, tmp=tmp_path, failpoints=failpoints) as keel:
        yield keel


def _refund_actions(execution: dict) -> list[dict]:
    return [a for a in execution["actions"] if a["type"] in ("process_refund", "refund_after_review")]


def test_an_order_under_the_threshold_is_looked_up_and_refunded_at_once(keel):
    done = keel.run("refunds_agent", {"message": "Please refund order ORD-1002"})  # 108.80 EUR
    assert done["status"] == "completed", done
    assert done["result"] == {"answer": "Your refund for order ORD-1002 has been approved.", "refunded": ["ORD-1002"]}
    [action] = _refund_actions(done)
    assert (action["type"], action["status"]) == ("process_refund", "succeeded")
    assert keel.provider_calls(action["key"]) == {"calls": 1, "effects": 1}

    status = keel.run("refunds_agent", {"message": "What is in my order ORD-1003?"})
    assert status["result"]["refunded"] == [] and "Wine glass" in status["result"]["answer"]


def test_a_costly_refund_waits_for_a_manager_and_is_sent_once(keel):
    ref = keel.start("refunds_agent", {"message": "I want a refund for ORD-1001"})  # 187.40 EUR
    approval = keel.wait(ref, "awaiting_approval")["pending_approval"]
    assert approval["action"] == "refund_order"
    assert all(a["status"] != "succeeded" for a in _refund_actions(keel.execution(ref)))  # nothing sent yet
    keel.decide(ref, "approve")
    done = keel.wait(ref, "completed")
    assert done["result"]["refunded"] == ["ORD-1001"]
    [action] = _refund_actions(done)
    assert (action["type"], action["status"], action["attempts"]) == ("refund_after_review", "succeeded", 1)
    assert keel.provider_calls(action["key"]) == {"calls": 1, "effects": 1}


def test_a_refused_refund_is_never_sent(keel):
    done = keel.run("refunds_agent", {"message": "Refund ORD-1005 please"}, decide="reject")  # 157.00 EUR
    assert done["status"] == "cancelled", done
    assert all(a["status"] != "succeeded" for a in _refund_actions(done))
    for action in _refund_actions(done):
        assert keel.provider_calls(action["key"]) == {"calls": 0, "effects": 0}


@pytest.mark.parametrize("keel", [f"{REFUNDED_AFTER_THE_CALL}=pause"], indirect=True)
def test_a_worker_killed_after_the_approved_refund_went_out_refunds_once(keel):
    ref = keel.start("refunds_agent", {"message": "Please refund ORD-1001"})
    keel.wait(ref, "awaiting_approval")
    keel.decide(ref, "approve")
    deadline = time.monotonic() + 30
    while not keel.failpoint_reached(REFUNDED_AFTER_THE_CALL):  # refunded, not yet recorded
        assert time.monotonic() < deadline, keel.logs()
        time.sleep(0.1)
    keel.crash_workers()
    done = keel.wait(ref, "completed", timeout=60)
    [action] = _refund_actions(done)
    assert action["status"] == "succeeded"
    assert keel.provider_calls(action["key"]) == {"calls": 1, "effects": 1}  # found by its key, not resent
