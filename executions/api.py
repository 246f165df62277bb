"""The runtime's part of the Task API (django-ninja): executions, actions, artifact
content. Thin: parse, call one service or selector, answer. ``config.api`` assembles
it with approvals' part and maps errors (401, 403, 409, 422 naming the field).
"""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Any, Literal

from django.http import HttpRequest, HttpResponse
from ninja import Router, Schema
from ninja import Status as Reply  # an answer's status and body (``Status`` is the lifecycle's)
from ninja.security import HttpBearer, SessionAuth

from artifacts import selectors as artifact_selectors
from artifacts.services import artifact_version_content
from artifacts.store import CorruptArtifact

from . import bulk, compensations, drift, restart, selectors, services
from .auth import user_for_token
from .errors import Conflict, InvalidInput, NotFound
from .inputs import (
    AcceptRequestIn,
    ActionKey,
    ArtifactRef,
    BulkIn,
    CloseIn,
    Cursor,
    DbInt,
    ExecutionRef,
    ReasonIn,
    ResolveIn,
    RestartIn,
    StartIn,
    WorkflowName,
)
from .models import Status
from .stuck import REASONS

StuckReason = Literal[REASONS]  # type: ignore[valid-type]

log = logging.getLogger(__name__)


class BearerToken(HttpBearer):
    def authenticate(self, request: HttpRequest, token: str):
        user = user_for_token(token)
        if user is not None:
            request.user = user
        return user


class BrowserSession(SessionAuth):
    """Django's session, CSRF-checked on writes — but only for a logged-in session, so
    a request with no credentials at all is a 401, not a CSRF 403."""

    def _get_key(self, request: HttpRequest):
        if not request.user.is_authenticated:
            return None
        return super()._get_key(request)


router = Router()


# --- schemas (bodies live in .inputs, shared with the screens)


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
    reason: StuckReason
    since: datetime | None
    detail: str
    action: Literal[
        "wait", "check_workers", "resolve", "escalate", "resume", "retry", "cancel", "restart", "compensate"
    ]


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


class ExecutionPage(Schema):
    items: list[ExecutionOut]
    next: str | None


class ErrorOut(Schema):
    detail: Any


# The answers each kind of operation can give besides its success (docs/api.md).
READ = {401: ErrorOut, 422: ErrorOut, 500: ErrorOut}
READ_ONE = {**READ, 404: ErrorOut}
WRITE = {**READ, 403: ErrorOut, 409: ErrorOut, 413: ErrorOut, 415: ErrorOut}
WRITE_ONE = {**WRITE, 404: ErrorOut}


# --- endpoints


@router.post("/executions", response={200: ExecutionOut, 201: ExecutionOut, **WRITE}, tags=["executions"])
def start_execution(request: HttpRequest, payload: StartIn):
    """Start an execution. With ``idempotency_key``, retries return the original (200)."""
    execution, created = services.execution_start(
        user=request.user, workflow=payload.workflow, input=payload.input, idempotency_key=payload.idempotency_key
    )
    return Reply(201 if created else 200, selectors.execution_payload(execution))


@router.get("/executions", response={200: ExecutionPage, **READ}, tags=["executions"])
def list_executions(
    request: HttpRequest,
    status: Status | None = None,
    workflow: WorkflowName | None = None,
    reason: StuckReason | None = None,
    cursor: Cursor | None = None,
):
    """Newest first, 50 a page; ``reason`` filters by why it is stuck (DESIGN §4)."""
    page, following = selectors.execution_page(status=status, workflow=workflow, reason=reason, cursor=cursor)
    return {"items": [selectors.execution_payload(e) for e in selectors.prefetch_payloads(page)], "next": following}


class SummaryOut(Schema):
    by_status: dict[str, int]
    by_reason: dict[str, int]


@router.get("/executions/summary", response={200: SummaryOut, **READ}, tags=["executions"])
def executions_summary(request: HttpRequest, workflow: WorkflowName | None = None):
    """How many executions are in each status (terminal included) and stuck for each reason."""
    return selectors.summary(workflow=workflow)


# --- bulk operations (executions.bulk). Registered before /executions/{execution_id},
# which would otherwise take the path.


class IneligibleOut(Schema):
    id: str
    why: str


class BulkDryRunOut(Schema):
    operation: str
    eligible: list[str]
    ineligible: list[IneligibleOut]
    truncated: bool
    token: str


class BulkResultOut(Schema):
    id: str
    outcome: Literal["done", "skipped", "error"]
    detail: str


class BulkRunOut(Schema):
    operation: str
    batch: str
    results: list[BulkResultOut]


