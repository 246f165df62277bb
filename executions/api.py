"""The runtime's part of the Task API (django-ninja): executions, actions, artifact
content. Thin: parse, call one service or selector, answer. ``config.api`` assembles
it with approvals' part and maps errors (401, 403, 409, 422 naming the field).
"""

from __future__ import annotations

import logging
from datetime import datetime
from functools import reduce
from operator import or_
from typing import Annotated, Any, Literal

from django.apps import apps
from django.core.exceptions import ImproperlyConfigured
from django.db import transaction
from django.http import HttpRequest, HttpResponse, StreamingHttpResponse
from ninja import Body, Router, Schema
from ninja import Status as Reply  # an answer's status and body (``Status`` is the lifecycle's)
from ninja.operation import Operation
from ninja.security import HttpBearer, SessionAuth
from pydantic import Field

from accounts.tokens import user_for_token
from artifacts import selectors as artifact_selectors
from artifacts.services import artifact_version_content
from artifacts.store import CorruptArtifact

from . import catalogue, holds, selectors, services
from .engine import events
from .errors import Conflict, NotFound
from .inputs import (
    ActionKey,
    ArtifactRef,
    BudgetIn,
    Cursor,
    DbInt,
    ExecutionRef,
    InputFilter,
    ReasonIn,
    RequiredWorkflowName,
    ResolveIn,
    StartIn,
    WorkflowName,
)
from .models import Status
from .reasons import StuckReason

ReasonName = Literal[tuple(StuckReason.values)]  # type: ignore[valid-type]

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


class ExecutionPage(Schema):
    items: list[ExecutionOut]
    next: str | None


class ErrorOut(Schema):
    detail: Any


def _one_wrapper_per_response_schema() -> None:
    """django-ninja wraps the schema of each (operation, status code) in a pydantic model of
    its own — ~270 here, mostly the same ``ErrorOut`` — built when the routers are imported:
    ~0.2 s of every web worker's start. The wrapper depends on the schema alone and nothing
    mutates it afterwards, so one per schema serves every operation. Every API module
    imports this one before it declares an operation; the OpenAPI document is unchanged
    (tests/integration/test_api_startup.py)."""
    create = Operation._create_response_model
    if getattr(create, "shared", False):
        return
    made: dict[Any, Any] = {}

    def shared(self: Operation, response_param: Any) -> Any:
        try:
            return made[response_param]
        except KeyError:
            made[response_param] = model = create(self, response_param)
            return model
        except TypeError:  # an unhashable annotation: its own wrapper, as before
            return create(self, response_param)

    shared.shared = True  # type: ignore[attr-defined]
    Operation._create_response_model = shared  # type: ignore[method-assign]


_one_wrapper_per_response_schema()


# The answers each kind of operation can give besides its success (docs/api.md).
READ = {401: ErrorOut, 422: ErrorOut, 500: ErrorOut}
READ_ONE = {**READ, 404: ErrorOut, 410: ErrorOut}
WRITE = {**READ, 403: ErrorOut, 409: ErrorOut, 413: ErrorOut, 415: ErrorOut}
WRITE_ONE = {**WRITE, 404: ErrorOut, 410: ErrorOut}


# --- endpoints


@router.post("/executions", response={200: ExecutionOut, 201: ExecutionOut, **WRITE}, tags=["executions"])
def start_execution(request: HttpRequest, payload: StartIn):
    """Start an execution. With ``idempotency_key``, retries return the original (200).
    The answer is the execution as its start committed it (``pending``): it is read before
    the commit that rings the doorbell, so a quick worker can't make it ``running`` first."""
    with transaction.atomic():
        execution, created = services.execution_start(user=request.user, **payload.model_dump())
        answer = selectors.execution_payload(execution)
    return Reply(201 if created else 200, answer)


