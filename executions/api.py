"""The Task API (django-ninja). Thin: parse, call one service or selector, answer.

401 without credentials, 403 without authority, 409 when the state doesn't allow it,
422 naming the field for malformed input (nothing is written in that case).
"""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Any

from django.http import HttpRequest, HttpResponse
from ninja import NinjaAPI, Schema
from ninja.errors import AuthenticationError, HttpError, ValidationError
from ninja.security import HttpBearer, SessionAuth

from approvals.services import approval_decide, execution_redraft
from artifacts import selectors as artifact_selectors
from artifacts.services import artifact_version_content
from artifacts.store import CorruptArtifact

from . import selectors, services
from .auth import user_for_token
from .errors import Conflict, InvalidInput, NotFound, RateLimited, ServiceError
from .inputs import (
    ActionKey,
    ArtifactRef,
    Cursor,
    DbInt,
    DecisionEventIn,
    ExecutionRef,
    ReasonIn,
    RedraftIn,
    ResolveIn,
    StartIn,
    WorkflowName,
)
from .models import Status

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


api = NinjaAPI(
    title="keel Task API",
    version="1",
    description="Start, follow, decide and cancel durable agent executions.",
    auth=[BearerToken(), BrowserSession()],
    urls_namespace="api",
)


@api.exception_handler(ServiceError)
def _service_error(request: HttpRequest, exc: ServiceError):
    if isinstance(exc, InvalidInput):
        loc = ["body", *exc.field.split(".")]
        return api.create_response(
            request, {"detail": [{"loc": loc, "msg": exc.reason, "type": "value_error"}]}, status=422
        )
    response = api.create_response(request, {"detail": exc.message, **exc.detail}, status=exc.status_code)
    if isinstance(exc, RateLimited):
        response["Retry-After"] = str(exc.retry_after)
    return response


@api.exception_handler(HttpError)
def _http_error(request: HttpRequest, exc: HttpError):
    if exc.status_code == 400 and str(exc).startswith("Cannot parse request body"):
        # Malformed input is a 422 everywhere in this API, an unparseable body included.
        detail = [{"loc": ["body"], "msg": "the request body is not valid JSON", "type": "json_invalid"}]
        return api.create_response(request, {"detail": detail}, status=422)
    return api.create_response(request, {"detail": str(exc)}, status=exc.status_code)


@api.exception_handler(ValidationError)
def _validation_error(request: HttpRequest, exc: ValidationError):
    """422 with ``loc`` naming the field from the body's root (``["body", "receipt",
    "order_id"]``), the same shape a service's InvalidInput answers: django-ninja's
    name for the body parameter (``payload``) is ours, not the client's."""
    detail = []
    for error in exc.errors:
        loc = list(error.get("loc", []))
        if loc[:1] == ["body"] and loc[1:2] == ["payload"]:
            loc = ["body", *loc[2:]]
        detail.append({**error, "loc": loc})
    return api.create_response(request, {"detail": detail}, status=422)


@api.exception_handler(AuthenticationError)
def _unauthenticated(request: HttpRequest, exc: AuthenticationError):
    return api.create_response(request, {"detail": "authentication required: a session or a Bearer token"}, status=401)


# --- schemas (bodies live in .inputs, shared with the screens)


class PendingApprovalOut(Schema):
    id: int
    artifact_id: str
    artifact_version: int
    content_sha256: str
    action: str
    expires_at: datetime | None


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
    actions: list[ActionOut]
    artifacts: list[ArtifactOut]
    created_at: datetime
    updated_at: datetime


class ExecutionPage(Schema):
    items: list[ExecutionOut]
    next: str | None


class DecisionOut(Schema):
    approval_id: int
    decision: str
    event_id: str
    decided_by: str
    execution_status: str


class ErrorOut(Schema):
    detail: Any


class RateLimitedOut(Schema):
    detail: str
    retry_after: int


