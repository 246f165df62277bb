"""The seeds' measures (DESIGN §4, Metrics), computed from the record: events, the
ledger, step runs and approvals. Read-only, a fixed number of queries whatever the
number of executions; each query is bounded by the window through an index on
``ExecutionEvent(type, created_at)`` (or ``StepRun.finished_at``, ``Decision.created_at``).

Definitions (docs/api.md, "Metrics", says the same for API clients):

* ``recovery_success_rate``: of the executions taken over after a lost lease
  (a ``lease.taken_over`` event in the window) that have since settled — completed,
  failed, or stopped for a person (needs_attention) — the share that completed.
  Cancelled ones (a person's choice) and those still moving are not counted.
* ``duplicate_effect_rate``: of the effects first sent in the window (an
  ``action.executing`` event that is not a re-send), the share found to have been done
  already when the runtime came back to them: a reconciliation lookup that found it
  (``reconciled``) or a provider that answered it had the key already (``replayed``).
* ``resume_latency_ms``: a decision (approve, request changes) or a signal committed →
  the next step run started, for decisions and signals in the window.
* ``stuck``: executions stuck now, by reason (as ``executions.selectors.summary``).
* ``approval_integrity``: ``matched`` — guarded effects sent in the window after the
  approved version and hash were checked; ``refused`` — effect steps the approval check
  refused in the window (a version made after the approval, or an approver who lost
  the authority).
* ``cancellation_violations``: effects sent after their execution was cancelled. Must be 0.
* ``time_in_state_seconds``: for each non-terminal status, stays that ended in the
  window (entered → the next transition).
* ``approval_latency_seconds``: request made → decided, for decisions in the window.
"""

from __future__ import annotations

from typing import Any

from django.db.models import Count, DateTimeField, Exists, F, OuterRef, Q, QuerySet, Subquery
from django.db.models.fields.json import KeyTextTransform
from django.db.models.functions import Cast, Coalesce

from approvals.models import Decision
from executions import stuck
from executions.models import ACTIVE, Execution, ExecutionEvent, Status, StepRun

from .sql import Percentile, Seconds
from .windows import Window

# Statuses a stay can end in: the terminal ones are never left.
STAYS = tuple(s.value for s in Status if s in ACTIVE)
# The ``from`` of an ``action.executing`` event when the effect is sent for the first time.
FIRST_SEND = ("", "planned", "approved")


def events(window: Window, workflow: str | None = None) -> QuerySet[ExecutionEvent]:
    rows = ExecutionEvent.objects.filter(created_at__gte=window.since, created_at__lt=window.until)
    return rows.filter(execution__workflow=workflow) if workflow else rows


def measures(window: Window, *, workflow: str | None = None) -> dict[str, Any]:
    """The measures of DESIGN §6 (``GET /api/metrics``) over ``window``."""
    return {
        "recovery_success_rate": recovery_success_rate(window, workflow),
        "duplicate_effect_rate": duplicate_effect_rate(window, workflow),
        "resume_latency_ms": _scaled(resume_latency(window, workflow), 1000, 1),
        "stuck": stuck_now(workflow),
        "approval_integrity": approval_integrity(window, workflow),
        "cancellation_violations": cancellation_violations(window, workflow),
        "time_in_state_seconds": time_in_state(window, workflow),
        "approval_latency_seconds": _scaled(approval_latency(window, workflow), 1, 3),
    }


def _rate(part: int, whole: int) -> float | None:
    return round(part / whole, 4) if whole else None


def _quantiles(expression) -> dict[str, Percentile]:
    return {"p50": Percentile(expression, 0.5), "p95": Percentile(expression, 0.95)}


def _scaled(quantiles: dict[str, float | None], factor: float, digits: int) -> dict[str, float | None]:
    return {k: (round(v * factor, digits) if v is not None else None) for k, v in quantiles.items()}


def stuck_now(workflow: str | None = None) -> dict[str, int]:
    """Executions stuck now, by reason: ``by_reason`` of ``executions.selectors.summary``,
    read from the executions that can be stuck (active, or failed after the retries ran
    out) through their indexes, not from every execution."""
    rows = Execution.objects.filter(
        Q(status__in=list(ACTIVE)) | Q(status=Status.FAILED, reason_code__in=stuck.RECORDED[Status.FAILED])
    )
    if workflow:
        rows = rows.filter(workflow=workflow)
    counted = dict.fromkeys(stuck.REASONS, 0)
    found = stuck.annotate(rows).exclude(stuck_reason=None).order_by().values("stuck_reason").annotate(n=Count("id"))
    for row in found:
        counted[row["stuck_reason"]] = row["n"]
    return counted


def recovery_success_rate(window: Window, workflow: str | None = None) -> float | None:
    taken = events(window, workflow).filter(type="lease.taken_over").values("execution_id")
    counted = Execution.objects.filter(pk__in=taken).aggregate(
        completed=Count("pk", filter=Q(status=Status.COMPLETED)),
        settled=Count("pk", filter=Q(status__in=[Status.COMPLETED, Status.FAILED, Status.NEEDS_ATTENTION])),
    )
    return _rate(counted["completed"], counted["settled"])