@router.post("/executions/bulk", response={200: BulkDryRunOut | BulkRunOut, **WRITE}, tags=["executions"])
def bulk_operation(request: HttpRequest, payload: BulkIn):
    """Operators: cancel, resume or retry many executions. A dry run (``ids`` or a
    ``filter``) changes nothing and lists what is eligible; a real run takes the ``ids``
    a dry run returned and reports per item, each its own audited transition."""
    if payload.dry_run:
        found = bulk.bulk_dry_run(
            user=request.user,
            operation=payload.operation,
            ids=payload.ids,
            filter=payload.filter.model_dump() if payload.filter is not None else None,
        )
        return found.as_dict()
    if payload.filter is not None:
        raise InvalidInput("filter", "a real run takes the ids a dry run returned, not a filter")
    if payload.ids is None:
        raise InvalidInput("ids", "name the executions (the eligible ids of a dry run)")
    return bulk.bulk_run(
        user=request.user, operation=payload.operation, ids=payload.ids, reason=payload.reason, token=payload.token
    ).as_dict()


@router.get("/executions/{execution_id}", response={200: ExecutionOut, **READ_ONE}, tags=["executions"])
def get_execution(request: HttpRequest, execution_id: ExecutionRef):
    return selectors.execution_payload(services.execution_for(execution_id))


@router.post("/executions/{execution_id}/cancel", response={200: ExecutionOut, **WRITE_ONE}, tags=["executions"])
def cancel_execution(request: HttpRequest, execution_id: ExecutionRef, payload: ReasonIn):
    execution = services.execution_cancel(ref=execution_id, user=request.user, reason=payload.reason)
    return selectors.execution_payload(execution)


@router.post("/executions/{execution_id}/retry", response={200: ExecutionOut, **WRITE_ONE}, tags=["executions"])
def retry_execution(request: HttpRequest, execution_id: ExecutionRef, payload: ReasonIn):
    """Operators: a ``retry_pending`` execution is due now (any other status: 409)."""
    execution = services.execution_retry_now(ref=execution_id, user=request.user, reason=payload.reason)
    return selectors.execution_payload(execution)


@router.post("/executions/{execution_id}/resume", response={200: ExecutionOut, **WRITE_ONE}, tags=["executions"])
def resume_execution(request: HttpRequest, execution_id: ExecutionRef, payload: ReasonIn):
    execution = services.execution_resume(ref=execution_id, user=request.user, reason=payload.reason)
    return selectors.execution_payload(execution)


@router.post(
    "/executions/{execution_id}/accept-request", response={200: ExecutionOut, **WRITE_ONE}, tags=["executions"]
)
def accept_request(request: HttpRequest, execution_id: ExecutionRef, payload: AcceptRequestIn):
    """Operators: an execution stopped by a model drift goes on with the request its step
    rebuilt (``key`` and its ``request_sha256``, as the page shows them): the model is
    asked again for that call; the old record is kept, superseded (audited)."""
    execution = drift.execution_accept_request(
        ref=execution_id,
        user=request.user,
        key=payload.key,
        request_sha256=payload.request_sha256,
        reason=payload.reason,
    )
    return selectors.execution_payload(execution)


class ToolCallOut(Schema):
    tool: str
    args: dict[str, Any] | None


class ModelCallOut(Schema):
    key: str
    revision: int
    superseded: bool
    step: str
    round: int
    seq: int
    provider: str
    model: str
    model_returned: str
    prompt_id: str
    prompt_version: str
    request_sha256: str
    input_tokens: int
    output_tokens: int
    latency_ms: int
    finish_reason: str
    tool_calls: list[ToolCallOut]
    created_at: datetime


class ModelCallPage(Schema):
    items: list[ModelCallOut]


@router.get("/executions/{execution_id}/model-calls", response={200: ModelCallPage, **READ_ONE}, tags=["executions"])
def list_model_calls(request: HttpRequest, execution_id: ExecutionRef):
    """The model-call journal of an execution, in call order (model requested and returned)."""
    return {"items": selectors.model_calls(services.execution_for(execution_id))}


class ActionDetailOut(Schema):
    key: str
    type: str
    status: str
    attempts: int
    receipt: dict[str, Any] | None
    last_error: str


@router.post("/actions/{key}/resolve", response={200: ActionDetailOut, **WRITE_ONE}, tags=["actions"])
def resolve_action(request: HttpRequest, key: ActionKey, payload: ResolveIn):
    """Operators: establish the outcome of an action the runtime could not (audited)."""
    return services.action_resolve(
        key=key, user=request.user, outcome=payload.outcome, evidence=payload.evidence, receipt=payload.receipt
    )


