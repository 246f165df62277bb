"""Reads: what the API, the screens and the CLI show about executions."""

from __future__ import annotations

from typing import Any

from django.db.models import Prefetch, QuerySet, prefetch_related_objects

from artifacts.models import ArtifactVersion

from . import gates, registry
from .errors import InvalidInput
from .models import Execution, Status, pk_from_ref

PAGE_SIZE = 50


def step_label(execution: Execution) -> str:
    """What a person reads for "where is it": the current step's label, or the outcome."""
    if execution.status == Status.COMPLETED:
        return "Completed"
    if execution.status in (Status.FAILED, Status.CANCELLED) and not execution.current_step:
        return execution.get_status_display()
    try:
        flow = registry.get(execution.workflow, execution.workflow_version)
    except registry.UnknownWorkflow:
        return execution.current_step
    return flow.label_for(execution.current_step) if execution.current_step else ""


def gate_payload(pending: gates.PendingGate | None) -> dict[str, Any] | None:
    """The open gate an execution waits at, for the API: kind, step, a sentence, since/until."""
    if pending is None:
        return None
    return {
        "kind": pending.kind,
        "step": pending.step,
        "waiting_for": pending.waiting_for,
        "since": pending.since,
        "until": pending.until,
    }


def approval_payload(pending: gates.PendingGate | None) -> dict[str, Any] | None:
    """``pending_approval`` of the API (DESIGN §6): the open approval gate's details."""
    return pending.details if pending is not None and pending.kind == "approval" else None


def artifact_versions(execution: Execution) -> QuerySet[ArtifactVersion]:
    return ArtifactVersion.objects.filter(artifact__execution=execution).select_related("artifact")


def prefetch_payloads(executions: list[Execution]) -> list[Execution]:
    """Load what ``execution_payload`` reads for a whole page at once, so the page
    costs a fixed number of queries instead of a few per execution."""
    pending = gates.pending_for(executions)
    for execution in executions:
        execution.pending_gate = pending.get(execution.pk)
    prefetch_related_objects(
        executions,
        "actions",
        Prefetch(
            "artifacts__versions",
            queryset=ArtifactVersion.objects.select_related("artifact").order_by("number"),
        ),
    )
    return executions


def execution_payload(execution: Execution) -> dict[str, Any]:
    if hasattr(execution, "pending_gate"):  # loaded by prefetch_payloads
        pending = execution.pending_gate
        versions = [v for artifact in execution.artifacts.all() for v in artifact.versions.all()]
    else:
        pending, versions = gates.pending_of(execution), list(artifact_versions(execution))
    return {
        "id": execution.ref,
        "workflow": execution.workflow,
        "workflow_version": execution.workflow_version,
        "status": execution.status,
        "status_reason": execution.status_reason,
        "current_step": execution.current_step,
        "step_label": step_label(execution),
        "input": execution.input,
        "created_by": execution.created_by.get_username(),
        "pending_approval": approval_payload(pending),
        "pending_gate": gate_payload(pending),
        "actions": [
            {"key": a.key, "type": a.type, "status": a.status, "attempts": a.attempts} for a in execution.actions.all()
        ],
        "artifacts": [
            {
                "artifact_id": v.artifact.ref,
                "version": v.number,
                "sha256": v.sha256,
                "size": v.size,
                "content_type": v.content_type,
                "produced_by_step": v.produced_by_step,
            }
            for v in versions
        ],
        "created_at": execution.created_at,
        "updated_at": execution.updated_at,
    }


def execution_page(
    *, status: str | None = None, workflow: str | None = None, cursor: str | None = None, limit: int = PAGE_SIZE
) -> tuple[list[Execution], str | None]:
    """Newest first. ``cursor`` is the ``next`` of the previous page."""
    rows = Execution.objects.select_related("created_by").order_by("-id")
    if status:
        if status not in Status.values:
            raise InvalidInput("status", f"unknown status {status!r}; one of {', '.join(Status.values)}")
        rows = rows.filter(status=status)
    if workflow:
        rows = rows.filter(workflow=workflow)
    if cursor:
        before = pk_from_ref(cursor)
        if before is None:
            raise InvalidInput("cursor", "not a cursor this API returned")
        rows = rows.filter(pk__lt=before)
    page = list(rows[: limit + 1])
    more = len(page) > limit
    page = page[:limit]
    return page, (page[-1].ref if more and page else None)
