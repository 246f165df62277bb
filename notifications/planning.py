"""Planning: who is told what, recorded in the ledger once (issue 22, items 1–3).

Beat's ``notifications.sweep`` calls ``plan`` then ``due``. Each occasion is planned in
one transaction with its deliveries and an ``Occasion`` row (unique per request and
kind), so a sweep that runs twice, or dies half-way, plans each exactly once:

- opened: a pending request without its ``opened`` occasion → an e-mail to each
  decider (``recipients.deciders``) and the ``approval.requested`` webhook;
- reminder: pending ``RUNTIME_APPROVAL_REMIND_SECONDS`` after it opened → once;
- approval_overdue: its execution still awaits it past the gate's SLA → the deciders
  (the decide link) and the operators who can't decide it (a message leading to what
  they can do: remind the managers from the execution page, escalate, cancel);
- remind: an operator's "Remind the managers" (``remind.approval_remind``, at most one
  per ``RUNTIME_APPROVAL_REMIND_AGAIN_SECONDS``) → the deciders, with who asked and why;
- superseded: superseded after its ``opened`` went out → those who were told about it.

Webhooks for ``execution.needs_attention|failed|completed`` come from the event log
(the transitions), read from a cursor with a margin for transactions that committed
late; the key names the event, so reading an event twice records it once.
"""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

from celery import current_app
from django.conf import settings
from django.db import transaction
from django.db.models import CharField, Exists, OuterRef, Q, Value
from django.db.models.functions import Cast, Concat
from django.utils import timezone

from approvals.models import ApprovalRequest
from artifacts.models import ArtifactVersion
from executions import runtime
from executions.models import Action, ExecutionEvent, Question, Status

from . import channels, mail, recipients, webhooks
from .models import Cursor, Delivery, Occasion, Preference

log = logging.getLogger(__name__)
SEND = "notifications.send"
BATCH = 100
# Transactions that commit this long after their event's timestamp are still read.
MARGIN = timedelta(seconds=60)
ACTOR = "notifications"
TERMINAL_EVENTS = {
    Status.NEEDS_ATTENTION: "execution.needs_attention",
    Status.FAILED: "execution.failed",
    Status.COMPLETED: "execution.completed",
}


def notify_key(request: ApprovalRequest, username: str, kind: str) -> str:
    """``{request}:notify:{user}:{kind}``: the business identity of one message."""
    return f"{request.gate_ref}:notify:{username}:{kind}"


def plan() -> int:
    """Plan every occasion that came; returns how many deliveries were recorded."""
    if not settings.KEEL_NOTIFICATIONS and not settings.KEEL_WEBHOOK_URL:
        return 0
    made = 0
    now = timezone.now()
    pending = ApprovalRequest.objects.filter(status=ApprovalRequest.State.PENDING)
    made += _each(_without(pending, "opened"), "opened")
    remind_by = now - timedelta(seconds=settings.RUNTIME_APPROVAL_REMIND_SECONDS)
    made += _each(_without(pending.filter(created_at__lte=remind_by), "reminder"), "reminder")
    overdue = _without(
        pending.filter(execution__status=Status.AWAITING_APPROVAL, execution__gate_sla_at__lt=now), "approval_overdue"
    )
    made += _each(overdue, "approval_overdue")
    told = Occasion.objects.filter(request=OuterRef("pk"), kind="opened")
    # Once the version that replaces it exists (a redraft supersedes before it drafts).
    newer = ArtifactVersion.objects.filter(
        artifact_id=OuterRef("artifact_version__artifact_id"), number__gt=OuterRef("version")
    )
    replaced = _without(
        ApprovalRequest.objects.filter(
            status=ApprovalRequest.State.SUPERSEDED, closed_at__gte=now - timedelta(days=1)
        ).filter(Exists(told), Exists(newer)),
        "superseded",
    )
    made += _each(replaced, "superseded")
    made += _questions()
    if settings.KEEL_WEBHOOK_URL:
        made += _transitions()
    return made


