"""Issue 12 (items 5, 6): the resume preview from real situations, and resume refusing
while an unknown outcome is unresolved. Real worker, beat, web server and sandbox.

- A permission failure (the provider answered 403): the preview may resume; the
  checkpointed steps are skipped, the refused publish runs again with the same key
  at a provider that de-duplicates; the operator confirms on the preview page and it
  completes with one publication.
- S16's unknown outcome at an order service that does not de-duplicate: the preview
  is blocked naming the key, the order could be repeated, and resume is a 409 naming
  it; once the operator resolved it, the preview lets a resume through.
- Stale approvals (no processes needed): the approver lost the authority, or the
  artifact changed after the approval; the effect it guards is blocked.
"""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group
from django.db import transaction
from django.test import Client
from django.utils import timezone

from approvals.services import approval_decide
from artifacts import store
from artifacts.services import artifact_version_create
from executions.engine import lifecycle
from executions.errors import Conflict
from executions.models import Action, Execution, ExecutionEvent, StepRun
from executions.services import execution_resume
from tests.support.orders import add_fault, orders_mode, orders_with_reference
from tests.support.procs import http
from tests.support.stack import approved, pk, up, wait_for, wait_status
from triage.preview import resume_preview

REPORT_STEPS = ["retrieve_figures", "analyze", "draft_report", "review", "publish", "notify"]
ORDER_STEPS = ["load_order", "propose_replacement", "review", "submit_order", "record_order", "shipment", "confirm"]


def preview_of(operator, ref: str) -> dict:
    answer = operator.get(f"/executions/{ref}/resume-preview")
    assert answer.status_code == 200, answer.text
    return answer.json()


def plans(preview: dict) -> dict[str, str]:
    return {s["step"]: s["plan"] for s in preview["steps"]}


def step(preview: dict, name: str) -> dict:
    return next(s for s in preview["steps"] if s["step"] == name)


def operator_client(people) -> Client:
    client = Client()
    client.force_login(people["operator"].user)
    return client


def test_after_a_permission_failure_the_refused_effect_runs_again_with_its_key(stack, people, api_as):
    up(stack)
    requester, operator = api_as(people["requester"]), api_as(people["operator"])
    ref = requester.start("2026-06")["id"]
    key = f"{ref}:publish:v1"
    add_fault(stack, endpoint="/reports/publish", fault="error_403", count=1)
    approved(api_as, people, ref)
    stopped = wait_status(operator, ref, "needs_attention")
    assert stopped["stuck"]["reason"] == "permission_denied"

    preview = preview_of(operator, ref)
    assert preview["can_resume"] is True and preview["blocked_by"] == []
    assert [s["step"] for s in preview["steps"]] == REPORT_STEPS  # every step of the pinned version, in order
    assert plans(preview) == {
        "retrieve_figures": "skip",
        "analyze": "skip",
        "draft_report": "skip",
        "review": "skip",
        "publish": "run",
        "notify": "run",
    }
    assert "checkpointed in round 1" in step(preview, "analyze")["why"]
    assert key in step(preview, "publish")["why"] and "same key" in step(preview, "publish")["why"]
    assert step(preview, "publish")["kind"] == "effect" and step(preview, "review")["kind"] == "approval"
    assert preview["effects"] == [
        {"key": key, "type": "publish_report", "status": "failed", "may_repeat": False, "provider_dedupes": True}
    ]
    assert preview["stale_approvals"] == [] and preview["workflow_version"] == {"pinned": 1, "latest": 1}

    # The Resume button leads to the confirmation page, which says it plainly.
    client = operator_client(people)
    assert f'href="/executions/{ref}/resume/preview/"' in client.get(f"/executions/{ref}/").content.decode()
    page = client.get(f"/executions/{ref}/resume/preview/").content.decode()
    assert 'data-plan="run" data-step="publish"' in page and 'data-plan="skip" data-step="draft_report"' in page
    assert "Skipped</strong> (already done" in page and "Drafting the report" in page
    assert "Effects that could be repeated</strong> at a provider that does not de-duplicate: none" in page
    assert 'id="confirm-resume"' in page and 'id="blocked-by"' not in page

    confirmed = client.post(f"/executions/{ref}/resume/", {"reason": "the provider restored our publishing rights"})
    assert confirmed.status_code == 302
    wait_status(operator, ref, "completed")
    assert stack.sandbox_stats()["keys"][key] == {"calls": 2, "effects": 1}  # refused once, then published once
    resumed = ExecutionEvent.objects.get(execution_id=pk(ref), type="transition", payload__transition="resume")
    assert resumed.actor.get_username() == "operator"
    assert resumed.payload["reason"] == "the provider restored our publishing rights"
    # Completed: nothing to resume, every step was done.
    done = preview_of(operator, ref)
    assert done["can_resume"] is False and "completed" in done["blocked_by"][0]
    assert set(plans(done).values()) == {"skip"}


