"""The measures over time, for the metrics page's charts: one query per chart, grouped
by interval (``Window.interval_seconds``), whatever the number of executions."""

from __future__ import annotations

from typing import Any

from django.db.models import Count, F, Q
from django.db.models.fields.json import KeyTextTransform

from executions.models import Status
from executions.stuck import REASONS

from .measures import STAYS, _quantiles, decisions, events, measures, resumes, stays
from .sql import Bucket
from .windows import Window

FLOW = {"started": Q(type="execution.created")} | {
    s: Q(type="transition", to_status=s) for s in (Status.COMPLETED, Status.FAILED, Status.CANCELLED)
}


def history(window: Window, *, workflow: str | None = None) -> dict[str, Any]:
    """``buckets`` (the intervals' starts, Unix seconds) and one list per series, aligned
    with them; ``previous``: the measures of the window before, for trends."""
    step = window.interval_seconds
    first = int(window.since.timestamp()) // step * step
    buckets = list(range(first, int(window.until.timestamp()), step))
    rows = events(window, workflow)

    def series(found: dict[int, Any], empty: Any = 0) -> list[Any]:
        return [found.get(b, empty) for b in buckets]

    flow: dict[str, dict[int, int]] = {name: {} for name in FLOW}
    counted = rows.filter(_any(FLOW.values())).annotate(at=Bucket(F("created_at"), step))
    for row in counted.values("at", "type", "to_status").annotate(n=Count("id")).order_by():
        name = "started" if row["type"] == "execution.created" else row["to_status"]
        flow[name][row["at"]] = flow[name].get(row["at"], 0) + row["n"]

    stuck: dict[str, dict[int, int]] = {}
    flagged = (
        rows.filter(type="transition", payload__code__in=REASONS)
        .annotate(at=Bucket(F("created_at"), step), code=KeyTextTransform("code", "payload"))
        .values("at", "code")
        .annotate(n=Count("id"))
        .order_by()
    )
    for row in flagged:
        stuck.setdefault(row["code"], {})[row["at"]] = row["n"]

    in_state: dict[str, dict[str, dict[int, float]]] = {s: {"p50": {}, "p95": {}} for s in STAYS}
    grouped = stays(rows).annotate(at=Bucket(F("created_at"), step)).values("at", "from_status")
    for row in grouped.annotate(**_quantiles(F("stayed"))).order_by():
        if row["from_status"] in in_state:
            for q in ("p50", "p95"):
                in_state[row["from_status"]][q][row["at"]] = _round(row[q], 3)

    resumed = _quantile_series(resumes(rows).annotate(at=Bucket(F("created_at"), step)), 1000, 1)
    decided = _quantile_series(decisions(window, workflow).annotate(at=Bucket(F("created_at"), step)), 1, 3)
    return {
        "window_seconds": int(window.length.total_seconds()),
        "interval_seconds": step,
        "buckets": buckets,
        "executions": {name: series(found) for name, found in flow.items()},
        "stuck_flagged": {reason: series(found) for reason, found in sorted(stuck.items())},
        "time_in_state_seconds": {s: {q: series(found, None) for q, found in qs.items()} for s, qs in in_state.items()},
        "resume_latency_ms": {q: series(found, None) for q, found in resumed.items()},
        "approval_latency_seconds": {q: series(found, None) for q, found in decided.items()},
        "previous": measures(window.previous(), workflow=workflow),
    }


def _any(conditions) -> Q:
    combined = Q()
    for condition in conditions:
        combined |= condition
    return combined


def _round(value: float | None, digits: int, factor: float = 1) -> float | None:
    return round(value * factor, digits) if value is not None else None


def _quantile_series(rows, factor: float, digits: int) -> dict[str, dict[int, float | None]]:
    found: dict[str, dict[int, float | None]] = {"p50": {}, "p95": {}}
    for row in rows.values("at").annotate(**_quantiles(F("latency"))).order_by():
        for q in found:
            found[q][row["at"]] = _round(row[q], digits, factor)
    return found
