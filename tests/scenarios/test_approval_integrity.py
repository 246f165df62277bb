"""Approval integrity: the right person approves exactly what they saw (S06, S17, S18),
and history can't be rewritten (append-only in PostgreSQL)."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group, Permission
from django.db import connection, transaction

from accounts.tokens import api_token_create
from approvals.models import ApprovalRequest, AuditEntry, Decision
from approvals.services import supersede_older
from artifacts import store
from artifacts.models import ArtifactVersion
from artifacts.services import artifact_version_create
from executions.models import Action, Execution, ExecutionEvent, StepRun
from tests.conftest import ApiClient
from tests.support.procs import http, wait_for
from tests.support.stack import pk, wait_status


def start_and_wait(stack, people, api_as, workflow="monthly_report", data=None, **worker_env):
    stack.up(worker_env=worker_env)
    requester = api_as(people["requester"])
    body = requester.post("/executions", {"workflow": workflow, "input": data or {"month": "2026-08"}})
    assert body.status_code == 201, body.text
    ref = body.json()["id"]
    return requester, ref, wait_status(requester, ref, "awaiting_approval")["pending_approval"]


def test_s06_changes_then_a_new_version_while_v2_awaits_needs_its_own_decision(stack, people, api_as):
    """S06: a new report version is created after V2 was approved or while V2 awaits."""
    requester, ref, v1 = start_and_wait(stack, people, api_as)
    manager = api_as(people["manager"])

    # V1: the manager asks for changes; the comment becomes a mandatory constraint of V2.
    answer = manager.decide(ref, v1, decision="request_changes", comment="Explain the Eindhoven closure")
    assert answer.status_code == 202, answer.text
    v2 = wait_for(
        lambda: (p := requester.execution(ref)["pending_approval"]) and p["artifact_version"] == 2 and p,
        what="V2 to await approval",
    )
    v2_bytes = store.get(
        ArtifactVersion.objects.get(artifact__execution_id=pk(ref), number=2).storage_path,
        expected_sha256=v2["content_sha256"],
    )
    assert b"Explain the Eindhoven closure" in v2_bytes
    assert ApprovalRequest.objects.get(pk=v1["id"]).status == "changes_requested"

    # While V2 awaits, the requester asks for a new draft: V2's request is superseded.
    assert (
        requester.post(f"/executions/{ref}/redraft", {"instruction": "Mention the September outlook"}).status_code
        == 200
    )
    v3 = wait_for(
        lambda: (p := requester.execution(ref)["pending_approval"]) and p["artifact_version"] == 3 and p,
        what="V3 to await approval",
    )
    assert ApprovalRequest.objects.get(pk=v2["id"]).status == "superseded"

    # Approving V2 now is refused, naming both versions; V3 needs its own decision.
    stale = manager.decide(ref, v2)
    assert stale.status_code == 409
    assert "V2" in stale.json()["detail"] and "V3" in stale.json()["detail"]
    assert AuditEntry.objects.filter(request_id=v2["id"], kind="refused", actor=people["manager"].user).exists()
    assert manager.decide(ref, v3).status_code == 202
    wait_status(requester, ref, "completed")

    keys = {a.key: a.status for a in Action.objects.filter(execution_id=pk(ref))}
    assert keys[f"{ref}:publish:v3"] == "succeeded"
    assert keys[f"{ref}:publish:v1"] == "failed" and keys[f"{ref}:publish:v2"] == "failed"  # never ran
    stats = stack.sandbox_stats()["keys"]
    assert stats[f"{ref}:publish:v3"]["effects"] == 1
    assert f"{ref}:publish:v1" not in stats and f"{ref}:publish:v2" not in stats


@pytest.mark.own_stack
def test_s06_a_version_created_after_the_approval_is_refused_before_the_effect(stack, people, api_as):
    """S06: a new report version is created after V2 was approved or while V2 awaits."""
    requester, ref, v1 = start_and_wait(stack, people, api_as, RUNTIME_FAILPOINTS="before_step:publish=sleep:3")
    assert api_as(people["manager"]).decide(ref, v1).status_code == 202
    wait_for(lambda: stack.failpoint_reached("before_step:publish"), what="the worker to be about to publish")

    # Someone edits the report after it was approved: V2 appears out of band.
    execution = Execution.objects.get(pk=pk(ref))
    with transaction.atomic():
        v2 = artifact_version_create(
            execution=execution,
            kind="report",
            title="edited",
            blob=store.put(b"# edited after approval\n"),
            content_type="text/markdown",
            step="manual_edit",
        )
        supersede_older(v2, actor_label="test")

    flagged = wait_status(requester, ref, "needs_attention")
    assert "approved V1" in flagged["status_reason"] and "V2" in flagged["status_reason"]
    assert "/reports/publish" not in stack.sandbox_stats()["endpoints"]  # nothing published


def test_an_approver_removed_while_the_publish_waits_no_longer_authorises_it(stack, people, api_as):
    """Authority is re-checked at the effect: the manager approves, the publish fails
    (500) and waits in retry_pending, the manager leaves the managers group; the next
    attempt refuses before calling: needs_attention naming the lost authority."""
    requester, ref, v1 = start_and_wait(stack, people, api_as)
    faults = f"{stack.sandbox_url}/_faults"
    spec = {"endpoint": "/reports/publish", "fault": "error_500", "count": 100}
    assert http().post(faults, json=spec, timeout=5).status_code in (200, 201)
    assert api_as(people["manager"]).decide(ref, v1).status_code == 202
    wait_status(requester, ref, "retry_pending")

    people["manager"].user.groups.remove(Group.objects.get(name="managers"))
    assert http().delete(faults, timeout=5).status_code in (200, 204)

    flagged = wait_status(requester, ref, "needs_attention")
    reason = flagged["status_reason"]
    assert "approver lost the authority" in reason and "manager" in reason, reason
    assert "approvals.approve_publish_report" in reason
    publish = stack.sandbox_stats()["endpoints"]["/reports/publish"]
    assert publish["effects"] == 0  # every call before the removal failed; none after it was made
    assert Action.objects.get(key=f"{ref}:publish:v1").status != Action.State.SUCCEEDED
    refused = StepRun.objects.filter(execution_id=pk(ref), step="publish").order_by("id").last()
    assert refused.outcome == "failed" and "permission" in refused.error


def test_s17_approval_expires_then_needs_attention_and_nothing_is_published(stack, people, api_as):
    """S17: approval expires."""
    requester, ref, v1 = start_and_wait(stack, people, api_as, APPROVAL_TTL_SECONDS="2")
    assert ApprovalRequest.objects.get(pk=v1["id"]).expires_at is not None
    flagged = wait_status(requester, ref, "needs_attention", timeout=30)
    assert "expired" in flagged["status_reason"]
    assert ApprovalRequest.objects.get(pk=v1["id"]).status == "expired"
    assert AuditEntry.objects.filter(request_id=v1["id"], kind="expired").exists()
    late = api_as(people["manager"]).decide(ref, v1)
    assert late.status_code == 409
    assert "/reports/publish" not in stack.sandbox_stats()["endpoints"]
    assert Action.objects.get(key=f"{ref}:publish:v1").status == "failed"


def test_s17_expired_order_proposal_is_cancelled_by_its_workflow_policy(stack, people, api_as):
    """S17: approval expires."""
    requester, ref, _ = start_and_wait(
        stack,
        people,
        api_as,
        workflow="replacement_order",
        data={"original_order": "ORD-1001"},
        APPROVAL_TTL_SECONDS="2",
    )
    cancelled = wait_status(requester, ref, "cancelled", timeout=30)
    assert "expired" in cancelled["status_reason"]
    assert (
        "/orders" not in stack.sandbox_stats()["endpoints"]
        or stack.sandbox_stats()["endpoints"]["/orders"]["effects"] == 0
    )


def test_s18_no_authority_or_self_approval_is_refused_and_logged(stack, people, api_as):
    """S18: a user without authority, or the requester themself, approves."""
    requester, ref, v1 = start_and_wait(stack, people, api_as)
    # A manager-like user with the general permission but not the per-action one.
    half = get_user_model().objects.create_user("half_manager", password="x")
    half.user_permissions.add(Permission.objects.get(codename="decide_approval"))
    half_api = ApiClient(stack.web_url, api_token_create(user=half))

    attempts = [
        (requester, "lacks the permission"),
        (api_as(people["outsider"]), "lacks the permission"),
        (api_as(people["auditor"]), "lacks the permission"),
        (api_as(people["operator"]), "lacks the permission"),
        (half_api, "approvals.approve_publish_report"),
    ]
    for client, reason in attempts:
        answer = client.decide(ref, v1)
        assert answer.status_code == 403, answer.text
        assert reason in answer.json()["detail"]
    anonymous = http().post(f"{stack.web_url}/api/executions/{ref}/events", json={}, timeout=5)
    assert anonymous.status_code == 401

    refused = AuditEntry.objects.filter(request_id=v1["id"], kind="refused").order_by("id")
    assert [e.actor.username for e in refused] == ["requester", "outsider", "auditor", "operator", "half_manager"]
    assert all(e.detail["status_code"] == 403 and e.detail["reason"] for e in refused)
    assert not Decision.objects.exists()
    assert requester.execution(ref)["status"] == "awaiting_approval"
    assert not ExecutionEvent.objects.filter(execution_id=pk(ref), type="approval.decided").exists()

    # A manager who started an execution may not approve it (separation of duties).
    manager = api_as(people["manager"])
    own = manager.start("2026-07")["id"]
    own_request = wait_status(manager, own, "awaiting_approval")["pending_approval"]
    answer = manager.decide(own, own_request)
    assert answer.status_code == 403 and "separation of duties" in answer.json()["detail"]
    assert AuditEntry.objects.get(request_id=own_request["id"], kind="refused").actor == people["manager"].user
    assert manager.execution(own)["status"] == "awaiting_approval"


@pytest.mark.parametrize(
    ("table", "column"),
    [("approvals_decision", "comment"), ("executions_executionevent", "type"), ("approvals_auditentry", "kind")],
)
def test_append_only_tables_refuse_raw_sql_update_and_delete(people, transactional_db, table, column):

    execution = Execution.objects.create(
        workflow="monthly_report",
        workflow_version=1,
        input={},
        input_digest="d",
        created_by=people["requester"].user,
        context={
            "notes": {
                "goal": "",
                "constraints": [],
                "facts": [],
                "completed_steps": [],
                "open_questions": [],
                "next_action": "",
            }
        },
    )
    blob = store.put(b"x")
    from artifacts.models import Artifact

    artifact = Artifact.objects.create(kind="report", title="r", execution=execution)
    version = ArtifactVersion.objects.create(
        artifact=artifact,
        number=1,
        sha256=blob.sha256,
        size=1,
        content_type="text/plain",
        storage_path=blob.path,
        produced_by_step="d",
    )
    request = ApprovalRequest.objects.create(
        execution=execution,
        step="review",
        artifact_version=version,
        version=1,
        content_sha256=blob.sha256,
        action="publish_report",
        requested_by=people["requester"].user,
    )
    Decision.objects.create(
        request=request,
        event_id="e",
        decision="approve",
        decided_by=people["manager"].user,
        artifact_version=1,
        content_sha256=blob.sha256,
        execution_status="running",
    )
    ExecutionEvent.objects.create(execution=execution, type="transition")
    AuditEntry.objects.create(kind="decided", request=request, execution=execution)

    for statement in (f"UPDATE {table} SET {column} = 'rewritten'", f"DELETE FROM {table}"):
        with pytest.raises(Exception) as refused, transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(statement)
        assert "append_only" in str(refused.value) or "Cannot" in str(refused.value)
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT count(*) FROM {table} WHERE {column} = 'rewritten'")
        assert cursor.fetchone()[0] == 0
        cursor.execute(f"SELECT count(*) FROM {table}")
        assert cursor.fetchone()[0] >= 1


def test_api_authorization_matrix_for_approval_endpoints(stack, people, api_as):
    requester, ref, v1 = start_and_wait(stack, people, api_as)
    half = get_user_model().objects.create_user("half_manager", password="x")
    half.user_permissions.add(Permission.objects.get(codename="decide_approval"))
    who = {
        "requester": requester,
        "manager_without_permission": ApiClient(stack.web_url, api_token_create(user=half)),
        "auditor": api_as(people["auditor"]),
        "approver": api_as(people["manager"]),
    }
    anonymous = http()
    expected_decide = {"requester": 403, "manager_without_permission": 403, "auditor": 403, "approver": 202}
    assert anonymous.post(f"{stack.web_url}/api/executions/{ref}/events", json={}, timeout=5).status_code == 401
    assert anonymous.get(f"{stack.web_url}/api/executions/{ref}", timeout=5).status_code == 401
    for name in ("requester", "manager_without_permission", "auditor"):
        assert who[name].get(f"/executions/{ref}").status_code == 200  # anyone authenticated may read
        assert who[name].decide(ref, v1).status_code == expected_decide[name], name
        assert who[name].post(f"/executions/{ref}/resume", {"reason": "x"}).status_code in (403, 409), name
    assert who["auditor"].post(f"/executions/{ref}/redraft", {"instruction": "x"}).status_code == 403
    assert who["auditor"].post(f"/executions/{ref}/cancel", {"reason": "x"}).status_code == 403
    assert (
        who["auditor"].post(f"/actions/{ref}:publish:v1/resolve", {"outcome": "failed", "evidence": "x"}).status_code
        == 403
    )
    assert who["approver"].decide(ref, v1).status_code == expected_decide["approver"]


def test_api_session_posts_without_csrf_are_refused(people, live_server):
    session = http()
    login = session.get(f"{live_server.url}/login/", timeout=5)
    token = login.cookies["csrftoken"]
    session.post(
        f"{live_server.url}/login/",
        data={"username": "manager", "password": people["manager"].password, "csrfmiddlewaretoken": token},
        headers={"Referer": f"{live_server.url}/login/"},
        timeout=5,
    )
    assert session.get(f"{live_server.url}/api/executions", timeout=5).status_code == 200  # the session works
    for path in [
        "/api/executions",
        "/api/executions/RUN_0001/events",
        "/api/executions/RUN_0001/cancel",
        "/api/executions/RUN_0001/resume",
        "/api/executions/RUN_0001/redraft",
        "/api/actions/k/resolve",
    ]:
        answer = session.post(f"{live_server.url}{path}", json={}, timeout=5)
        assert answer.status_code in (401, 403), (path, answer.status_code)
    assert Execution.objects.count() == 0