def test_s25_s16_unknown_outcome_at_a_provider_without_dedup_blocks_resume_until_resolved(stack, people, api_as):
    """S25 (on S16: an order service without idempotency drops the connection after creating the
    order): the preview says blocked and resume is refused naming the action; after resolving it
    goes on; one order in total."""
    up(stack, ORDER_SERVICE_HONORS_KEYS="false")
    orders_mode(stack, idempotent=False)
    requester, manager, operator = api_as(people["requester"]), api_as(people["manager"]), api_as(people["operator"])
    started = requester.post(
        "/executions",
        {"workflow": "replacement_order", "input": {"original_order": "ORD-1001", "confirm_within_seconds": 2}},
    )
    assert started.status_code == 201, started.text
    ref = started.json()["id"]
    key = f"{ref}:submit_order:v1"
    approval = wait_status(requester, ref, "awaiting_approval")["pending_approval"]
    # The order is created, the answer is lost, and every lookup fails: nobody can tell.
    add_fault(stack, endpoint="/orders", method="POST", fault="commit_then_hang", count=1, hang_seconds=6)
    add_fault(stack, endpoint="/orders", method="GET", fault="error_500", count=50)
    assert manager.decide(ref, approval).status_code == 202
    stopped = wait_status(operator, ref, "needs_attention", timeout=120)
    assert stopped["stuck"]["reason"] == "unknown_outcome"

    preview = preview_of(operator, ref)
    assert preview["can_resume"] is False
    [blocker] = preview["blocked_by"]
    assert key in blocker and "unknown" in blocker
    assert [s["step"] for s in preview["steps"]] == ORDER_STEPS
    assert plans(preview) == {
        "load_order": "skip",
        "propose_replacement": "skip",
        "review": "skip",
        "submit_order": "blocked",
        "record_order": "blocked",
        "shipment": "blocked",
        "confirm": "blocked",
    }
    assert key in step(preview, "submit_order")["why"] and "after submit_order" in step(preview, "confirm")["why"]
    assert preview["effects"] == [
        {"key": key, "type": "submit_order", "status": "unknown", "may_repeat": True, "provider_dedupes": False}
    ]
    assert preview["workflow_version"] == {"pinned": 2, "latest": 2}

    # Resume refuses, naming the blocker; nothing moves and nothing is sent.
    calls = stack.sandbox_stats()["keys"][key]
    refused = operator.post(f"/executions/{ref}/resume", {"reason": "try again"})
    assert refused.status_code == 409, refused.text
    assert key in refused.json()["detail"] and refused.json()["keys"] == [key]
    assert refused.json()["blocked_by"] == preview["blocked_by"]
    assert Execution.objects.get(pk=pk(ref)).status == "needs_attention"
    assert not ExecutionEvent.objects.filter(execution_id=pk(ref), payload__transition="resume").exists()

    # The page says so too: no confirm button, the key named, the order could be repeated.
    client = operator_client(people)
    page = client.get(f"/executions/{ref}/resume/preview/").content.decode()
    assert 'id="blocked-by"' in page and 'id="confirm-resume"' not in page and key in page
    assert 'data-may-repeat="true"' in page and "could be repeated" in page
    refused_page = client.post(f"/executions/{ref}/resume/", {"reason": "try again"}, follow=True).content.decode()
    assert "can&#x27;t be resumed" in refused_page and key in refused_page
    assert stack.sandbox_stats()["keys"][key] == calls
    assert Action.objects.get(key=key).status == Action.State.UNKNOWN

    # The operator finds the order at the service and resolves it: the run goes on, waits
    # for the shipment confirmation, which doesn't come in time (2 s): needs attention again.
    assert http().delete(f"{stack.sandbox_url}/_faults", timeout=5).status_code == 200
    [order] = orders_with_reference(stack, key)
    resolved = operator.post(
        f"/actions/{key}/resolve",
        {"outcome": "succeeded", "evidence": "listed at the order service", "receipt": {"order_id": order["order_id"]}},
    )
    assert resolved.status_code == 200, resolved.text
    wait_for(
        lambda: (operator.execution(ref).get("stuck") or {}).get("reason") == "waiting_overdue",
        timeout=60,
        what=f"{ref} to time out waiting for the shipment",
    )
    after = preview_of(operator, ref)
    assert after["can_resume"] is True and after["blocked_by"] == []
    assert plans(after) == {
        "load_order": "skip",
        "propose_replacement": "skip",
        "review": "skip",
        "submit_order": "skip",
        "record_order": "skip",
        "shipment": "run",
        "confirm": "run",
    }
    assert after["effects"] == [
        {"key": key, "type": "submit_order", "status": "succeeded", "may_repeat": False, "provider_dedupes": False}
    ]
    assert operator.post(f"/executions/{ref}/resume", {"reason": "the warehouse is late, wait again"}).ok
    assert stack.sandbox_stats()["keys"][key] == {"calls": 1, "effects": 1}  # one order, never re-sent