@router.get("/executions", response={200: ExecutionPage, **READ}, tags=["executions"])
def list_executions(
    request: HttpRequest,
    status: Status | None = None,
    workflow: WorkflowName | None = None,
    reason: ReasonName | None = None,
    parent: ExecutionRef | None = None,
    cursor: Cursor | None = None,
    hold: bool | None = None,
    input: InputFilter | None = None,
):
    """Newest first, 50 a page; ``reason`` filters by why it is stuck (DESIGN §4);
    ``parent`` lists the children of that execution, ``hold`` by whether a legal hold keeps
    it (issue 23); ``input`` (``KEY:VALUE``, e.g. ``month:2026-06``) by a field of its input."""
    page, following = selectors.execution_page(
        status=status, workflow=workflow, reason=reason, parent=parent, cursor=cursor, hold=hold, input=input
    )
    return {"items": [selectors.execution_payload(e) for e in selectors.prefetch_payloads(page)], "next": following}


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


@router.post("/executions/{execution_id}/pause", response={200: ExecutionOut, **WRITE_ONE}, tags=["executions"])
def pause_execution(request: HttpRequest, execution_id: ExecutionRef, payload: ReasonIn):
    """Operators: hold it where it is (pending, running, retry_pending, waiting or
    awaiting_approval; anything else: 409); ``resume`` returns it to the status it left."""
    execution = holds.execution_pause(ref=execution_id, user=request.user, reason=payload.reason)
    return selectors.execution_payload(execution)


# --- events: each type registered by the gate that owns it (executions.engine.events),
# told apart by ``type``. Built when the URLs load, after every app registered its types.


def _events_endpoint() -> tuple[Any, dict[int, Any], str]:
    """The events endpoint's body, its answers and its description, from the registry.
    Refuses to build before every app has registered its types (it would drop some)."""
    if not apps.ready:
        raise ImproperlyConfigured("executions.api was imported before the apps were ready: the URLs load it")
    types = events.registered()
    bodies = reduce(or_, (t.body for t in types))
    body = Annotated[bodies, Field(discriminator="type")] if len(types) > 1 else bodies
    answers = {202: reduce(or_, (t.answer for t in types)), **WRITE_ONE}
    for event_type in types:
        answers.update(event_type.responses)
    lines = [f"- ``{t.name}``: {t.summary}." for t in types]
    return body, answers, "Deliver an event, idempotent by ``event_id``:\n\n" + "\n".join(lines)


EventIn, EVENT_ANSWERS, EVENTS_DESCRIPTION = _events_endpoint()


@router.post(
    "/executions/{execution_id}/events", response=EVENT_ANSWERS, description=EVENTS_DESCRIPTION, tags=["executions"]
)
def post_event(request: HttpRequest, execution_id: ExecutionRef, payload: EventIn = Body(...)):  # noqa: B008
    return Reply(202, events.get(payload.type).handle(ref=execution_id, user=request.user, body=payload))


@router.post("/executions/{execution_id}/resume", response={200: ExecutionOut, **WRITE_ONE}, tags=["executions"])
def resume_execution(request: HttpRequest, execution_id: ExecutionRef, payload: ReasonIn):
    execution = services.execution_resume(ref=execution_id, user=request.user, reason=payload.reason)
    return selectors.execution_payload(execution)


