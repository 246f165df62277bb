"""Approvals' part of the Task API (assembled in config.api): the redraft request, and
the operator audit (read by operators and auditors). A decision arrives at the
runtime's events endpoint as the approval gate's event type (``approvals.events``)."""

from __future__ import annotations

from datetime import date, datetime
from typing import Annotated, Literal

from django.http import HttpRequest
from ninja import Query, Router, Schema
from pydantic import Field

from accounts.roles import reads_operator_audit
from executions import selectors
from executions.api import READ, WRITE_ONE, ErrorOut, ExecutionOut
from executions.errors import Forbidden
from executions.inputs import Cursor, DbInt, ExecutionRef, RedraftIn, Text
from executions.models import pk_from_ref, ref_for
from triage import operator_audit

from .services import execution_redraft

router = Router()


@router.post("/executions/{execution_id}/redraft", response={200: ExecutionOut, **WRITE_ONE}, tags=["approvals"])
def redraft_execution(request: HttpRequest, execution_id: ExecutionRef, payload: RedraftIn):
    """The starter (or an operator) asks for a new draft while approval is pending: the
    pending request is superseded and the new version needs its own decision."""
    execution = execution_redraft(ref=execution_id, user=request.user, instruction=payload.instruction)
    return selectors.execution_payload(execution)


# --- the operator audit (triage.operator_audit): operators and auditors read it.


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