# --- stale approvals (the approval gate's ``stale`` hook), without processes


@pytest.fixture
def approved_then_stopped(people, awaiting):
    """RUN_0001's report V1 approved by the manager; then the publish was refused (403)
    and it waits for an operator at publish, as the worker leaves it."""
    execution, request = awaiting
    approval_decide(
        user=people["manager"].user,
        execution_ref=execution.ref,
        approval_id=request.pk,
        decision="approve",
        artifact_version=request.version,
        content_sha256=request.content_sha256,
        event_id="approve-v1",
    )
    with transaction.atomic():
        stopped = Execution.objects.select_for_update().get(pk=execution.pk)
        StepRun.objects.create(  # the gate's outcome, as the runner records it when the step passes
            execution=stopped,
            step="review",
            kind="approval",
            round=stopped.round,
            outcome=StepRun.Outcome.SUCCEEDED,
            output={
                "approval_id": request.pk,
                "decision": "approve",
                "decided_by": "manager",
                "artifact_version": request.version,
                "content_sha256": request.content_sha256,
                "action": request.action,
            },
            lease_token=stopped.lease_token,
            workflow_version=stopped.workflow_version,
            started_at=timezone.now(),
        )
        stopped.context["artifacts"]["report"] = request.artifact_version.as_ref()
        stopped.current_step = "publish"
        lifecycle.apply(
            stopped, "flag", reason="403", code="permission_denied", update_fields=("context", "current_step")
        )
    return stopped, request


def test_an_approver_who_lost_the_authority_makes_the_approval_stale_and_blocks_resume(people, approved_then_stopped):
    execution, request = approved_then_stopped
    fresh = resume_preview(execution)
    assert fresh["can_resume"] is True and fresh["stale_approvals"] == []

    managers = Group.objects.get(name="managers")
    people["manager"].user.groups.remove(managers)
    preview = resume_preview(execution)
    [stale] = preview["stale_approvals"]
    assert stale["approval_id"] == request.pk and stale["artifact_version"] == 1
    assert stale["content_sha256"] == request.content_sha256 and "manager lost the authority" in stale["why"]
    assert preview["can_resume"] is False and plans(preview)["publish"] == "blocked"
    assert "review no longer lets publish through" in preview["blocked_by"][0]
    with pytest.raises(Conflict, match="no longer lets publish through"):
        execution_resume(ref=execution.ref, user=people["operator"].user, reason="go")

    people["manager"].user.groups.add(managers)  # the authority is back: nothing is stale
    assert resume_preview(execution)["can_resume"] is True


def test_a_version_made_after_the_approval_makes_it_stale(people, approved_then_stopped):
    execution, request = approved_then_stopped
    with transaction.atomic():
        artifact_version_create(
            execution=execution,
            kind="report",
            title="edited",
            blob=store.put(b"# edited after the approval\n"),
            content_type="text/markdown",
            step="manual_edit",
        )
    preview = resume_preview(execution)
    [stale] = preview["stale_approvals"]
    assert "approved V1" in stale["why"] and "newest version is V2" in stale["why"]
    assert preview["can_resume"] is False and plans(preview)["notify"] == "blocked"
