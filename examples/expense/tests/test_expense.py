"""The port's own tests, on keel's real processes (the author's kit): approved and paid once,
rejected and timed out completing unpaid, a worker SIGKILLed right after the payment went
out. keel's test run collects them through tests/examples/test_expense.py."""

import time

import pytest

from examples.expense import workflow
from executions.authoring import InvalidInput
from executions.authoring.testing import Keel

MODULE = "examples.expense.workflow"
PAID_AFTER_THE_CALL = "after_effect_call:pay"


@pytest.fixture
def keel(transactional_db, tmp_path, request):
    failpoints = getattr(request, "param", "")  # a test's own, by indirect parametrisation
    with Keel(modules=MODULE, sandbox=True, tmp=tmp_path, failpoints=failpoints) as keel:
        yield keel


def test_an_empty_expense_id_is_refused_at_start():
    for blank in ("", "   "):
        with pytest.raises(InvalidInput) as refused:
            workflow.flow.parse_input({"expense_id": blank})
        assert refused.value.field == "input.expense_id"


def test_an_approved_expense_is_created_then_paid_once(keel):
    ref = keel.start("sample_expense", {"expense_id": "exp-1"})
    assert keel.wait(ref, "waiting")["result"] is None
    keel.signal(ref, "expense_decision", {"decision": "APPROVED"})
    done = keel.wait(ref, "completed")
    assert done["result"] == {"expense_id": "exp-1", "decision": "APPROVED", "status": "COMPLETED"}
    for step in ("create", "pay"):
        assert keel.provider_calls(f"{ref}:{step}") == {"calls": 1, "effects": 1}


def test_a_rejected_expense_and_an_undecided_one_complete_unpaid(keel):
    rejected = keel.run("sample_expense", {"expense_id": "exp-2"}, signals={"expense_decision": {"decision": "DENIED"}})
    assert rejected["status"] == "completed", rejected
    assert rejected["result"] == {"expense_id": "exp-2", "decision": "DENIED", "status": ""}
    assert keel.provider_calls(f"{rejected['id']}:pay") == {"calls": 0, "effects": 0}

    late = keel.start("sample_expense", {"expense_id": "exp-3", "decision_timeout_seconds": 1})
    done = keel.wait(late, "completed")
    assert done["result"] == {"expense_id": "exp-3", "decision": None, "status": ""}
    assert keel.outputs(late)["decision"]["timed_out"] is True
    assert keel.provider_calls(f"{late}:create") == {"calls": 1, "effects": 1}
    assert keel.provider_calls(f"{late}:pay") == {"calls": 0, "effects": 0}


@pytest.mark.parametrize("keel", [f"{PAID_AFTER_THE_CALL}=pause"], indirect=True)
def test_a_worker_killed_after_the_payment_went_out_pays_once(keel):
    ref = keel.start("sample_expense", {"expense_id": "exp-4"})
    keel.wait(ref, "waiting")
    keel.signal(ref, "expense_decision", {"decision": "APPROVED"})
    deadline = time.monotonic() + 30
    while not keel.failpoint_reached(PAID_AFTER_THE_CALL):  # paid, not yet recorded
        assert time.monotonic() < deadline, keel.logs()
        time.sleep(0.1)
    keel.crash_workers()
    done = keel.wait(ref, "completed", timeout=60)
    assert done["result"]["status"] == "COMPLETED"
    assert keel.provider_calls(f"{ref}:pay") == {"calls": 1, "effects": 1}  # found by its key, not resent
    assert keel.effect(f"{ref}:pay")["status"] == "succeeded"