def _already_done() -> Exists:
    """An ``action.succeeded`` event of the same action that found the effect done already."""
    return Exists(
        ExecutionEvent.objects.filter(
            Q(payload__reconciled=True) | Q(payload__receipt__replayed=True),
            execution_id=OuterRef("execution_id"),
            type="action.succeeded",
            payload__key=OuterRef("payload__key"),
        )
    )


def duplicate_effect_rate(window: Window, workflow: str | None = None) -> float | None:
    sent = events(window, workflow).filter(type="action.executing", payload__from__in=FIRST_SEND)
    counted = sent.annotate(duplicate=_already_done()).aggregate(
        sent=Count("id"), duplicates=Count("id", filter=Q(duplicate=True))
    )
    return _rate(counted["duplicates"], counted["sent"])


def _next_step_started() -> Subquery:
    return Subquery(
        StepRun.objects.filter(execution_id=OuterRef("execution_id"), started_at__gte=OuterRef("created_at"))
        .order_by("started_at")
        .values("started_at")[:1]
    )


def resumes(rows: QuerySet[ExecutionEvent]) -> QuerySet[ExecutionEvent]:
    """Decisions that send the execution back to work, and signals received, with
    ``resumed`` (when the next step started) and ``latency`` (seconds)."""
    decided = Q(type="approval.decided", payload__decision__in=["approve", "request_changes"])
    return (
        rows.filter(decided | Q(type="wait.received"))
        .alias(resumed=_next_step_started())
        .filter(resumed__isnull=False)
        .annotate(latency=Seconds(F("resumed"), F("created_at")))
    )


def resume_latency(window: Window, workflow: str | None = None) -> dict[str, float | None]:
    return resumes(events(window, workflow)).aggregate(**_quantiles(F("latency")))


def approval_integrity(window: Window, workflow: str | None = None) -> dict[str, int]:
    matched = events(window, workflow).filter(type="action.executing", payload__from="approved").count()
    refused = StepRun.objects.filter(
        finished_at__gte=window.since,
        finished_at__lt=window.until,
        outcome=StepRun.Outcome.FAILED,
        output__evidence__approval_check="refused",
    )
    if workflow:
        refused = refused.filter(execution__workflow=workflow)
    return {"matched": matched, "refused": refused.count()}


def after_cancel(rows: QuerySet[ExecutionEvent]) -> QuerySet[ExecutionEvent]:
    """The effects in ``rows`` sent (committed as executing) after their execution was cancelled."""
    cancelled_before = ExecutionEvent.objects.filter(
        execution_id=OuterRef("execution_id"), type="transition", to_status=Status.CANCELLED, id__lt=OuterRef("id")
    )
    return rows.filter(type="action.executing").filter(Exists(cancelled_before))


def cancellation_violations(window: Window, workflow: str | None = None) -> int:
    return after_cancel(events(window, workflow)).count()


def _entered() -> Coalesce:
    """When the stay that the outer transition ends began: recorded on the transition
    (``entered_at``, executions.lifecycle), or, for older events, the execution's
    previous event that set a status (a transition, or its creation)."""
    previous = Subquery(
        ExecutionEvent.objects.filter(execution_id=OuterRef("execution_id"), id__lt=OuterRef("id"))
        .exclude(to_status="")
        .order_by("-id")
        .values("created_at")[:1]
    )
    return Coalesce(Cast(KeyTextTransform("entered_at", "payload"), DateTimeField()), previous)


def stays(rows: QuerySet[ExecutionEvent]) -> QuerySet[ExecutionEvent]:
    """Transitions in ``rows``, each the end of a stay in ``from_status``, with ``stayed`` (seconds)."""
    return (
        rows.filter(type="transition").alias(entered=_entered()).annotate(stayed=Seconds(F("created_at"), F("entered")))
    )


def time_in_state(window: Window, workflow: str | None = None) -> dict[str, dict[str, float | None]]:
    found = {s: {"p50": None, "p95": None} for s in STAYS}
    grouped = stays(events(window, workflow)).values("from_status").annotate(**_quantiles(F("stayed")))
    for row in grouped.order_by():
        if row["from_status"] in found:
            found[row["from_status"]] = _scaled({"p50": row["p50"], "p95": row["p95"]}, 1, 3)
    return found


def decisions(window: Window, workflow: str | None = None) -> QuerySet[Decision]:
    """Decisions in the window, with ``latency``: request made → decided (seconds)."""
    rows = Decision.objects.filter(created_at__gte=window.since, created_at__lt=window.until)
    if workflow:
        rows = rows.filter(request__execution__workflow=workflow)
    return rows.annotate(latency=Seconds(F("created_at"), F("request__created_at")))


def approval_latency(window: Window, workflow: str | None = None) -> dict[str, float | None]:
    return decisions(window, workflow).aggregate(**_quantiles(F("latency")))
