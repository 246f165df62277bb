"""Crash-safe side effects: real workers (SIGKILLed where a crash is the point), the
sandbox's fault injection, and checks on the sandbox's `_stats` and the ledger."""

from __future__ import annotations

import pytest
from django.utils import timezone

from executions.models import Action, Execution, ExecutionEvent, StepRun
from tests.support.procs import http, wait_for
from tests.support.stack import ADVANCE_DONE, pk, wait_status


def fault(stack, **spec) -> None:
    response = http().post(f"{stack.sandbox_url}/_faults", json=spec, timeout=5)
    assert response.status_code in (200, 201), response.text


def publish_key(ref: str) -> str:
    return f"{ref}:publish:v1"


def action_history(ref: str, key: str) -> list[tuple[str, str]]:
    events = ExecutionEvent.objects.filter(execution_id=pk(ref), type__startswith="action.", payload__key=key)
    return [(e.payload["from"], e.payload["to"]) for e in events]


def to_approval(stack, people, api_as, **worker_env):
    worker = stack.up(worker_env=worker_env).worker
    requester, manager = api_as(people["requester"]), api_as(people["manager"])
    ref = requester.start()["id"]
    approval = wait_status(requester, ref, "awaiting_approval")["pending_approval"]
    return worker, requester, manager, ref, approval


@pytest.mark.own_stack
def test_s04_publish_succeeds_then_worker_dies_before_recording(stack, people, api_as):
    """S04: the publish call succeeds at the service, the worker is SIGKILLed before recording."""
    doomed, requester, manager, ref, approval = to_approval(
        stack, people, api_as, RUNTIME_FAILPOINTS="after_effect_call:publish=crash"
    )
    assert manager.decide(ref, approval).status_code == 202
    wait_for(lambda: not doomed.alive(), what="the worker to die right after the publish call")
    assert Action.objects.get(key=publish_key(ref)).status == Action.State.EXECUTING  # never recorded
    assert stack.sandbox_stats()["keys"][publish_key(ref)] == {"calls": 1, "effects": 1}
    stack.worker("survivor")  # takes over once the dead worker's lease expires

    wait_status(requester, ref, "completed")
    stats = stack.sandbox_stats()
    assert stats["keys"][publish_key(ref)] == {"calls": 1, "effects": 1}  # reconciled, not re-sent
    action = Action.objects.get(key=publish_key(ref))
    assert action.status == Action.State.SUCCEEDED and action.receipt["publication_id"].startswith("PUB-")
    assert action_history(ref, publish_key(ref))[-2:] == [("approved", "executing"), ("executing", "succeeded")]


def test_s05_publish_times_out_after_the_service_committed(stack, people, api_as):
    """S05: the publish call times out after the service committed."""
    _, requester, manager, ref, approval = to_approval(stack, people, api_as)
    fault(stack, endpoint="/reports/publish", fault="commit_then_hang", count=1, hang_seconds=6)
    assert manager.decide(ref, approval).status_code == 202

    wait_status(requester, ref, "completed")
    assert stack.sandbox_stats()["keys"][publish_key(ref)]["effects"] == 1
    assert ("executing", "unknown") in action_history(ref, publish_key(ref))
    assert action_history(ref, publish_key(ref))[-1] == ("unknown", "succeeded")
    action = Action.objects.get(key=publish_key(ref))
    assert action.status == Action.State.SUCCEEDED and action.attempts == 1


def test_s07_cancel_while_awaiting_approval(stack, people, api_as):
    """S07: cancel while awaiting approval, while running, and during an effect's retry wait."""
    _, requester, _, ref, approval = to_approval(stack, people, api_as)
    answer = requester.post(f"/executions/{ref}/cancel", {"reason": "not needed"})
    assert answer.status_code == 200 and answer.json()["status"] == "cancelled"
    stack.wait_sweeps(3)  # sweeps and any stray messages
    assert requester.execution(ref)["status"] == "cancelled"
    assert "/reports/publish" not in stack.sandbox_stats()["endpoints"]
    action = Action.objects.get(key=publish_key(ref))
    assert action.status == Action.State.FAILED and "cancelled" in action.last_error
    manager = api_as(people["manager"])
    assert manager.decide(ref, approval).status_code == 409  # the withdrawn request can't be approved


