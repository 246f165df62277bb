"""Whatever a provider's call answers or raises, the ledger records what happened and
never sends the effect again: an answer in any shape an SDK returns is kept as JSON, a
call that raises anything may have acted (``unknown``: reconciled, or a person's), and a
bug found before the call says what it is with nothing sent. In process: the provider of
tests/support/answering_flow.py, the steps advanced here as a worker would."""

from __future__ import annotations

import pytest

from executions.models import Action, Execution, ExecutionEvent, Status, StepRun
from executions.services import execution_start
from tests.support.answering_flow import PROVIDER
from tests.support.in_process import run_here

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def provider():
    PROVIDER.clear()
    yield
    PROVIDER.clear()


def ran(people, **given) -> Execution:
    """An ``answering`` execution run here until it stops, a retry made due at once."""
    execution, _ = execution_start(user=people["requester"].user, workflow="answering", input=given)
    return run_here(execution, worker="worker:test-answers", retries_due=True)


def charge_of(execution: Execution) -> Action:
    return Action.objects.get(key=f"{execution.ref}:charge")


def test_an_sdks_answer_objects_are_kept_as_json(people):
    done = ran(people, mode="sdk_objects")
    assert done.status == Status.COMPLETED, done.status_reason
    receipt = charge_of(done).receipt
    assert receipt == {
        "charge": {"id": "ch_1", "created": "2026-12-07T12:30:00Z"},
        "refund": {"id": "re_1", "amount": "12.50"},
        "at": "2026-12-07T12:30:00Z",
        "day": "2026-12-07",
        "request": "00000000-0000-0000-0000-000000000007",
        "tags": ["a", "b"],
        "raw": "ok",
    }
    assert done.outputs()["charge"] == receipt and len(PROVIDER[f"{done.ref}:charge"]) == 1


def test_no_answer_and_answers_the_database_cant_hold_are_kept_too(people):
    nothing = ran(people, mode="nothing")
    assert nothing.status == Status.COMPLETED and charge_of(nothing).receipt == {}
    text = ran(people, mode="unstorable_text")
    assert text.status == Status.COMPLETED, text.status_reason
    assert charge_of(text).receipt == {"name": "a\ufffdb", "bad\ufffdkey": "\ufffd", "score": "nan"}
    opaque = ran(people, mode="opaque")
    assert opaque.status == Status.COMPLETED, opaque.status_reason
    action = charge_of(opaque)
    assert action.status == "succeeded" and action.receipt["receipt_not_json"].startswith("Opaque: ")
    same_key = ran(people, mode="same_key")  # a step's own output would be refused; an answer is kept
    assert same_key.status == Status.COMPLETED, same_key.status_reason
    assert charge_of(same_key).receipt == {"totals": {"1": "by text"}}
    for execution in (nothing, text, opaque, same_key):
        assert len(PROVIDER[f"{execution.ref}:charge"]) == 1  # it happened once, and is recorded as happened


def test_a_call_that_raises_may_have_acted_so_it_is_sent_again_only_under_its_key(people):
    done = ran(people, mode="raise_once")
    assert done.status == Status.COMPLETED, done.status_reason
    action = charge_of(done)
    assert action.status == "succeeded" and action.attempts == 2 and action.receipt == {"charged": action.key}
    [lost] = ExecutionEvent.objects.filter(execution=done, type="action.unknown")
    assert "the call raised ConnectionResetError" in lost.payload["error"], lost.payload


def test_a_call_that_raises_at_a_provider_without_dedup_waits_for_a_person_never_resent(people):
    for lookup in (False, True):
        stopped = ran(people, mode="raise_always", honors_key=False, lookup=lookup)
        assert stopped.status == Status.NEEDS_ATTENTION, stopped.status_reason
        assert stopped.reason_code == "unknown_outcome", stopped.status_reason
        action = charge_of(stopped)
        assert action.status == "unknown" and len(PROVIDER[action.key]) == 1
        evidence = StepRun.objects.filter(execution=stopped).order_by("-id")[0].output.get("evidence", {})
        if lookup:  # a lookup that raises established nothing: evidence, not a bug in the step
            assert evidence["lookup_error"] == "the lookup raised RuntimeError: the provider's search API is down"
        else:
            assert evidence["lookup"] == "this provider offers no lookup"


@pytest.mark.parametrize(
    ("mode", "said"),
    [
        ("long_key", "charge: an effect's key is text of 1–189 characters, not {n} characters; nothing was sent"),
        ("args_not_json", "charge: Effect.args is not JSON: Object of type datetime is not JSON serializable; nothing"),
    ],
)
def test_an_effect_the_ledger_cant_record_is_a_bug_named_before_anything_is_sent(people, mode, said):
    stopped = ran(people, mode=mode)
    assert stopped.status == Status.NEEDS_ATTENTION and stopped.reason_code == "step_error"
    assert said.format(n=len(f"{stopped.ref}:charge") + 300) in stopped.status_reason
    assert not Action.objects.filter(execution=stopped).exists() and PROVIDER == {}
