"""The runtime's answer shapes (django-ninja schemas): an execution as the Task API shows
it (``ExecutionOut`` and its parts), a page of them, an action after it was resolved, a
workflow as the catalogue shows it (``WorkflowOut``).
``executions.api`` answers with them, and so does every app whose endpoint answers with
an execution (approvals, triage, retention) or prints one (the CLI's ``--json``). The
bodies are in ``executions.inputs``; the error shape and the auth in ``apikit``.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal, TypeAlias

from ninja import Schema

from .reasons import StuckReason

ReasonName: TypeAlias = Literal[tuple(StuckReason.values)]  # type: ignore[valid-type]


class PendingApprovalOut(Schema):
    id: int
    artifact_id: str
    artifact_version: int
    content_sha256: str
    action: str
    expires_at: datetime | None


class PendingGateOut(Schema):
    kind: str
    step: str
    waiting_for: str
    since: datetime | None
    until: datetime | None


class ActionOut(Schema):
    key: str
    type: str
    status: str
    attempts: int


class ArtifactOut(Schema):
    artifact_id: str
    version: int
    sha256: str
    size: int
    content_type: str
    produced_by_step: str


class AttemptOut(Schema):
    step: str
    n: int
    max: int


class LeaseOut(Schema):
    owner: str
    expires_at: datetime | None


class StuckOut(Schema):
    reason: ReasonName
    since: datetime | None
    detail: str
    action: Literal[
        "wait",
        "check_workers",
        "resolve",
        "escalate",
        "resume",
        "retry",
        "cancel",
        "restart",
        "compensate",
    ]


class ParentOut(Schema):
    id: str
    step: str


class ChildOut(Schema):
    id: str
    workflow: str
    status: str
    step: str


class CostOut(Schema):
    usd: float | None
    input_tokens: int
    output_tokens: int
    budget_usd: float | None


class LegalHoldOut(Schema):
    """A legal hold (retention): the execution is kept whatever its age (not a pause: triage's ``PauseHoldOut``)."""

    reason: str
    by: str
    at: datetime


class ExecutionOut(Schema):
    id: str
    workflow: str
    workflow_version: int
    status: str
    status_reason: str
    current_step: str
    step_label: str
    input: dict[str, Any]
    created_by: str
    pending_approval: PendingApprovalOut | None
    pending_gate: PendingGateOut | None
    # A question a tool's provider asked mid-call (an MCP elicitation): {id, message, schema (the
    # JSON Schema an answer must meet)}; answered by POST …/events {type: "input.answer", …}.
    pending_input: dict[str, Any] | None = None
    actions: list[ActionOut]
    artifacts: list[ArtifactOut]
    created_at: datetime
    updated_at: datetime
    status_changed_at: datetime
    due_at: datetime | None
    attempt: AttemptOut | None
    lease: LeaseOut | None
    stuck: StuckOut | None
    restarted_from: str | None
    restarted_as: str | None
    parent: ParentOut | None
    children: list[ChildOut]
    cost: CostOut
    paused_from: str | None = None  # paused: the status resume returns it to (issue 22)
    hold: LegalHoldOut | None = None
    result: Any = None  # completed: what it produced (Workflow.result); null until then
    # Its OpenTelemetry trace (32 hex digits), derived from the execution: the same in every
    # process and after every crash, present with tracing off (executions.engine.tracing).
    trace_id: str = ""


class ExecutionPage(Schema):
    items: list[ExecutionOut]
    next: str | None


class ActionDetailOut(Schema):
    key: str
    type: str
    status: str
    attempts: int
    receipt: dict[str, Any] | None
    last_error: str


# --- the catalogue (docs/design.md §6, "Platform"; executions.catalogue)


class WorkflowStepOut(Schema):
    name: str
    label: str
    kind: str


class CatalogueVersionOut(Schema):
    version: int
    input_schema: dict[str, Any]
    steps: list[WorkflowStepOut]
    live: int  # its executions not yet completed, failed or cancelled
    share: int  # the percentage of new starts without a version that go to it (executions.rollouts)


class RolloutOut(Schema):
    version: int
    percent: int  # of the new starts without a version: to ``version``; the rest to ``stable``
    stable: int
    reason: str
    by: str
    at: datetime


class WorkflowOut(Schema):
    name: str
    title: str
    description: str
    version: int
    versions: list[int]
    input_schema: dict[str, Any]
    steps: list[WorkflowStepOut]
    # Every registered version, oldest first, with its own steps and input (a start may
    # choose one: ``version`` on POST /api/executions).
    by_version: list[CatalogueVersionOut]
    # Versions no longer registered with live executions, by version: their count.
    unregistered_live: dict[str, int]
    rollout: RolloutOut | None  # none: every start without a version goes to the latest
    paused: bool
    paused_reason: str | None
    paused_by: str | None
    paused_at: datetime | None