# --- operators: resume preview, restart from a step, closing compensations (issue 12)


class PlannedStepOut(Schema):
    step: str
    label: str
    kind: str
    plan: Literal["skip", "run", "blocked"]
    why: str


class PreviewEffectOut(Schema):
    key: str
    type: str
    status: str
    may_repeat: bool
    provider_dedupes: bool


class StaleApprovalOut(Schema):
    approval_id: int
    artifact_version: int
    content_sha256: str
    why: str


class WorkflowVersionOut(Schema):
    pinned: int
    latest: int


class ResumePreviewOut(Schema):
    can_resume: bool
    blocked_by: list[str]
    steps: list[PlannedStepOut]
    effects: list[PreviewEffectOut]
    stale_approvals: list[StaleApprovalOut]
    workflow_version: WorkflowVersionOut


@router.get(
    "/executions/{execution_id}/resume-preview",
    response={200: ResumePreviewOut, **READ_ONE, 403: ErrorOut},
    tags=["executions"],
)
def resume_preview(request: HttpRequest, execution_id: ExecutionRef):
    """Operators: what a resume would skip, run and risk; resume refuses while ``can_resume`` is false."""
    return services.execution_resume_preview(ref=execution_id, user=request.user)


@router.post("/executions/{execution_id}/restart", response={201: ExecutionOut, **WRITE_ONE}, tags=["executions"])
def restart_execution(request: HttpRequest, execution_id: ExecutionRef, payload: RestartIn):
    """Operators: a failed execution runs again from ``from_step`` as a new execution
    that reuses the recorded outputs of the steps before it."""
    execution = restart.execution_restart(
        ref=execution_id,
        user=request.user,
        from_step=payload.from_step,
        reason=payload.reason,
        accept_repeats=payload.accept_repeats,
    )
    return Reply(201, selectors.execution_payload(execution))


class RepeatOut(Schema):
    key: str
    type: str
    why: str


class RestartOptionOut(Schema):
    step: str
    label: str
    works: bool
    why_not: str
    would_repeat: list[RepeatOut]
    warnings: list[str]
    default: bool


class RestartOptionsOut(Schema):
    options: list[RestartOptionOut]


@router.get(
    "/executions/{execution_id}/restart-options",
    response={200: RestartOptionsOut, **READ_ONE, 403: ErrorOut},
    tags=["executions"],
)
def restart_options(request: HttpRequest, execution_id: ExecutionRef):
    """Operators: the steps a failed execution can be restarted from, what each would send
    again, and the default (empty when it is not failed)."""
    return {"options": [o.as_dict() for o in restart.execution_restart_options(ref=execution_id, user=request.user)]}


@router.post("/actions/{key}/close", response={200: ActionDetailOut, **WRITE_ONE}, tags=["actions"])
def close_action(request: HttpRequest, key: ActionKey, payload: CloseIn):
    """Operators: close a planned compensation of a cancelled execution with evidence (audited)."""
    return compensations.action_close(key=key, user=request.user, outcome=payload.outcome, evidence=payload.evidence)


# The stored bytes of any content type, or an error as JSON.
CONTENT_RESPONSES = {
    200: {
        "description": "The version's bytes, in its content type; `X-Content-SHA256` is their verified sha256.",
        "headers": {
            "X-Content-SHA256": {"schema": {"type": "string", "pattern": "^[0-9a-f]{64}$"}},
        },
        "content": {"*/*": {"schema": {"type": "string", "format": "binary"}}},
    }
}


@router.get(
    "/artifacts/{artifact_id}/versions/{n}/content",
    response={200: None, **READ_ONE, 409: ErrorOut},
    openapi_extra={"responses": CONTENT_RESPONSES},
    tags=["artifacts"],
)
def artifact_content(request: HttpRequest, artifact_id: ArtifactRef, n: DbInt):
    """The bytes of version ``n`` of an artifact, verified against their sha256 before they
    leave (409 if the stored bytes no longer match). Any authenticated user may read."""
    version = artifact_selectors.version_for(artifact_ref=artifact_id, number=n)
    if version is None:
        raise NotFound(f"no version {n} of {artifact_id}")
    try:
        content = artifact_version_content(version)
    except CorruptArtifact as exc:
        log.error("artifact %s V%s failed verification: %s", artifact_id, n, exc)
        raise Conflict(f"the stored bytes of {artifact_id} V{n} do not match their sha256; not served") from None
    response = HttpResponse(content, content_type=version.content_type)
    response["X-Content-SHA256"] = version.sha256
    response["X-Content-Type-Options"] = "nosniff"
    response["Content-Security-Policy"] = "sandbox"  # model-made bytes never run as a page of ours
    return response
