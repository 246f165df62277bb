"""Rows as a real run leaves them, written directly: for tests that measure reads
(metrics, query counts) rather than the runtime, or that need an execution in a given
state without running it (``at_publish``, ``pending``); and a ``snapshot`` of every
row count and status, to prove a refused write wrote nothing."""

from __future__ import annotations

from django.db import transaction

from approvals.models import ApprovalRequest, AuditEntry, Decision, RefusalWindow
from artifacts import store
from artifacts.models import ArtifactVersion
from artifacts.services import artifact_version_create
from executions.authoring import notes, registry
from executions.engine import lifecycle
from executions.models import Action, Execution, ExecutionEvent, StepRun
from executions.services import input_digest


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


def at_publish(people, context: dict, *transitions: str, month: str = "2026-07") -> Execution:
    """A monthly report at its publish step, moved through ``transitions``."""
    execution = Execution.objects.create(
        workflow="monthly_report",
        workflow_version=1,
        input={"month": month},
        input_digest=f"d-{month}",
        created_by=people["requester"].user,
        current_step="publish",
        context=context,
    )
    with transaction.atomic():
        for name in ("start", *transitions):
            lifecycle.apply(Execution.objects.get(pk=execution.pk), name, reason=name)
    return Execution.objects.get(pk=execution.pk)


def publish_action(execution: Execution, status: str, *, attempts: int = 1) -> Action:
    """The report's publish effect (``<ref>:publish:v1``) in the ledger, as ``status``."""
    return Action.objects.create(
        key=f"{execution.ref}:publish:v1",
        execution=execution,
        step="publish",
        type="publish_report",
        status=status,
        attempts=attempts,
    )


def pending(user, workflow: str) -> Execution:
    """A committed, pending execution of ``workflow``, as ``execution_start`` makes it,
    without ringing the doorbell (this test runs it itself)."""
    flow = registry.latest(workflow)
    data = flow.parse_input({})
    return Execution.objects.create(
        workflow=flow.name,
        workflow_version=flow.version,
        input=data,
        input_digest=input_digest(flow.name, data),
        created_by=user,
        current_step=flow.first_step,
        context={"artifacts": {}, "notes": notes.initial(goal=flow.goal(data), constraints=[])},
    )


def snapshot() -> tuple:
    """Everything a write could change: row counts and every status. An approval page
    the refused form redirects to records that it was viewed (what the approver saw);
    that is the page's, not the form's, so ``viewed`` entries don't count."""
    counts = tuple(
        model.objects.count()
        for model in (
            Execution,
            ExecutionEvent,
            StepRun,
            Action,
            ApprovalRequest,
            Decision,
            ArtifactVersion,
            RefusalWindow,
        )
    ) + (AuditEntry.objects.exclude(kind=AuditEntry.Kind.VIEWED).count(),)
    statuses = (
        tuple(Execution.objects.order_by("pk").values_list("status", "status_reason")),
        tuple(Action.objects.order_by("pk").values_list("status", "receipt")),
        tuple(ApprovalRequest.objects.order_by("pk").values_list("status", flat=True)),
    )
    return counts, statuses
