"""Approvals' part of the Task API (assembled in config.api): the events endpoint, where
a person's decision arrives (and a signal, which goes on to the runtime's wait gate),
and the redraft request."""

from __future__ import annotations

from typing import Annotated

from django.http import HttpRequest
from ninja import Body, Router, Schema
from pydantic import Field

from executions import selectors, waits
from executions.api import WRITE_ONE, ExecutionOut
from executions.inputs import DecisionEventIn, ExecutionRef, RedraftIn, SignalEventIn

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
        return 202, waits.signal_deliver(
            ref=execution_id, user=request.user, name=payload.name, payload=payload.payload, event_id=payload.event_id
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
    return 202, result.as_dict()


@router.post("/executions/{execution_id}/redraft", response={200: ExecutionOut, **WRITE_ONE}, tags=["approvals"])
def redraft_execution(request: HttpRequest, execution_id: ExecutionRef, payload: RedraftIn):
    """The starter (or an operator) asks for a new draft while approval is pending: the
    pending request is superseded and the new version needs its own decision."""
    execution = execution_redraft(ref=execution_id, user=request.user, instruction=payload.instruction)
    return selectors.execution_payload(execution)
