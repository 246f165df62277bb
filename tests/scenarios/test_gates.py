"""Issue 7: gates and signals, on real processes.

The wait gate (replacement_order v2 waits for ``shipment_confirmed``): a signal wakes
it exactly once, a wrong name or an execution not waiting is a 409, the timeout sends
it to an operator (``waiting_overdue``) through the sweeper, a dead worker changes
nothing while it waits, a cancel withdraws the wait. One writer per status: the
protected fields refuse a direct write; a cancel writes the ``withdrawn`` audit entry.
A v1 execution started before v2 was deployed finishes on v1.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest
from django_fsm import TransitionNotAllowed

from approvals.models import ApprovalRequest, AuditEntry
from executions.engine import gates
from executions.models import Action, Execution, ExecutionEvent, StepRun, Wait
from tests.support.procs import stop_together
from tests.support.stack import pk, untold, wait_for, wait_status

SIGNAL = "shipment_confirmed"
V1_ONLY = {"RUNTIME_WORKFLOW_MODULES": "workflows.monthly_report,workflows.replacement_order"}


def up(stack, **env: str) -> list:
    done = stack.up(worker_env=env, web_env=env)
    return [done.worker, done.beat, done.web]


def to_the_wait(people, api_as, **input: Any) -> str:
    """Start ORD-1001 on replacement_order v2, approve it, and return once it waits for the shipment."""
    requester, manager = api_as(people["requester"]), api_as(people["manager"])
    started = requester.post(
        "/executions", {"workflow": "replacement_order", "input": {"original_order": "ORD-1001", **input}}
    )
    assert started.status_code == 201, started.text
    ref = started.json()["id"]
    approval = wait_status(requester, ref, "awaiting_approval")["pending_approval"]
    assert manager.decide(ref, approval).status_code == 202
    waiting = wait_status(requester, ref, "waiting")
    assert waiting["pending_gate"]["step"] == "shipment" and waiting["pending_approval"] is None
    return ref


def wakes(ref: str) -> int:
    return ExecutionEvent.objects.filter(execution_id=pk(ref), type="transition", payload__transition="wake").count()


def notifications(stack, ref: str) -> dict:
    return stack.sandbox_stats()["keys"].get(f"{ref}:confirm:v1", {"calls": 0, "effects": 0})


def test_s21_the_same_signal_twice_wakes_the_wait_once_and_becomes_the_steps_output(stack, people, api_as):
    """S21: the same signal delivered twice wakes it once; the second answers with the first result."""
    up(stack)
    ref = to_the_wait(people, api_as)
    requester, operator = api_as(people["requester"]), api_as(people["operator"])
    assert notifications(stack, ref)["calls"] == 0  # the customer hears nothing before the confirmation

    first = requester.signal(ref, SIGNAL, {"tracking": "TRK-1"}, event_id="ship-1")
    again = requester.signal(ref, SIGNAL, {"tracking": "TRK-1"}, event_id="ship-1")
    assert first.status_code == again.status_code == 202
    assert first.json() == again.json() == {"event_id": "ship-1", "execution_status": "running"}

    done = wait_status(requester, ref, "completed")
    assert done["pending_gate"] is None
    assert wakes(ref) == 1
    shipment = StepRun.objects.get(execution_id=pk(ref), step="shipment")
    assert shipment.kind == "wait" and shipment.output["payload"] == {"tracking": "TRK-1"}
    assert shipment.output["event_id"] == "ship-1" and shipment.output["sent_by"] == "requester"
    assert notifications(stack, ref) == {"calls": 1, "effects": 1}

    # After it woke, the same event still answers the same; another one is refused.
    assert requester.signal(ref, SIGNAL, {"tracking": "TRK-1"}, event_id="ship-1").json()["event_id"] == "ship-1"
    late = operator.signal(ref, SIGNAL, event_id="ship-2")
    assert late.status_code == 409 and "completed" in late.json()["detail"]
    # The same event_id for another signal is a conflict, not a replay.
    assert requester.signal(ref, "something_else", event_id="ship-1").status_code == 409


def test_s21_two_concurrent_signals_with_different_event_ids_wake_it_once(stack, people, api_as):
    """S21: two different signals posted at once: one wake, the other a 409."""
    up(stack)
    ref = to_the_wait(people, api_as)
    requester, operator = api_as(people["requester"]), api_as(people["operator"])
    answers: list[int] = []
    go = threading.Barrier(2)

    def post(api, event_id: str) -> None:
        go.wait()
        answers.append(api.signal(ref, SIGNAL, {"tracking": f"TRK-{event_id}00"}, event_id=event_id).status_code)

    threads = [threading.Thread(target=post, args=(api, e)) for api, e in ((requester, "a"), (operator, "b"))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(answers) == [202, 409]
    wait_status(requester, ref, "completed")
    assert wakes(ref) == 1 and notifications(stack, ref) == {"calls": 1, "effects": 1}
    [received] = Wait.objects.filter(execution_id=pk(ref), status=Wait.State.RECEIVED)
    assert received.event_id in ("a", "b")


def test_a_signal_it_is_not_waiting_for_is_a_409_and_changes_nothing(stack, people, api_as):
    up(stack)
    requester, operator = api_as(people["requester"]), api_as(people["operator"])
    started = requester.post("/executions", {"workflow": "replacement_order", "input": {"original_order": "ORD-1002"}})
    ref = started.json()["id"]
    wait_status(requester, ref, "awaiting_approval")
    events = untold(ExecutionEvent.objects.filter(execution_id=pk(ref))).count()
    not_waiting = operator.signal(ref, SIGNAL)
    assert not_waiting.status_code == 409 and "awaiting_approval" in not_waiting.json()["detail"]

    ref = to_the_wait(people, api_as)
    events = untold(ExecutionEvent.objects.filter(execution_id=pk(ref))).count()
    wrong = operator.signal(ref, "payment_received")
    assert wrong.status_code == 409 and "it waits for shipment_confirmed" in wrong.json()["detail"]
    outsider = api_as(people["outsider"]).signal(ref, SIGNAL)
    assert outsider.status_code == 403
    missing = operator.signal("RUN_999999", SIGNAL)
    assert missing.status_code == 404
    malformed = operator.post(f"/executions/{ref}/events", {"type": "signal", "name": "", "event_id": "x"})
    assert malformed.status_code == 422 and malformed.json()["detail"][0]["loc"] == ["body", "name"]
    assert untold(ExecutionEvent.objects.filter(execution_id=pk(ref))).count() == events
    assert Execution.objects.get(pk=pk(ref)).status == "waiting"


def test_s22_the_timeout_sends_it_to_an_operator_as_waiting_overdue(stack, people, api_as):
    """S22: a wait passes its timeout: needs_attention waiting_overdue by the sweeper, no effect after it."""
    up(stack)
    ref = to_the_wait(people, api_as, confirm_within_seconds=2)
    requester, operator = api_as(people["requester"]), api_as(people["operator"])
    flagged = wait_status(requester, ref, "needs_attention", timeout=30)
    execution = Execution.objects.get(pk=pk(ref))
    assert execution.reason_code == "waiting_overdue" and "no signal shipment_confirmed" in flagged["status_reason"]
    assert Wait.objects.get(execution=execution).status == Wait.State.TIMED_OUT
    # Signals are never kept for later: the one that comes now is refused.
    late = requester.signal(ref, SIGNAL)
    assert late.status_code == 409 and "timed out" in late.json()["detail"]
    assert notifications(stack, ref)["calls"] == 0

    # An operator resumes it: it waits again, with a fresh timeout, and a signal completes it.
    assert operator.post(f"/executions/{ref}/resume", {"reason": "the warehouse is late, wait again"}).ok
    wait_status(requester, ref, "waiting")
    assert requester.signal(ref, SIGNAL, {"tracking": "TRK-9"}).status_code == 202
    wait_status(requester, ref, "completed")
    assert notifications(stack, ref) == {"calls": 1, "effects": 1}


@pytest.mark.own_stack
def test_s22_a_worker_killed_while_the_execution_waits_changes_nothing(stack, people, api_as):
    """S22: the worker is SIGKILLed while the execution waits: nothing changes."""
    with stack.together():
        procs = up(stack)
        stack.worker("sweeper", queues="control")  # the sweeps go on while the step worker is dead
    ref = to_the_wait(people, api_as)
    execution = Execution.objects.get(pk=pk(ref))
    assert not execution.lease_owner or execution.lease_expires_at is None  # no worker is held
    events = ExecutionEvent.objects.filter(execution_id=pk(ref)).count()
    procs[0].kill()
    stack.wait_sweeps(3)  # several sweeps
    assert Execution.objects.get(pk=pk(ref)).status == "waiting"
    assert ExecutionEvent.objects.filter(execution_id=pk(ref)).count() == events

    stack.worker("after")
    requester = api_as(people["requester"])
    assert requester.signal(ref, SIGNAL).status_code == 202
    wait_status(requester, ref, "completed")
    assert notifications(stack, ref) == {"calls": 1, "effects": 1}


def test_cancel_while_waiting_withdraws_the_wait(stack, people, api_as):
    up(stack)
    ref = to_the_wait(people, api_as)
    requester = api_as(people["requester"])
    cancelled = requester.post(f"/executions/{ref}/cancel", {"reason": "customer picked it up in store"})
    assert cancelled.status_code == 200 and cancelled.json()["status"] == "cancelled"
    wait = Wait.objects.get(execution_id=pk(ref))
    assert wait.status == Wait.State.WITHDRAWN and "customer picked it up" in wait.reason
    event = ExecutionEvent.objects.filter(execution_id=pk(ref), type="transition").last()
    assert event.payload["withdrawn_waits"] == [wait.pk]
    assert requester.signal(ref, SIGNAL).status_code == 409
    stack.wait_sweeps(2)
    assert notifications(stack, ref)["calls"] == 0
    assert gates.pending_of(Execution.objects.get(pk=pk(ref))) is None


def test_cancel_while_awaiting_approval_writes_the_withdrawn_audit_entry(stack, people, api_as):
    stack.up()
    requester = api_as(people["requester"])
    ref = requester.start()["id"]
    approval = wait_status(requester, ref, "awaiting_approval")["pending_approval"]
    assert requester.post(f"/executions/{ref}/cancel", {"reason": "wrong month"}).status_code == 200
    request = ApprovalRequest.objects.get(pk=approval["id"])
    assert request.status == ApprovalRequest.State.WITHDRAWN and request.closed_at is not None
    [entry] = AuditEntry.objects.filter(request=request, kind=AuditEntry.Kind.WITHDRAWN)
    assert entry.actor.get_username() == "requester" and "wrong month" in entry.detail["reason"]
    assert entry.artifact_version == request.version and entry.content_sha256 == request.content_sha256
    [planned] = untold(Action.objects.filter(execution_id=pk(ref)))
    assert planned.status == Action.State.FAILED and planned.attempts == 0 and "withdrawn" in planned.last_error


@pytest.mark.django_db
def test_statuses_have_one_writer_a_direct_assignment_is_refused(people):
    """ApprovalRequest, Action and Wait statuses change only through their transitions."""
    for model in (ApprovalRequest, Action, Wait):
        instance = model()
        with pytest.raises(AttributeError, match="Direct status modification is not allowed"):
            instance.status = "succeeded"
    action = Action(key="k", step="s", type="t")
    with pytest.raises(TransitionNotAllowed):
        action.succeed()  # planned → succeeded skips executing: not a transition of the ledger
    request = ApprovalRequest()
    request.approve()
    with pytest.raises(TransitionNotAllowed):
        request.withdraw()  # closed once, from pending only


@pytest.mark.own_stack
def test_a_v1_execution_started_before_v2_was_deployed_finishes_on_v1(stack, people, api_as):
    procs = up(stack, **V1_ONLY)
    requester, manager = api_as(people["requester"]), api_as(people["manager"])
    old = requester.post("/executions", {"workflow": "replacement_order", "input": {"original_order": "ORD-1001"}})
    old_ref = old.json()["id"]
    assert old.json()["workflow_version"] == 1
    approval = wait_status(requester, old_ref, "awaiting_approval")["pending_approval"]

    # Deploy version 2 while the v1 execution waits for its approval.
    stop_together(*procs)
    with stack.together():
        stack.worker("v2")
        stack.beat()
        stack.web()
    requester, manager = api_as(people["requester"]), api_as(people["manager"])
    new = requester.post("/executions", {"workflow": "replacement_order", "input": {"original_order": "ORD-1002"}})
    assert new.json()["workflow_version"] == 2

    assert manager.decide(old_ref, approval).status_code == 202
    done = wait_status(requester, old_ref, "completed")
    assert done["workflow_version"] == 1
    steps = list(StepRun.objects.filter(execution_id=pk(old_ref)).values_list("step", "workflow_version"))
    assert steps == [
        (s, 1) for s in ["load_order", "propose_replacement", "review", "submit_order", "record_order", "confirm"]
    ]
    assert not Wait.objects.filter(execution_id=pk(old_ref)).exists()
    wait_for(lambda: notifications(stack, old_ref)["effects"] == 1, what="the v1 customer to be told")
