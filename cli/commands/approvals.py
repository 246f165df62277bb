"""``keel decide``: a person's decision on the pending approval, as the decision event
(``POST /api/executions/{id}/events``, ``type: "approval.decision"``) delivers it — the
same body (``approvals.events.DecisionIn``), the one way to decide
(``approvals.services.approval_decide``) and the same JSON (``DecisionOut``).

A decision binds to the exact version the approver saw: ``--version`` and ``--sha256`` are
required (``keel show ID`` prints the pending approval's). A new event id unless
``--event-id`` is given: give one to make a retry of the command harmless (the same event
id again answers the first decision and changes nothing).

A refused decision is evidence: ``approval_decide`` writes it to the approval audit outside
the transaction it rolls back. So this command is not run inside one transaction with its
``via.cli`` marks (that would roll the refusal's audit entry back with it): the decision
commits as the API's does, then its marks (``cli.trace.record``) in a transaction of their own.
"""

from __future__ import annotations

import uuid

from django.db import transaction
from django.db.models import Max

from approvals.events import DecisionIn, DecisionOut
from approvals.services import approval_decide
from executions import inputs
from executions.models import ExecutionEvent

from .. import trace
from ..registry import Result, api_json, command


def _arguments(parser) -> None:
    parser.add_argument("id", help="the execution awaiting the approval, e.g. RUN_0042")
    parser.add_argument("--approval", required=True, type=int, metavar="N", help="the approval's id (keel show)")
    parser.add_argument("--decision", required=True, help="approve, reject or request_changes")
    parser.add_argument("--version", required=True, type=int, metavar="V", help="the artifact version you decided on")
    parser.add_argument("--sha256", required=True, metavar="HASH", help="that version's sha256 (keel show)")
    parser.add_argument("--comment", default="", help="why; required with request_changes (what must change)")
    parser.add_argument("--event-id", help="makes a retry of this command harmless (default: a new one)")


@command(
    "decide",
    help="Decide the pending approval, bound to the version and sha256 you saw (approvers)",
    arguments=_arguments,
    acts=True,
    per_item=True,  # the decision commits on its own (its refusals are audited): its marks after it
)
def decide(args, user) -> Result:
    body = inputs.parse(
        DecisionIn,
        {
            "approval_id": args["approval"],
            "decision": args["decision"],
            "artifact_version": args["version"],
            "content_sha256": args["sha256"],
            "comment": args["comment"],
            "event_id": args["event_id"] or uuid.uuid4().hex,
        },
    )
    before = ExecutionEvent.objects.aggregate(last=Max("id"))["last"] or 0
    result = approval_decide(
        user=user,
        execution_ref=args["id"],
        approval_id=body.approval_id,
        decision=body.decision,
        artifact_version=body.artifact_version,
        content_sha256=body.content_sha256,
        event_id=body.event_id,
        comment=body.comment,
    )
    with transaction.atomic():
        trace.record(user=user, command="decide", after=before)
    answer = api_json(DecisionOut, result.as_dict())
    said = " (this event id was already delivered: its first answer)" if result.replayed else ""
    return Result(
        answer,
        [
            f"{args['id'].upper()}: approval #{answer['approval_id']} {answer['decision']} by {answer['decided_by']} "
            f"(event {answer['event_id']}){said}; now {answer['execution_status']}"
        ],
    )
