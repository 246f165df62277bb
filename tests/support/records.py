"""Rows as a real run leaves them, written directly: for tests that measure reads
(metrics, query counts) rather than the runtime."""

from __future__ import annotations

from approvals.models import ApprovalRequest, Decision
from artifacts import store
from artifacts.services import artifact_version_create
from executions.models import Execution


def approved_execution(requester, manager, i: int, *, workflow: str = "monthly_report") -> tuple:
    """An execution with a report, its approval request and the manager's approval:
    (execution, request, decision)."""
    execution = Execution.objects.create(workflow=workflow, workflow_version=1, input_digest="x", created_by=requester)
    version = artifact_version_create(
        execution=execution,
        kind="report",
        title="r",
        blob=store.put(f"report {i}".encode()),
        content_type="text/markdown",
        step="draft_report",
    )
    request = ApprovalRequest.objects.create(
        execution=execution,
        step="review",
        artifact_version=version,
        version=version.number,
        content_sha256=version.sha256,
        action="publish_report",
        requested_by=requester,
    )
    decision = Decision.objects.create(
        request=request,
        event_id=f"e{execution.pk}",
        decision="approve",
        decided_by=manager,
        artifact_version=version.number,
        content_sha256=version.sha256,
        execution_status="running",
    )
    return execution, request, decision


def awaiting_execution(requester, *, workflow: str = "monthly_report", expires_at=None) -> tuple:
    """An execution stopped at its approval gate with a real artifact version, as the
    gate leaves it: (execution, request)."""
    from django.db import transaction

    from executions.engine import lifecycle

    with transaction.atomic():
        execution = Execution.objects.create(
            workflow=workflow,
            workflow_version=1,
            input={"month": "2026-08"},
            input_digest="d",
            created_by=requester,
            current_step="review",
            context={
                "artifacts": {},
                "notes": {"goal": "", "next_action": "", "constraints": [], "facts": [], "completed_steps": []}
                | {"open_questions": []},
            },
        )
        version = artifact_version_create(
            execution=execution,
            kind="report",
            title="Report",
            blob=store.put(f"# Report\n\nV1 of {execution.pk}\n".encode()),
            content_type="text/markdown",
            step="draft_report",
        )
        request = ApprovalRequest.objects.create(
            execution=execution,
            step="review",
            artifact_version=version,
            version=version.number,
            content_sha256=version.sha256,
            action="publish_report",
            requested_by=requester,
            expires_at=expires_at,
        )
        lifecycle.apply(execution, "start")
        lifecycle.apply(execution, "await_approval")
    return execution, request