@pytest.mark.own_stack
def test_s07_cancel_while_running_before_the_effect(stack, people, api_as):
    """S07: cancel while awaiting approval, while running, and during an effect's retry wait."""
    worker, requester, manager, ref, approval = to_approval(
        stack, people, api_as, RUNTIME_FAILPOINTS="before_step:publish=sleep:3"
    )
    assert manager.decide(ref, approval).status_code == 202
    wait_for(lambda: stack.failpoint_reached("before_step:publish"), what="the worker to be about to publish")
    advanced = worker.count(ADVANCE_DONE)
    assert api_as(people["operator"]).post(f"/executions/{ref}/cancel", {"reason": "stop"}).status_code == 200
    # The worker wakes up and must not publish: until the task it slept in has ended, and a sweep after.
    wait_for(lambda: worker.count(ADVANCE_DONE) > advanced, timeout=20, what="the worker to wake and end its task")
    stack.wait_sweeps(1)
    assert requester.execution(ref)["status"] == "cancelled"
    assert "/reports/publish" not in stack.sandbox_stats()["endpoints"]
    assert Action.objects.get(key=publish_key(ref)).status == Action.State.FAILED


def test_s07_cancel_during_an_effects_retry_wait(stack, people, api_as):
    """S07: cancel while awaiting approval, while running, and during an effect's retry wait."""
    _, requester, manager, ref, approval = to_approval(stack, people, api_as)
    fault(stack, endpoint="/reports/publish", fault="rate_limit", count=1, retry_after=5)
    assert manager.decide(ref, approval).status_code == 202
    wait_status(requester, ref, "retry_pending")
    due = Execution.objects.get(pk=pk(ref)).due_at
    calls_before = stack.sandbox_stats()["endpoints"]["/reports/publish"]["calls"]
    assert requester.post(f"/executions/{ref}/cancel", {"reason": "changed my mind"}).status_code == 200
    wait_for(lambda: timezone.now() > due, timeout=20, what="the retry's due time to pass")
    stack.wait_sweeps(2)  # past the retry's due time, and swept
    assert requester.execution(ref)["status"] == "cancelled"
    stats = stack.sandbox_stats()
    assert stats["endpoints"]["/reports/publish"] == {"calls": calls_before, "effects": 0}


def test_s08_transient_500_then_success(stack, people, api_as):
    """S08: a transient 500, then success."""
    _, requester, manager, ref, approval = to_approval(stack, people, api_as)
    fault(stack, endpoint="/reports/publish", fault="error_500", count=1)
    assert manager.decide(ref, approval).status_code == 202
    wait_status(requester, ref, "completed")
    action = Action.objects.get(key=publish_key(ref))
    assert action.attempts == 2 and action.status == Action.State.SUCCEEDED
    assert stack.sandbox_stats()["keys"][publish_key(ref)] == {"calls": 2, "effects": 1}
    retry = ExecutionEvent.objects.get(execution_id=pk(ref), payload__transition="schedule_retry")
    assert retry.payload["failure"] == "transient" and retry.payload["delay_seconds"] > 0


def test_s09_rate_limited_waits_at_least_retry_after(stack, people, api_as):
    """S09: 429 with Retry-After."""
    _, requester, manager, ref, approval = to_approval(stack, people, api_as)
    fault(stack, endpoint="/reports/publish", fault="rate_limit", count=1, retry_after=3)
    assert manager.decide(ref, approval).status_code == 202
    wait_status(requester, ref, "completed")
    first, second = StepRun.objects.filter(execution_id=pk(ref), step="publish").order_by("id")
    assert first.outcome == "failed" and "rate_limited" in first.error
    assert (second.started_at - first.finished_at).total_seconds() >= 3
    retry = ExecutionEvent.objects.get(execution_id=pk(ref), payload__transition="schedule_retry")
    assert retry.payload["retry_after"] == 3 and retry.payload["delay_seconds"] >= 3
    assert stack.sandbox_stats()["keys"][publish_key(ref)]["effects"] == 1


def test_s10_invalid_input_is_not_retried(stack, people, api_as):
    """S10: invalid tool input (the service answers 422/400)."""
    _, requester, manager, ref, approval = to_approval(stack, people, api_as)
    fault(stack, endpoint="/reports/publish", fault="error_400", count=5)
    assert manager.decide(ref, approval).status_code == 202
    failed = wait_status(requester, ref, "failed")
    assert "invalid input" in failed["status_reason"] and "not retried" in failed["status_reason"]
    assert stack.sandbox_stats()["keys"][publish_key(ref)] == {"calls": 1, "effects": 0}
    assert Action.objects.get(key=publish_key(ref)).attempts == 1


