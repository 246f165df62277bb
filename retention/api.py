"""Legal holds in the Task API (docs/design.md §6): ``POST`` and ``DELETE
/api/executions/{id}/hold`` (auditors) → 200 with the execution. Thin: parse, call
``retention.holds``, answer."""

from __future__ import annotations

from django.http import HttpRequest
from ninja import Router

from apikit.answers import WRITE_ONE
from executions import selectors
from executions.answers import ExecutionOut
from executions.inputs import ExecutionRef, ReasonIn

from . import holds

router = Router()


@router.post("/executions/{execution_id}/hold", response={200: ExecutionOut, **WRITE_ONE}, tags=["executions"])
def place_hold(request: HttpRequest, execution_id: ExecutionRef, payload: ReasonIn):
    """A legal hold: the execution is never archived while it holds (``reason`` required)."""
    return selectors.execution_payload(holds.hold_place(ref=execution_id, user=request.user, reason=payload.reason))


@router.delete("/executions/{execution_id}/hold", response={200: ExecutionOut, **WRITE_ONE}, tags=["executions"])
def release_hold(request: HttpRequest, execution_id: ExecutionRef):
    return selectors.execution_payload(holds.hold_release(ref=execution_id, user=request.user))