def _questions() -> int:
    """A question a tool's provider asked mid-call (``pending_input``), told once: an e-mail
    to the requester (who may answer it) and the ``input.requested`` webhook; each
    delivery's key names the question, so a second sweep records nothing."""
    made = 0

    # Only questions with something left to tell now: their webhook (when webhooks are on)
    # or their starter's e-mail (when e-mail is on and the starter is active, has an
    # address and didn't turn e-mails off). So an old question no one answers never keeps
    # a newer one from being told, and a starter who could not read the question when its
    # webhook went is e-mailed once they may. Newest first: the one left out by a full
    # batch of questions whose starters may not read them is an older one, told later.
    def recorded(channel: str):
        prefix = Concat(Value("question:"), Cast(OuterRef("pk"), CharField()), Value(f":{channel}:"))
        return Exists(Action.objects.filter(key__startswith=prefix))

    nothing = Q(pk__in=[])
    starter = "execution__created_by"
    mail_left = (
        Q(**{f"{starter}__is_active": True})
        & ~Q(**{f"{starter}__email": ""})
        & ~Exists(Preference.objects.filter(user=OuterRef(starter), email=False))
        & ~recorded("notify")
        if settings.KEEL_NOTIFICATIONS
        else nothing
    )
    hook_left = ~recorded("webhook") if settings.KEEL_WEBHOOK_URL else nothing
    asked = list(
        Question.objects.filter(status=Question.State.OPEN)
        .filter(mail_left | hook_left)
        .select_related("execution__created_by")
        .order_by("-id")[:BATCH]
    )
    mails = {q.pk: f"question:{q.pk}:notify:{q.execution.created_by.get_username()}:input.requested" for q in asked}
    hooks = {q.pk: f"question:{q.pk}:webhook:input.requested" for q in asked}
    known = set(Action.objects.filter(key__in=[*mails.values(), *hooks.values()]).values_list("key", flat=True))
    for question in asked:
        execution, requester = question.execution, question.execution.created_by
        with transaction.atomic():
            key = mails[question.pk]
            if (
                settings.KEEL_NOTIFICATIONS
                and key not in known
                and recipients.wants_email(requester) is None
                and recipients.reads(requester, execution.workflow)
            ):
                args = mail.compose_question(question, to=requester.email, key=key)
                made += record_delivery(execution, key, mail.EMAIL, args, kind="input.requested", recipient=requester)
            key = hooks[question.pk]
            if settings.KEEL_WEBHOOK_URL and key not in known:
                args = webhooks.describe(execution, event="input.requested", status=Status.WAITING)
                args["body"]["input"] = {
                    "id": question.input_id,
                    "message": question.message,
                    "schema": question.schema,
                }
                made += record_delivery(execution, key, webhooks.WEBHOOK, args, kind="input.requested")
    return made


def _without(requests, kind: str):
    planned = Occasion.objects.filter(request=OuterRef("pk"), kind=kind)
    return requests.exclude(Exists(planned)).select_related("execution", "artifact_version__artifact")


def _each(requests, kind: str) -> int:
    made = 0
    for request in requests.order_by("id")[:BATCH]:
        made += plan_occasion(request.pk, kind)
    return made


def plan_occasion(request_id: int, kind: str) -> int:
    """One occasion, with its deliveries, in one transaction (or nothing if it is planned)."""
    with transaction.atomic():
        request = (
            ApprovalRequest.objects.select_for_update(of=("self",))
            .select_related("execution", "artifact_version__artifact")
            .get(pk=request_id)
        )
        _, created = Occasion.objects.get_or_create(request=request, kind=kind)
        if not created:
            return 0
        if not settings.KEEL_NOTIFICATIONS and not (kind == "opened" and settings.KEEL_WEBHOOK_URL):
            return 0
        made = 0
        if settings.KEEL_NOTIFICATIONS:
            made += mail_locked(request, kind=kind, audience=_audience(request, kind))
        if kind == "opened" and settings.KEEL_WEBHOOK_URL:
            key = f"{request.gate_ref}:webhook:approval.requested"
            args = webhooks.describe(
                request.execution, event="approval.requested", status=Status.AWAITING_APPROVAL, approval=request
            )
            made += record_delivery(
                request.execution, key, webhooks.WEBHOOK, args, kind="approval.requested", request=request
            )
        return made


