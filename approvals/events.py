"""The approval gate's event type: a person's decision, delivered to
``POST /api/executions/{id}/events`` with ``type: "approval.decision"``.

Registered with the runtime's event types (``executions.engine.events``) when the app
loads, as the gate registers itself; the runtime's events endpoint hands the body to
``approval_decide``, the one way to decide. Refused attempts are audited; past a
burst of them, further refused attempts are answered 429 and summarised in one audit
entry (``throttle``). The decision form on the execution page reads the same body.
"""

from __future__ import annotations

from typing import Literal

from django.contrib.auth.models import AbstractBaseUser
from ninja import Schema

from executions import runtime
from executions.inputs import Body, Comment, DbInt, EventId, Sha256

from .services import approval_decide


class DecisionIn(Body):
    approval_id: DbInt
    decision: Literal["approve", "reject", "request_changes"]
    artifact_version: DbInt
    content_sha256: Sha256
    comment: Comment = ""
    event_id: EventId


class DecisionEventIn(DecisionIn):
    type: Literal["approval.decision"]


class DecisionOut(Schema):
    approval_id: int
    decision: str
    event_id: str
    decided_by: str
    execution_status: str


class RateLimitedOut(Schema):
    detail: str
    retry_after: int


def _deliver(*, ref: str, user: AbstractBaseUser, body: DecisionEventIn) -> dict:
    return approval_decide(
        user=user,
        execution_ref=ref,
        approval_id=body.approval_id,
        decision=body.decision,
        artifact_version=body.artifact_version,
        content_sha256=body.content_sha256,
        event_id=body.event_id,
        comment=body.comment,
    ).as_dict()


runtime.register_event_type(
    runtime.EventType(
        name="approval.decision",
        body=DecisionEventIn,
        answer=DecisionOut,
        handle=_deliver,
        responses={429: RateLimitedOut},
        summary="a person's decision on the pending approval. Refused attempts are audited; past a burst of "
        "them, further refused attempts are answered 429 and summarised in one audit entry",
    )
)
