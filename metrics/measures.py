"""The seeds' measures (docs/design.md §4, Metrics), computed from the record: events, the
ledger, step runs and approvals, as the rollup (``metrics.rollup``) has counted them —
a fixed number of queries, over a few hundred rows, whatever the number of executions.
Durations are read from histograms whose buckets are at most 10 % wide
(``metrics.histograms``); counts are exact.

Definitions (docs/api.md, "Metrics", says the same for API clients):

* ``recovery_success_rate``: of the executions that had been taken over after a lost
  lease and settled in the window — completed, failed, or stopped for a person
  (needs_attention) — the share that completed. Cancelled ones (a person's choice) and
  those still moving are not counted.
* ``duplicate_effect_rate``: effects found done already when the runtime came back to
  them in the window (a reconciliation lookup that found it, ``reconciled``, or a
  provider that answered it had the key, ``replayed``), per effect first sent in the
  window (an ``action.executing`` event that is not a re-send).
* ``resume_latency_ms``: a decision (approve, request changes) or a signal committed →
  the next step run started, for those next step runs that ended in the window.
* ``stuck``: executions stuck now, by reason (as ``executions.selectors.summary``).
* ``approval_integrity``: ``matched`` — guarded effects sent in the window after the
  approved version and hash were checked; ``refused`` — effect steps the approval check
  refused in the window (a version made after the approval, or an approver who lost
  the authority).
* ``cancellation_violations``: effects sent after their execution was cancelled. Must be 0.
* ``time_in_state_seconds``: for each non-terminal status, stays that ended in the
  window (entered → the next transition).
* ``approval_latency_seconds``: request made → decided, for decisions in the window.
* ``cost_usd``: ``{workflow: {model: USD}}`` of the model calls recorded in the window
  that had a price (``metrics.costs``).
"""

from __future__ import annotations

from typing import Any

from executions import stuck

from . import costs, histograms, rollup
from .observations import STAYS
from .windows import Window

__all__ = ["STAYS", "measures", "notifications_now", "stuck_now"]

NOTIFICATION_STATES = {"sent": "succeeded", "failed": "failed", "unknown": "unknown"}


def measures(window: Window, *, workflow: str | None = None) -> dict[str, Any]:
    """The measures of docs/design.md §6 (``GET /api/metrics``) over ``window``."""
    return {
        **of(rollup.summed(window.since, window.until, workflow=workflow)),
        "stuck": stuck_now(workflow),
        "cost_usd": costs.by_workflow_and_model(window.since, window.until, workflow=workflow),
    }


def notifications_now(workflow: str | None = None) -> dict[str, dict[str, int]]:
    """E-mails and webhooks in the ledger now, by channel: sent, failed, unknown (an
    operator establishes those) and pending (planned, or being sent)."""
    from django.db.models import Count

    from executions.models import Action
    from notifications import channels

    # The ledger types of what is sent beside the steps, by channel (notifications.channels).
    types = {channel.name: channel.action_type for channel in channels.registered()}
    rows = Action.objects.filter(beside=True, type__in=types.values())
    if workflow:
        rows = rows.filter(execution__workflow=workflow)
    counted = {(t, st): n for t, st, n in rows.order_by().values_list("type", "status").annotate(n=Count("id"))}
    out = {}
    for channel, kind in types.items():
        seen = {name: counted.get((kind, status), 0) for name, status in NOTIFICATION_STATES.items()}
        total = sum(n for (t, _), n in counted.items() if t == kind)
        out[channel] = {**seen, "pending": total - sum(seen.values())}
    return out


def of(sums: rollup.Sums, at: int | None = None) -> dict[str, Any]:
    """The windowed measures from the rollup's sums (of the interval starting ``at``)."""

    def count(measure: str) -> int:
        return rollup.count(sums, measure, at)

    def quantiles(measure: str, factor: float, digits: int) -> dict[str, float | None]:
        counted = rollup.counts(sums, measure, at)
        found = {"p50": histograms.quantile(counted, 0.5), "p95": histograms.quantile(counted, 0.95)}
        return {q: (round(v * factor, digits) if v is not None else None) for q, v in found.items()}

    return {
        "recovery_success_rate": _rate(count("recovery.completed"), count("recovery.settled")),
        "duplicate_effect_rate": _rate(count("effect.duplicate"), count("effect.sent")),
        "resume_latency_ms": quantiles("resume", 1000, 1),
        "approval_integrity": {"matched": count("approval.matched"), "refused": count("approval.refused")},
        "cancellation_violations": count("cancel.violation"),
        "time_in_state_seconds": {s: quantiles(f"stay:{s}", 1, 3) for s in STAYS},
        "approval_latency_seconds": quantiles("approval.latency", 1, 3),
    }


def _rate(part: int, whole: int) -> float | None:
    return round(part / whole, 4) if whole else None


def stuck_now(workflow: str | None = None) -> dict[str, int]:
    """Executions stuck now, by reason: ``by_reason`` of ``executions.selectors.summary``
    (``executions.stuck.counts``, read from the executions that can be stuck through
    their indexes, not from every execution)."""
    return stuck.counts(workflow=workflow)
