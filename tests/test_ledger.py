"""The ledger's first cut: executing before the call, unknown after a lost answer, reconciled by lookup."""

from __future__ import annotations

from executions.models import Action, ExecutionEvent
from tests.support.stack import http, pk, wait_status




def test_timeout_after_send_is_unknown_then_reconciled_without_a_second_publication(stack, people, api_as):
    stack.sandbox()
    stack.worker()
    stack.beat()
    stack.web()
    requester, manager, operator = api_as(people["requester"]), api_as(people["manager"]), api_as(people["operator"])
    ref = requester.start()["id"]
    approval = wait_status(requester, ref, "awaiting_approval")["pending_approval"]

    # The report service commits the publication, then hangs past our 3 s timeout.
    fault = {"endpoint": "/reports/publish", "fault": "commit_then_hang", "count": 1, "hang_seconds": 6}
    assert http().post(f"{stack.sandbox_url}/_faults", json=fault, timeout=5).status_code in (200, 201)
    assert manager.decide(ref, approval).status_code == 202

    flagged = wait_status(requester, ref, "needs_attention")
    key = f"{ref}:publish:v1"
    action = Action.objects.get(key=key)
    assert action.status == Action.State.UNKNOWN and action.attempts == 1
    assert "no answer" in flagged["status_reason"]
    assert stack.sandbox_stats()["keys"][key] == {"calls": 1, "effects": 1}

    # Operator resumes; the runtime asks the service by key before anything else.
    assert operator.post(f"/executions/{ref}/resume", {"reason": "check the publication"}).status_code == 200
    wait_status(requester, ref, "completed")
    action.refresh_from_db()
    assert action.status == Action.State.SUCCEEDED and action.attempts == 1
    assert action.receipt["key"] == key
    assert stack.sandbox_stats()["keys"][key] == {"calls": 1, "effects": 1}  # never re-sent
    history = list(
        ExecutionEvent.objects.filter(execution_id=pk(ref), type__startswith="action.", payload__key=key).values_list("type", flat=True)
    )
    assert history == ["action.executing", "action.unknown", "action.succeeded"]
    reconciled = ExecutionEvent.objects.get(execution_id=pk(ref), type="action.succeeded", payload__key=key)
    assert reconciled.payload["reconciled"] is True


def test_resume_is_for_operators_and_only_from_needs_attention(stack, people, api_as):
    stack.web()
    requester, operator = api_as(people["requester"]), api_as(people["operator"])
    ref = requester.start()["id"]
    assert requester.post(f"/executions/{ref}/resume", {"reason": "please"}).status_code == 403
    answer = operator.post(f"/executions/{ref}/resume", {"reason": "why not"})
    assert answer.status_code == 409 and "not needs_attention" in answer.json()["detail"]
