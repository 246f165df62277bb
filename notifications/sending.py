"""Sending: one delivery through the ledger, and when to try again (issue 22, item 1).

``deliver`` is what the ``notifications.send`` task runs, beside the execution's
steps and never under its lease: ``runtime.perform_beside`` commits the action
``executing`` before the call and its outcome after. Then the schedule: transient
failures (could not connect, a 4xx from SMTP, a 5xx or 429 from a webhook receiver)
are tried again with the effect retry policy's backoff (``RetryPolicy()``), the same
key every time; a refusal for good (a 4xx from a receiver, an address the mail server
refused) is ``failed`` with the answer as evidence; a lost answer is ``unknown``:
an e-mail is never sent again on its own (SMTP has no idempotency key, and a second
message is worse than a late one: an operator resolves it), a webhook goes again
with the same ``Idempotency-Key``. None of this ever touches the execution's status.
"""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from executions import runtime
from executions.authoring.retry import RetryPolicy, Verdict, decide
from executions.errors import FailureKind
from executions.models import Action
from executions.runtime import worker_identity

from . import channels
from .models import Delivery

POLICY = RetryPolicy()  # the effects' default: 5 attempts, exponential backoff with jitter, 30 minutes


def deliver(key: str) -> str:
    """Send the delivery of action ``key`` if it is due; returns the action's status."""
    delivery = Delivery.objects.select_related("action", "request", "recipient").filter(action__key=key).first()
    if delivery is None:
        return "unknown key"
    if delivery.due_at is None:  # settled (sent, refused for good, unknown, dropped): a stray message
        return delivery.action.status
    action, failure = runtime.perform_beside(
        key=key,
        call=channels.get(delivery.channel).send,
        in_flight_seconds=settings.RUNTIME_NOTIFY_CLAIM_SECONDS,
        still_wanted=lambda _action: why_not(delivery),
        actor_label=worker_identity(),
    )
    _schedule(delivery, action, failure)
    return action.status


def why_not(delivery: Delivery) -> str | None:
    """Why this delivery should no longer go (None: it should): its channel's say."""
    return channels.get(delivery.channel).still_wanted(delivery)


def _schedule(delivery: Delivery, action: Action, failure) -> None:
    due = None
    if action.status == Action.State.EXECUTING:
        due = timezone.now() + timedelta(seconds=settings.RUNTIME_NOTIFY_CLAIM_SECONDS)  # another sender has it
    elif failure is not None and (failure.kind != FailureKind.OUTCOME_UNKNOWN or action.honors_key):
        elapsed = (timezone.now() - delivery.created_at).total_seconds()
        verdict = decide(
            POLICY, kind=failure.kind, attempt=action.attempts, elapsed_seconds=elapsed, retry_after=failure.retry_after
        )
        if verdict.verdict == Verdict.RETRY:
            due = timezone.now() + timedelta(seconds=verdict.delay_seconds)
    with transaction.atomic():
        Delivery.objects.filter(pk=delivery.pk).update(due_at=due)


def due(*, limit: int = 100) -> list[str]:
    """The keys whose delivery is due, each pushed past the claim window as it is
    handed out (a sweep does not hand the same one out again while it is in flight)."""
    now = timezone.now()
    with transaction.atomic():
        rows = list(
            Delivery.objects.select_for_update(skip_locked=True)
            .filter(due_at__lte=now)
            .select_related("action")
            .order_by("due_at")[:limit]
        )
        later = now + timedelta(seconds=settings.RUNTIME_NOTIFY_CLAIM_SECONDS)
        Delivery.objects.filter(pk__in=[r.pk for r in rows]).update(due_at=later)
    return [r.action.key for r in rows]