def mail_locked(
    request: ApprovalRequest, *, kind: str, audience: list[tuple[Any, bool]], occasion: str = "", **facts: str
) -> int:
    """Inside a transaction, ``request`` locked: one e-mail of ``kind`` to each of
    ``audience`` (user, may decide it), each a beside action keyed by the user and
    ``occasion`` (default: ``kind``); ``facts`` as ``mail.compose``'s. Returns how many
    were recorded (an action already recorded under its key is not recorded again)."""
    made = 0
    for user, may_decide in audience:
        key = notify_key(request, user.get_username(), occasion or kind)
        args = mail.compose(request, kind=kind, to=user.email, key=key, may_decide=may_decide, **facts)
        made += record_delivery(request.execution, key, mail.EMAIL, args, kind=kind, request=request, recipient=user)
    return made


def _audience(request: ApprovalRequest, kind: str) -> list[tuple[Any, bool]]:
    """Who is told of ``kind``, each with whether they may decide ``request``."""
    if kind in ("opened", "reminder"):
        return [(u, True) for u in recipients.deciders(request)]
    if kind == "approval_overdue":
        deciders = recipients.deciders(request)
        told = {u.pk for u in deciders}
        return [(u, True) for u in deciders] + [
            (u, False) for u in recipients.operators(request.execution.workflow) if u.pk not in told
        ]
    # superseded: those an ``opened`` message was recorded for
    told = Delivery.objects.filter(request=request, kind="opened", channel=mail.EMAIL.name)
    return [
        (d.recipient, True)
        for d in told.select_related("recipient").order_by("id")
        if recipients.wants_email(d.recipient) is None and recipients.reads(d.recipient, request.execution.workflow)
    ]


def record_delivery(execution, key, channel: channels.Channel, args, *, kind, request=None, recipient=None) -> int:
    """One delivery through ``channel``: its beside action in the ledger (once per key) and
    its ``Delivery``, handed to the sender after commit."""
    action, created = runtime.record_beside(
        execution, key=key, action_type=channel.action_type, args=args, honors_key=channel.honors_key, actor_label=ACTOR
    )
    if not created:
        return 0
    # Handed out now (the doorbell below); due again past the claim window only if that ring was lost.
    due = timezone.now() + timedelta(seconds=settings.RUNTIME_NOTIFY_CLAIM_SECONDS)
    Delivery.objects.create(
        action=action, channel=channel.name, kind=kind, request=request, recipient=recipient, due_at=due
    )
    transaction.on_commit(lambda: _ring(key))
    return 1


def _ring(key: str) -> None:
    """The doorbell for one delivery (by the task's name); if the broker is down the
    sweep hands it out once it is due."""
    try:
        current_app.send_task(SEND, args=(key,))
    except Exception:
        log.exception("could not enqueue %s; the notifications sweep will hand it out", key)


def _transitions() -> int:
    """Webhooks for the transitions read since the cursor (minus the margin)."""
    now = timezone.now()
    with transaction.atomic():
        cursor, _ = Cursor.objects.select_for_update().get_or_create(name="webhooks", defaults={"at": now})
        since = cursor.at - MARGIN
        events = list(
            ExecutionEvent.objects.filter(type="transition", created_at__gt=since, to_status__in=list(TERMINAL_EVENTS))
            .select_related("execution")
            .order_by("created_at")[: BATCH * 5]
        )
        keys = {e.pk: f"{e.execution.ref}:webhook:{TERMINAL_EVENTS[e.to_status]}:{e.pk}" for e in events}
        known = set(Action.objects.filter(key__in=keys.values()).values_list("key", flat=True))
        made = 0
        for event in events:
            key = keys[event.pk]
            if key in known:
                continue
            args = webhooks.describe(event.execution, event=TERMINAL_EVENTS[event.to_status], status=event.to_status)
            made += record_delivery(event.execution, key, webhooks.WEBHOOK, args, kind=TERMINAL_EVENTS[event.to_status])
        cursor.at = events[-1].created_at if len(events) == BATCH * 5 else now
        cursor.save(update_fields=["at"])
    return made