# The answers each kind of operation can give besides its success (docs/api.md).
READ = {401: ErrorOut, 422: ErrorOut, 500: ErrorOut}
READ_ONE = {**READ, 404: ErrorOut}
WRITE = {**READ, 403: ErrorOut, 409: ErrorOut, 413: ErrorOut, 415: ErrorOut}
WRITE_ONE = {**WRITE, 404: ErrorOut}


# --- endpoints


@api.post("/executions", response={200: ExecutionOut, 201: ExecutionOut, **WRITE}, tags=["executions"])
def start_execution(request: HttpRequest, payload: StartIn):
    """Start an execution. With ``idempotency_key``, retries return the original (200)."""
    execution, created = services.execution_start(
        user=request.user, workflow=payload.workflow, input=payload.input, idempotency_key=payload.idempotency_key
    )
    return (201 if created else 200), selectors.execution_payload(execution)


@api.get("/executions", response={200: ExecutionPage, **READ}, tags=["executions"])
def list_executions(
    request: HttpRequest,
    status: Status | None = None,
    workflow: WorkflowName | None = None,
    cursor: Cursor | None = None,
):
    page, following = selectors.execution_page(status=status, workflow=workflow, cursor=cursor)
    return {"items": [selectors.execution_payload(e) for e in selectors.prefetch_payloads(page)], "next": following}


@api.get("/executions/{execution_id}", response={200: ExecutionOut, **READ_ONE}, tags=["executions"])
def get_execution(request: HttpRequest, execution_id: ExecutionRef):
    return selectors.execution_payload(services.execution_for(execution_id))


@api.post(
    "/executions/{execution_id}/events",
    response={202: DecisionOut, **WRITE_ONE, 429: RateLimitedOut},
    tags=["approvals"],
)
def post_event(request: HttpRequest, execution_id: ExecutionRef, payload: DecisionEventIn):
    """Deliver a person's decision on the pending approval. Idempotent by ``event_id``.

    Refused attempts are audited; past a burst of them, further refused attempts are
    answered 429 and summarised in one audit entry."""
    result = approval_decide(
        user=request.user,
        execution_ref=execution_id,
        approval_id=payload.approval_id,
        decision=payload.decision,
        artifact_version=payload.artifact_version,
        content_sha256=payload.content_sha256,
        event_id=payload.event_id,
        comment=payload.comment,
    )
    return 202, result.as_dict()


@api.post("/executions/{execution_id}/cancel", response={200: ExecutionOut, **WRITE_ONE}, tags=["executions"])
def cancel_execution(request: HttpRequest, execution_id: ExecutionRef, payload: ReasonIn):
    execution = services.execution_cancel(ref=execution_id, user=request.user, reason=payload.reason)
    return selectors.execution_payload(execution)


@api.post("/executions/{execution_id}/redraft", response={200: ExecutionOut, **WRITE_ONE}, tags=["approvals"])
def redraft_execution(request: HttpRequest, execution_id: ExecutionRef, payload: RedraftIn):
    """The starter (or an operator) asks for a new draft while approval is pending: the
    pending request is superseded and the new version needs its own decision."""
    execution = execution_redraft(ref=execution_id, user=request.user, instruction=payload.instruction)
    return selectors.execution_payload(execution)


@api.post("/executions/{execution_id}/resume", response={200: ExecutionOut, **WRITE_ONE}, tags=["executions"])
def resume_execution(request: HttpRequest, execution_id: ExecutionRef, payload: ReasonIn):
    execution = services.execution_resume(ref=execution_id, user=request.user, reason=payload.reason)
    return selectors.execution_payload(execution)


class ActionDetailOut(Schema):
    key: str
    type: str
    status: str
    attempts: int
    receipt: dict[str, Any] | None
    last_error: str


@api.post("/actions/{key}/resolve", response={200: ActionDetailOut, **WRITE_ONE}, tags=["actions"])
def resolve_action(request: HttpRequest, key: ActionKey, payload: ResolveIn):
    """Operators: establish the outcome of an action the runtime could not (audited)."""
    return services.action_resolve(
        key=key, user=request.user, outcome=payload.outcome, evidence=payload.evidence, receipt=payload.receipt
    )


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


@api.get(
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
