"""Approvals' part of the Task API (assembled in config.api): the events endpoint, where
a person's decision arrives (and a signal, which goes on to the runtime's wait gate),
the redraft request, and the operator audit (read by operators and auditors, the
roles approvals defines)."""

from __future__ import annotations

from datetime import date, datetime
from typing import Annotated, Literal

from django.http import HttpRequest
from ninja import Body, Query, Router, Schema
from ninja import Status as Reply  # an answer's status and body
from pydantic import Field

from executions import operator_audit, selectors, waits
from executions.api import READ, WRITE_ONE, ErrorOut, ExecutionOut
from executions.errors import Forbidden
from executions.inputs import Cursor, DbInt, DecisionEventIn, ExecutionRef, RedraftIn, SignalEventIn, Text
from executions.models import pk_from_ref, ref_for

from .roles import reads_operator_audit
from .services import approval_decide, execution_redraft

router = Router()

EventIn = Annotated[DecisionEventIn | SignalEventIn, Field(discriminator="type")]


class DecisionOut(Schema):
    approval_id: int
    decision: str
    event_id: str
    decided_by: str
    execution_status: str


class SignalOut(Schema):
    event_id: str
    execution_status: str


class RateLimitedOut(Schema):
    detail: str
    retry_after: int


@router.post(
    "/executions/{execution_id}/events",
    response={202: DecisionOut | SignalOut, **WRITE_ONE, 429: RateLimitedOut},
    tags=["approvals"],
)
def post_event(request: HttpRequest, execution_id: ExecutionRef, payload: EventIn = Body(...)):  # noqa: B008
    """Deliver an event, idempotent by ``event_id``:

    - ``approval.decision``: a person's decision on the pending approval. Refused
      attempts are audited; past a burst of them, further refused attempts are
      answered 429 and summarised in one audit entry.
    - ``signal``: the signal an execution waits for (operators, and the user who
      started it); a name it isn't waiting for is a 409."""
    if isinstance(payload, SignalEventIn):
        return Reply(
            202,
            waits.signal_deliver(
                ref=execution_id,
                user=request.user,
                name=payload.name,
                payload=payload.payload,
                event_id=payload.event_id,
            ),
        )
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
    return Reply(202, result.as_dict())


@router.post("/executions/{execution_id}/redraft", response={200: ExecutionOut, **WRITE_ONE}, tags=["approvals"])
def redraft_execution(request: HttpRequest, execution_id: ExecutionRef, payload: RedraftIn):
    """The starter (or an operator) asks for a new draft while approval is pending: the
    pending request is superseded and the new version needs its own decision."""
    execution = execution_redraft(ref=execution_id, user=request.user, instruction=payload.instruction)
    return selectors.execution_payload(execution)


# --- the operator audit (executions.operator_audit): operators and auditors read it.


class ActOut(Schema):
    id: int
    at: datetime
    execution: str
    actor: str
    action: str
    reason: str
    before: str
    after: str
    subject: str
    batch: str | None


class ActPage(Schema):
    items: list[ActOut]
    next: int | None


@router.get("/operator-audit", response={200: ActPage, **READ, 403: ErrorOut}, tags=["audit"])
def operator_audit_list(
    request: HttpRequest,
    actor: Text(min_length=1, max_length=150) | None = None,
    action: Literal[operator_audit.ACTIONS] | None = None,  # type: ignore[valid-type]
    execution: Cursor | None = None,
    date_from: date | None = Query(None, alias="from"),  # noqa: B008
    date_to: date | None = Query(None, alias="to"),  # noqa: B008
    batch: Annotated[str, Field(pattern=operator_audit.BATCH.pattern)] | None = None,
    cursor: DbInt | None = None,
):
    """Every act a person took on executions (cancel, resume, retry now, resolve, signal,
    bulk items), newest first, 50 a page; pass ``next`` as ``cursor`` for the next."""
    if not reads_operator_audit(request.user):
        raise Forbidden("operators and auditors read the operator audit")
    filters = operator_audit.Filters(
        actor=actor or "",
        action=action or "",
        execution=ref_for(pk_from_ref(execution)) if execution else "",
        date_from=date_from,
        date_to=date_to,
        batch=batch or "",
    )
    rows = operator_audit.acts(filters)
    if cursor:
        rows = rows.filter(id__lt=cursor)
    page = list(rows[: operator_audit.PAGE_SIZE + 1])
    more = len(page) > operator_audit.PAGE_SIZE
    page = page[: operator_audit.PAGE_SIZE]
    return {"items": [operator_audit.act_of(e).as_dict() for e in page], "next": page[-1].pk if more else None}
