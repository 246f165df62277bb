"""The monthly report runs end to end through the Task API, on real processes."""

from __future__ import annotations

from approvals.models import Decision
from executions.models import Action, Execution, StepRun
from tests.support.stack import own_actions, wait_status


def test_monthly_report_happy_path_through_the_api(stack, people, api_as):
    stack.up()
    requester, manager = api_as(people["requester"]), api_as(people["manager"])

    started = requester.start("2026-08", idempotency_key="aug-report")
    ref = started["id"]
    assert started["status"] == "pending" and started["workflow_version"] == 1

    waiting = wait_status(requester, ref, "awaiting_approval")
    approval = waiting["pending_approval"]
    assert waiting["step_label"] == "Awaiting manager approval"
    assert approval["artifact_id"] == waiting["artifacts"][0]["artifact_id"]
    assert approval["artifact_version"] == 1
    assert approval["content_sha256"] == waiting["artifacts"][0]["sha256"]
    assert approval["action"] == "publish_report"
    # The effect the approval unlocks is planned, not started: nothing external yet.
    assert own_actions(waiting) == [
        {"key": f"{ref}:publish:v1", "type": "publish_report", "status": "planned", "attempts": 0}
    ]
    assert "/reports/publish" not in stack.sandbox_stats()["endpoints"]

    # The requester may not approve their own request; the manager may.
    assert requester.decide(ref, approval).status_code == 403
    answer = manager.decide(ref, approval, event_id="evt-1")
    assert answer.status_code == 202, answer.text
    assert answer.json() == {
        "approval_id": approval["id"],
        "decision": "approve",
        "event_id": "evt-1",
        "decided_by": "manager",
        "execution_status": "running",
    }

    done = wait_status(requester, ref, "completed")
    assert {a["key"]: (a["status"], a["attempts"]) for a in own_actions(done)} == {
        f"{ref}:publish:v1": ("succeeded", 1),
        f"{ref}:notify:v1": ("succeeded", 1),
    }
    stats = stack.sandbox_stats()
    assert stats["keys"][f"{ref}:publish:v1"] == {"calls": 1, "effects": 1}
    assert stats["keys"][f"{ref}:notify:v1"] == {"calls": 1, "effects": 1}

    execution = Execution.objects.get(pk=int(ref.removeprefix("RUN_")))
    assert list(StepRun.objects.filter(execution=execution).values_list("step", flat=True)) == [
        "retrieve_figures",
        "analyze",
        "draft_report",
        "review",
        "publish",
        "notify",
    ]
    publish = Action.objects.get(key=f"{ref}:publish:v1")
    assert publish.receipt["publication_id"].startswith("PUB-")
    assert Decision.objects.get(request_id=approval["id"]).decided_by == people["manager"].user

    # Retrying the start with the same key returns the same execution (200), not a new one.
    again = requester.post(
        "/executions", {"workflow": "monthly_report", "input": {"month": "2026-08"}, "idempotency_key": "aug-report"}
    )
    assert again.status_code == 200 and again.json()["id"] == ref
    other = requester.post(
        "/executions", {"workflow": "monthly_report", "input": {"month": "2026-07"}, "idempotency_key": "aug-report"}
    )
    assert other.status_code == 409
    assert Execution.objects.count() == 1
