"""Why an execution is not moving: one annotation, in SQL, so lists filter, count and
page on it (DESIGN §4, Stuck reasons).

``annotate(queryset)`` adds ``stuck_reason`` (a word of ``REASONS`` or NULL) and
``stuck_since``. Most reasons are recorded when the runtime stops the execution
(``Execution.reason_code``, written with the transition); the others are read off
the clock: a runnable execution nobody claimed (``no_worker``), a step past its
timeout while its worker still heartbeats (``step_overdue``), a gate past its SLA
(``approval_overdue``). ``describe`` turns one annotated execution into the sentence
and the suggested action the screens and the API show.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db.models import Case, CharField, DateTimeField, ExpressionWrapper, F, Q, QuerySet, Value, When
from django.db.models.functions import Now

from .models import Execution, Status
from .reasons import StuckReason

R = StuckReason
# Every reason, in the vocabulary's order (the API's filter, the counts).
REASONS = tuple(StuckReason.values)

# What an operator should do about each reason (DESIGN §6: the `action` of `stuck`).
ACTION = {
    R.RETRYING: "wait",
    R.RATE_LIMITED: "wait",
    R.NO_WORKER: "check_workers",
    R.STEP_OVERDUE: "check_workers",
    R.APPROVAL_OVERDUE: "escalate",
    R.WAITING_OVERDUE: "resume",
    R.UNKNOWN_OUTCOME: "resolve",
    R.PERMISSION_DENIED: "escalate",
    R.RETRIES_EXHAUSTED: "resume",
    R.STEP_ERROR: "escalate",
    R.APPROVAL_LAPSED: "resume",
    R.MODEL_DRIFT: "escalate",
    R.BUDGET_EXCEEDED: "escalate",
    R.DEADLINE_PASSED: "cancel",
}

# The reasons read off the clock; every other one is recorded with the transition.
OBSERVED = (R.NO_WORKER, R.STEP_OVERDUE, R.APPROVAL_OVERDUE)

# Reasons recorded with the transition that stopped the execution, by status.
RECORDED = {
    Status.RETRY_PENDING: (R.RETRYING, R.RATE_LIMITED),
    Status.NEEDS_ATTENTION: tuple(r for r in StuckReason if r not in OBSERVED),
    Status.FAILED: (R.RETRIES_EXHAUSTED,),
}


def _ago(seconds: float) -> ExpressionWrapper:
    return ExpressionWrapper(Now() - Value(timedelta(seconds=seconds)), output_field=DateTimeField())


def _unclaimed() -> Q:
    """Runnable, nobody holds it, and for longer than RUNTIME_STUCK_SECONDS."""
    since = _ago(settings.RUNTIME_STUCK_SECONDS)
    free = Q(lease_expires_at__isnull=True) | Q(lease_expires_at__lt=since)
    pending = Q(status=Status.PENDING, status_changed_at__lt=since)
    running = Q(status=Status.RUNNING) & free & Q(status_changed_at__lt=since)
    due = Q(status__in=[Status.RETRY_PENDING, Status.WAITING], due_at__lt=since)
    return pending | running | due


def annotate(rows: QuerySet[Execution]) -> QuerySet[Execution]:
    """``rows`` with ``stuck_reason`` and ``stuck_since`` (NULL when it is moving, or done)."""
    live_lease = Q(lease_expires_at__gt=Now())
    recorded = Q()
    for status, codes in RECORDED.items():
        recorded |= Q(status=status, reason_code__in=codes)
    reason = Case(
        When(_unclaimed(), then=Value(R.NO_WORKER)),
        When(recorded, then=F("reason_code")),
        When(Q(status=Status.RUNNING, step_deadline__lt=Now()) & live_lease, then=Value(R.STEP_OVERDUE)),
        When(Q(status=Status.AWAITING_APPROVAL, gate_sla_at__lt=Now()), then=Value(R.APPROVAL_OVERDUE)),
        When(Q(status=Status.WAITING, gate_sla_at__lt=Now()), then=Value(R.WAITING_OVERDUE)),
        default=Value(None),
        output_field=CharField(),
    )
    since = Case(
        When(Q(status__in=[Status.RETRY_PENDING, Status.WAITING]) & _unclaimed(), then=F("due_at")),
        When(Q(status=Status.RUNNING, step_deadline__lt=Now()) & live_lease, then=F("step_deadline")),
        When(Q(status__in=[Status.AWAITING_APPROVAL, Status.WAITING], gate_sla_at__lt=Now()), then=F("gate_sla_at")),
        default=F("status_changed_at"),
        output_field=DateTimeField(),
    )
    return rows.annotate(stuck_reason=reason, stuck_since=since)


@dataclass(frozen=True)
class Stuck:
    reason: str
    since: datetime | None
    detail: str
    action: str

    def as_dict(self) -> dict[str, Any]:
        return {"reason": self.reason, "since": self.since, "detail": self.detail, "action": self.action}


def describe(execution: Execution, *, max_attempts: int | None = None) -> Stuck | None:
    """The reason of an execution annotated by ``annotate``, with a sentence and an action."""
    reason = getattr(execution, "stuck_reason", None)
    if not reason:
        return None
    return Stuck(
        reason=reason,
        since=execution.stuck_since,
        detail=_detail(execution, reason, max_attempts),
        action=ACTION.get(reason, "escalate"),
    )


def _at(moment: datetime | None) -> str:
    return f"{moment:%Y-%m-%d %H:%M:%S} UTC" if moment else "—"


def _detail(e: Execution, reason: str, max_attempts: int | None) -> str:
    of = f" of {max_attempts}" if max_attempts else ""
    why = e.status_reason
    if reason in (R.RETRYING, R.RATE_LIMITED):
        return f"attempt {e.failed_attempts}{of}: {why}; next try {_at(e.due_at)}"
    if reason == R.NO_WORKER:
        if e.status in (Status.RETRY_PENDING, Status.WAITING):
            return f"due since {_at(e.due_at)} and no worker has claimed it: are workers and beat running?"
        return f"runnable since {_at(e.status_changed_at)} and no worker has claimed it: are workers running?"
    if reason == R.STEP_OVERDUE:
        return (
            f"{e.current_step} has run past its timeout ({_at(e.step_deadline)}) while {e.lease_owner} "
            "still heartbeats: the step may hang"
        )
    if reason == R.APPROVAL_OVERDUE:
        return f"no decision since {_at(e.status_changed_at)}; its SLA passed at {_at(e.gate_sla_at)}"
    if reason == R.WAITING_OVERDUE and e.status == Status.WAITING:
        return f"waiting since {_at(e.status_changed_at)}; its SLA passed at {_at(e.gate_sla_at)}"
    return why or reason.replace("_", " ")
