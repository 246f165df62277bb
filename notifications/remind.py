"""An operator's "Remind the managers" (issue 39, item 11): the managers who may decide
a pending request get an e-mail saying who asks and why, with the decide link.

Through the same mechanism as every notification: each message a beside action of the
ledger (``planning.mail_locked``), keyed by the request, the manager and the reminder's
number, rung once the transaction commits. At most one reminder per request in
``RUNTIME_APPROVAL_REMIND_AGAIN_SECONDS``: a second press within it records and sends
nothing and answers the first (``fresh`` false). Each reminder sent is an
``operator.remind`` event with the actor and the reason, in the same transaction, so
the operator audit lists it. Locks: the execution, then its request (the sweeper's order).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.utils import timezone

from approvals import selectors as approval_selectors
from approvals.models import ApprovalRequest
from executions import runtime
from executions.errors import Conflict, Forbidden, InvalidInput
from executions.models import Execution, ExecutionEvent, execution_for

from . import planning, recipients
from .models import Occasion

EVENT = "operator.remind"
OCCASION = "remind:"


@dataclass(frozen=True, kw_only=True)
class Reminded:
    request: ApprovalRequest
    fresh: bool  # sent now; false: this window's reminder had gone already, nothing sent
    at: dt.datetime
    by: str
    to: list[str]
    again_at: dt.datetime


def approval_remind(*, ref: str, user: AbstractBaseUser, reason: str) -> Reminded:
    """Operators: remind the managers who may decide ``ref``'s pending request. Forbidden
    for anyone else; InvalidInput naming ``reason`` without one; Conflict when nothing
    waits for a decision, e-mails are off, or no manager can be reached."""
    if not user.has_perm(recipients.OPERATE):
        raise Forbidden("only operators may remind the managers")
    reason = (reason or "").strip()
    if not reason:
        raise InvalidInput("reason", "say why you remind them: the managers read it in the e-mail")
    if not settings.KEEL_NOTIFICATIONS:
        raise Conflict("e-mail notifications are off here (KEEL_NOTIFICATIONS): tell the managers another way")
    window = timedelta(seconds=settings.RUNTIME_APPROVAL_REMIND_AGAIN_SECONDS)
    with transaction.atomic():
        execution = Execution.objects.select_for_update(no_key=True).get(pk=execution_for(ref).pk)
        runtime.require(user, "operate", execution.workflow)
        request = (
            ApprovalRequest.objects.select_for_update(of=("self",))
            .select_related("execution", "artifact_version__artifact")
            .filter(execution=execution, status=ApprovalRequest.State.PENDING)
            .order_by("-id")
            .first()
        )
        if request is None or not approval_selectors.is_open(request):
            raise Conflict(f"{execution.ref} is not waiting for a decision: nobody to remind", status=execution.status)
        earlier = Occasion.objects.filter(request=request, kind__startswith=OCCASION)
        last = earlier.order_by("-id").first()
        now = timezone.now()
        if last is not None and last.created_at > now - window:
            sent = (
                ExecutionEvent.objects.filter(execution=execution, type=EVENT, payload__approval_id=request.pk)
                .order_by("-id")
                .first()
            )
            payload = sent.payload if sent is not None else {}
            return Reminded(
                request=request,
                fresh=False,
                at=last.created_at,
                by=sent.actor_label.removeprefix("user:") if sent is not None else "",
                to=payload.get("to", []),
                again_at=last.created_at + window,
            )
        deciders = recipients.deciders(request)
        if not deciders:
            raise Conflict(
                "no manager who may decide it has an e-mail address with e-mails on: tell them another way",
                status=execution.status,
            )
        number = earlier.count() + 1
        occasion = Occasion.objects.create(request=request, kind=f"{OCCASION}{number}")
        planning.mail_locked(
            request,
            kind="remind",
            audience=[(u, True) for u in deciders],
            occasion=f"remind{number}",
            asked_by=user.get_username(),
            note=reason,
        )
        to = [u.get_username() for u in deciders]
        runtime.record(execution, EVENT, actor=user, payload={"reason": reason, "approval_id": request.pk, "to": to})
    return Reminded(
        request=request,
        fresh=True,
        at=occasion.created_at,
        by=user.get_username(),
        to=to,
        again_at=occasion.created_at + window,
    )