def test_s11_permission_denied_is_not_retried_blindly(stack, people, api_as):
    """S11: permission denied (403)."""
    _, requester, manager, ref, approval = to_approval(stack, people, api_as)
    fault(stack, endpoint="/reports/publish", fault="error_403", count=5)
    assert manager.decide(ref, approval).status_code == 202
    flagged = wait_status(requester, ref, "needs_attention")
    assert "permission denied" in flagged["status_reason"]
    stack.wait_sweeps(3)
    assert stack.sandbox_stats()["keys"][publish_key(ref)] == {"calls": 1, "effects": 0}


def test_s20_retries_exhausted_stop_within_limits(stack, people, api_as):
    """S20: retries exhausted on a transient failure."""
    _, requester, manager, ref, approval = to_approval(stack, people, api_as)
    fault(stack, endpoint="/reports/publish", fault="error_500", count=20)
    assert manager.decide(ref, approval).status_code == 202
    failed = wait_status(requester, ref, "failed", timeout=60)
    assert "retries exhausted: 4 of 4 attempts" in failed["status_reason"]
    action = Action.objects.get(key=publish_key(ref))
    assert action.attempts == 4 and action.status == Action.State.FAILED
    assert stack.sandbox_stats()["keys"][publish_key(ref)] == {"calls": 4, "effects": 0}


def test_unknown_outcome_that_cannot_be_looked_up_goes_to_an_operator_who_resolves_it(stack, people, api_as):
    _, requester, manager, ref, approval = to_approval(stack, people, api_as)
    fault(stack, endpoint="/reports/publish", fault="commit_then_hang", count=1, hang_seconds=6)
    fault(stack, endpoint="/reports/publications", fault="error_500", count=100)  # lookups fail
    assert manager.decide(ref, approval).status_code == 202
    flagged = wait_status(requester, ref, "needs_attention", timeout=60)
    action = Action.objects.get(key=publish_key(ref))
    assert action.status == Action.State.UNKNOWN and action.attempts == 1  # never re-sent blindly
    assert "can't be established" in flagged["status_reason"]
    assert stack.sandbox_stats()["keys"][publish_key(ref)] == {"calls": 1, "effects": 1}

    operator = api_as(people["operator"])
    assert (
        requester.post(f"/actions/{publish_key(ref)}/resolve", {"outcome": "succeeded", "evidence": "x"}).status_code
        == 403
    )
    assert (
        operator.post(f"/actions/{publish_key(ref)}/resolve", {"outcome": "maybe", "evidence": "x"}).status_code == 422
    )
    resolved = operator.post(
        f"/actions/{publish_key(ref)}/resolve",
        {"outcome": "succeeded", "evidence": "PUB-0001 is live on the report portal"},
    )
    assert resolved.status_code == 200 and resolved.json()["status"] == "succeeded"
    wait_status(requester, ref, "completed")
    assert stack.sandbox_stats()["keys"][publish_key(ref)] == {"calls": 1, "effects": 1}
    audit = ExecutionEvent.objects.get(execution_id=pk(ref), type="action.succeeded", payload__resolved=True)
    assert audit.actor == people["operator"].user and "PUB-0001" in audit.payload["evidence"]
    again = operator.post(f"/actions/{publish_key(ref)}/resolve", {"outcome": "failed", "evidence": "oops"})
    assert again.status_code == 409


@pytest.mark.own_stack
def test_cancel_after_an_effect_records_its_compensation(stack, people, api_as):
    worker, requester, manager, ref, approval = to_approval(
        stack, people, api_as, RUNTIME_FAILPOINTS="before_step:notify=sleep:3"
    )
    assert manager.decide(ref, approval).status_code == 202
    wait_for(lambda: stack.failpoint_reached("before_step:notify"), what="the report to be published")
    advanced = worker.count(ADVANCE_DONE)
    assert requester.post(f"/executions/{ref}/cancel", {"reason": "wrong month"}).status_code == 200
    wait_for(lambda: worker.count(ADVANCE_DONE) > advanced, timeout=20, what="the worker to wake and end its task")
    stack.wait_sweeps(1)
    body = requester.execution(ref)
    assert body["status"] == "cancelled"
    actions = {a["key"]: a for a in body["actions"]}
    assert actions[publish_key(ref)]["status"] == "succeeded"
    compensation = Action.objects.get(key=f"{publish_key(ref)}:compensate")
    assert compensation.status == Action.State.PLANNED and compensation.type == "compensate_publish_report"
    assert compensation.args["publication_id"] == Action.objects.get(key=publish_key(ref)).receipt["publication_id"]
    assert "/notify" not in stack.sandbox_stats()["endpoints"]  # nothing after the cancel
