"""The runtime's part of the Task API (django-ninja): executions, actions, artifact
content. Thin: parse, call one service or selector, answer. ``config.api`` assembles
it with approvals' part and maps errors (401, 403, 409, 422 naming the field).
"""

from __future__ import annotations

import logging
from datetime import datetime
from functools import reduce
from operator import or_
from typing import TYPE_CHECKING, Annotated, Any

from django.apps import apps
from django.core.exceptions import ImproperlyConfigured
from django.db import transaction
from django.http import HttpRequest, HttpResponse, StreamingHttpResponse
from ninja import Body, Router, Schema
from ninja import Status as Reply  # an answer's status and body (``Status`` is the lifecycle's)
from pydantic import Field

from apikit.answers import READ, READ_ONE, WRITE, WRITE_ONE, ErrorOut
from artifacts import selectors as artifact_selectors
from artifacts.services import artifact_version_content
from artifacts.store import CorruptArtifact

from . import catalogue, pauses, selectors, services
from .answers import ActionDetailOut, ExecutionOut, ExecutionPage, ReasonName, WorkflowOut
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

log = logging.getLogger(__name__)


router = Router()


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
    """Newest first, 50 a page; ``reason`` filters by why it is stuck (docs/design.md §4);
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
    execution = pauses.execution_pause(ref=execution_id, user=request.user, reason=payload.reason)
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


_EVENT_BODY, EVENT_ANSWERS, EVENTS_DESCRIPTION = _events_endpoint()
if TYPE_CHECKING:
    EventIn = Any  # the union of the registered bodies: known only once the URLs load
else:
    EventIn = _EVENT_BODY


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


# --- the catalogue (docs/design.md §6, "Platform"): what can be started, and with what input


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
    """Operators: the workflow's kill switch (executions.pauses). New executions are accepted
    and stay pending; running ones pause at their next step boundary. → the catalogue item."""
    pauses.workflow_pause(name=name, user=request.user, reason=payload.reason)
    return catalogue.item(name)


@router.post("/workflows/{name}/resume", response={200: WorkflowOut, **WRITE_ONE}, tags=["workflows"])
def resume_workflow(request: HttpRequest, name: RequiredWorkflowName, payload: ReasonIn):
    """Operators: lift the kill switch; what it paused goes on, the pending ones start."""
    pauses.workflow_resume(name=name, user=request.user, reason=payload.reason)
    return catalogue.item(name)
