"""The Task API (django-ninja). Thin: parse, call one service or selector, answer.

401 without credentials, 403 without authority, 409 when the state doesn't allow it,
422 naming the field for malformed input (nothing is written in that case).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from django.http import HttpRequest
from ninja import Field, NinjaAPI, Schema
from ninja.errors import AuthenticationError, HttpError
from ninja.security import HttpBearer, SessionAuth

from approvals.services import approval_decide, execution_redraft

from . import selectors, services
from .auth import user_for_token
from .errors import InvalidInput, ServiceError


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
    return api.create_response(request, {"detail": exc.message, **exc.detail}, status=exc.status_code)


@api.exception_handler(HttpError)
def _http_error(request: HttpRequest, exc: HttpError):
    if exc.status_code == 400 and str(exc).startswith("Cannot parse request body"):
        # Malformed input is a 422 everywhere in this API, an unparseable body included.
        detail = [{"loc": ["body"], "msg": "the request body is not valid JSON", "type": "json_invalid"}]
        return api.create_response(request, {"detail": detail}, status=422)
    return api.create_response(request, {"detail": str(exc)}, status=exc.status_code)


@api.exception_handler(AuthenticationError)
def _unauthenticated(request: HttpRequest, exc: AuthenticationError):
    return api.create_response(request, {"detail": "authentication required: a session or a Bearer token"}, status=401)


# --- schemas


class StartIn(Schema):
    workflow: str = Field(min_length=1, max_length=100)
    input: dict[str, Any] = Field(default_factory=dict)
    idempotency_key: str | None = Field(default=None, min_length=1, max_length=200)


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


class DecisionEventIn(Schema):
    type: Literal["approval.decision"]
    approval_id: int
    decision: Literal["approve", "reject", "request_changes"]
    artifact_version: int = Field(ge=1)
    content_sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    comment: str = Field(default="", max_length=4000)
    event_id: str = Field(min_length=1, max_length=100)


class DecisionOut(Schema):
    approval_id: int
    decision: str
    event_id: str
    decided_by: str
    execution_status: str


class ReasonIn(Schema):
    reason: str = Field(default="", max_length=2000)


class ErrorOut(Schema):
    detail: Any


ERRORS = {401: ErrorOut, 403: ErrorOut, 404: ErrorOut, 409: ErrorOut, 422: ErrorOut}


# --- endpoints


@api.post("/executions", response={200: ExecutionOut, 201: ExecutionOut, **ERRORS}, tags=["executions"])
def start_execution(request: HttpRequest, payload: StartIn):
    """Start an execution. With ``idempotency_key``, retries return the original (200)."""
    execution, created = services.execution_start(
        user=request.user, workflow=payload.workflow, input=payload.input, idempotency_key=payload.idempotency_key
    )
    return (201 if created else 200), selectors.execution_payload(execution)


@api.get("/executions", response={200: ExecutionPage, **ERRORS}, tags=["executions"])
def list_executions(
    request: HttpRequest, status: str | None = None, workflow: str | None = None, cursor: str | None = None
):
    page, following = selectors.execution_page(status=status, workflow=workflow, cursor=cursor)
    return {"items": [selectors.execution_payload(e) for e in selectors.prefetch_payloads(page)], "next": following}


@api.get("/executions/{execution_id}", response={200: ExecutionOut, **ERRORS}, tags=["executions"])
def get_execution(request: HttpRequest, execution_id: str):
    return selectors.execution_payload(services.execution_for(execution_id))


@api.post("/executions/{execution_id}/events", response={202: DecisionOut, **ERRORS}, tags=["approvals"])
def post_event(request: HttpRequest, execution_id: str, payload: DecisionEventIn):
    """Deliver a person's decision on the pending approval. Idempotent by ``event_id``."""
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


@api.post("/executions/{execution_id}/cancel", response={200: ExecutionOut, **ERRORS}, tags=["executions"])
def cancel_execution(request: HttpRequest, execution_id: str, payload: ReasonIn):
    execution = services.execution_cancel(ref=execution_id, user=request.user, reason=payload.reason)
    return selectors.execution_payload(execution)


class RedraftIn(Schema):
    instruction: str = Field(min_length=1, max_length=4000)


@api.post("/executions/{execution_id}/redraft", response={200: ExecutionOut, **ERRORS}, tags=["approvals"])
def redraft_execution(request: HttpRequest, execution_id: str, payload: RedraftIn):
    """The starter (or an operator) asks for a new draft while approval is pending: the
    pending request is superseded and the new version needs its own decision."""
    execution = execution_redraft(ref=execution_id, user=request.user, instruction=payload.instruction)
    return selectors.execution_payload(execution)


@api.post("/executions/{execution_id}/resume", response={200: ExecutionOut, **ERRORS}, tags=["executions"])
def resume_execution(request: HttpRequest, execution_id: str, payload: ReasonIn):
    execution = services.execution_resume(ref=execution_id, user=request.user, reason=payload.reason)
    return selectors.execution_payload(execution)


class ResolveIn(Schema):
    outcome: Literal["succeeded", "failed"]
    evidence: str = Field(min_length=1, max_length=4000)
    # The receipt fields the effect declares (e.g. order_id); required for succeeded when declared.
    receipt: dict[str, Any] | None = None


class ActionDetailOut(Schema):
    key: str
    type: str
    status: str
    attempts: int
    receipt: dict[str, Any] | None
    last_error: str


@api.post("/actions/{key}/resolve", response={200: ActionDetailOut, **ERRORS}, tags=["actions"])
def resolve_action(request: HttpRequest, key: str, payload: ResolveIn):
    """Operators: establish the outcome of an action the runtime could not (audited)."""
    return services.action_resolve(
        key=key, user=request.user, outcome=payload.outcome, evidence=payload.evidence, receipt=payload.receipt
    )