@router.post("/executions/{execution_id}/budget", response={200: ExecutionOut, **WRITE_ONE}, tags=["executions"])
def raise_budget(request: HttpRequest, execution_id: ExecutionRef, payload: BudgetIn):
    """Operators: add ``add_usd`` to the execution's budget, audited with the reason; a
    ``budget_exceeded`` execution then goes on with ``resume``."""
    execution = services.execution_raise_budget(
        ref=execution_id, user=request.user, add_usd=payload.add_usd, reason=payload.reason
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
    cost_usd: float | None
    finish_reason: str
    tool_calls: list[ToolCallOut]
    created_at: datetime


class ModelCallPage(Schema):
    items: list[ModelCallOut]


@router.get("/executions/{execution_id}/model-calls", response={200: ModelCallPage, **READ_ONE}, tags=["executions"])
def list_model_calls(request: HttpRequest, execution_id: ExecutionRef):
    """The model-call journal of an execution, in call order (model requested and returned)."""
    return {"items": selectors.model_calls(services.execution_for(execution_id))}


class StateOut(Schema):
    steps: dict[str, Any]  # each step's latest output, by step name
    notes: dict[str, Any]  # the progress notes (goal, facts, constraints, completed steps, next action)


@router.get("/executions/{execution_id}/state", response={200: StateOut, **READ_ONE}, tags=["executions"])
def execution_state(request: HttpRequest, execution_id: ExecutionRef):
    """Each step's latest output and the progress notes, as stored (redacted when written);
    readable by whoever may read the execution."""
    return selectors.execution_state(services.execution_for(execution_id))


HISTORY_RESPONSES = {
    200: {
        "description": "One event a line (JSON Lines), oldest first: `event_id`, `time`, `type`, `execution`, "
        "`step`, `from_status`, `to_status`, `actor`, `payload`.",
        "content": {"application/jsonl": {"schema": {"type": "string"}}},
    }
}


@router.get(
    "/executions/{execution_id}/history.jsonl",
    response={200: None, **READ_ONE},
    openapi_extra={"responses": HISTORY_RESPONSES},
    tags=["executions"],
)
def execution_history(request: HttpRequest, execution_id: ExecutionRef):
    """The execution's whole event history as a JSON Lines download (whoever may read the
    execution; 410 once archived: ``keel archive --show`` reads it back)."""
    execution = services.execution_for(execution_id)
    response = StreamingHttpResponse(selectors.execution_history(execution), content_type="application/jsonl")
    response["Content-Disposition"] = f'attachment; filename="{execution.ref}-history.jsonl"'
    return response


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


# The stored bytes of any content type, or an error as JSON.
CONTENT_RESPONSES = {
    200: {
        "description": "The version's bytes, in its content type; `X-Content-SHA256` is their verified sha256.",
        "headers": {
            "X-Content-SHA256": {"schema": {"type": "string", "pattern": "^[0-9a-f]{64}$"}},
        },
        "content": {
            "application/json": {"schema": {"description": "a JSON artifact's bytes: any JSON value"}},
            "text/markdown": {"schema": {"type": "string"}},
            "*/*": {"schema": {"type": "string", "format": "binary"}},
        },
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


# --- the catalogue (DESIGN §6, "Platform"): what can be started, and with what input


class WorkflowStepOut(Schema):
    name: str
    label: str
    kind: str


class CatalogueVersionOut(Schema):
    version: int
    input_schema: dict[str, Any]
    steps: list[WorkflowStepOut]


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
    paused: bool
    paused_reason: str | None
    paused_by: str | None
    paused_at: datetime | None


class WorkflowPage(Schema):
    items: list[WorkflowOut]


@router.get("/workflows", response={200: WorkflowPage, **READ}, tags=["workflows"])
def list_workflows(request: HttpRequest):
    """Every registered workflow (shipped and from ``KEEL_WORKFLOW_MODULES``), sorted by name;
    ``input_schema`` is the JSON Schema of the latest version's input."""
    return {"items": catalogue.items()}


@router.get("/workflows/{name}", response={200: WorkflowOut, **READ_ONE}, tags=["workflows"])
def get_workflow(request: HttpRequest, name: RequiredWorkflowName):
    return catalogue.item(name)


@router.post("/workflows/{name}/pause", response={200: WorkflowOut, **WRITE_ONE}, tags=["workflows"])
def pause_workflow(request: HttpRequest, name: RequiredWorkflowName, payload: ReasonIn):
    """Operators: the workflow's kill switch (executions.holds). New executions are accepted
    and stay pending; running ones pause at their next step boundary. → the catalogue item."""
    holds.workflow_pause(name=name, user=request.user, reason=payload.reason)
    return catalogue.item(name)


@router.post("/workflows/{name}/resume", response={200: WorkflowOut, **WRITE_ONE}, tags=["workflows"])
def resume_workflow(request: HttpRequest, name: RequiredWorkflowName, payload: ReasonIn):
    """Operators: lift the kill switch; what it paused goes on, the pending ones start."""
    holds.workflow_resume(name=name, user=request.user, reason=payload.reason)
    return catalogue.item(name)
