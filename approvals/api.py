"""Approvals' part of the Task API (assembled in config.api): the redraft request. A
decision arrives at the runtime's events endpoint as the approval gate's event type
(``approvals.events``)."""

from __future__ import annotations

from django.http import HttpRequest
from ninja import Router

from apikit.answers import WRITE_ONE
from executions import selectors
from executions.answers import ExecutionOut
from executions.inputs import ExecutionRef, RedraftIn

from .services import execution_redraft

router = Router()


@router.post("/executions/{execution_id}/redraft", response={200: ExecutionOut, **WRITE_ONE}, tags=["approvals"])
def redraft_execution(request: HttpRequest, execution_id: ExecutionRef, payload: RedraftIn):
    """The starter (or an operator) asks for a new draft while approval is pending: the
    pending request is superseded and the new version needs its own decision."""
    execution = execution_redraft(ref=execution_id, user=request.user, instruction=payload.instruction)
    return selectors.execution_payload(execution)
