"""The measures over time, for the metrics page's charts: the rollup's sums grouped by
interval (``Window.interval_seconds``), in a fixed number of queries whatever the
number of executions."""

from __future__ import annotations

from typing import Any

from . import rollup
from .measures import measures, of
from .observations import FLOW, STAYS
from .windows import Window

FLOWS = ("started", *(s.value for s in FLOW))
FLAGGED = "flagged:"


def history(window: Window, *, workflow: str | None = None) -> dict[str, Any]:
    """``buckets`` (the intervals' starts, Unix seconds) and one list per series, aligned
    with them; ``previous``: the measures of the window before, for trends."""
    step = window.interval_seconds
    first = int(window.since.timestamp()) // step * step
    buckets = list(range(first, int(window.until.timestamp()), step))
    sums = rollup.summed(window.since, window.until, workflow=workflow, interval=step)
    per = {at: of(sums, at) for at in buckets}
    reasons = sorted({m.removeprefix(FLAGGED) for _, m in sums if m.startswith(FLAGGED)})

    def series(pick) -> list[Any]:
        return [pick(at) for at in buckets]

    return {
        "window_seconds": int(window.length.total_seconds()),
        "interval_seconds": step,
        "buckets": buckets,
        "executions": {name: series(lambda at, n=name: rollup.count(sums, n, at)) for name in FLOWS},
        "stuck_flagged": {r: series(lambda at, r=r: rollup.count(sums, FLAGGED + r, at)) for r in reasons},
        "time_in_state_seconds": {
            s: {q: series(lambda at, s=s, q=q: per[at]["time_in_state_seconds"][s][q]) for q in ("p50", "p95")}
            for s in STAYS
        },
        "resume_latency_ms": {q: series(lambda at, q=q: per[at]["resume_latency_ms"][q]) for q in ("p50", "p95")},
        "approval_latency_seconds": {
            q: series(lambda at, q=q: per[at]["approval_latency_seconds"][q]) for q in ("p50", "p95")
        },
        "previous": measures(window.previous(), workflow=workflow),
    }
