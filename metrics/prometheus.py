"""``GET /metrics`` in the Prometheus text format (prometheus-client).

Everything is computed at scrape time from the database, so every web process answers
the same and nothing is kept in any process's memory:

* gauges — ``keel_executions{status,workflow}`` (every status of every deployed
  workflow, terminal included), ``keel_stuck_executions{reason}`` (every reason),
  ``keel_actions{status}`` (every ledger status), ``keel_cancellation_violations``
  (effects sent after a cancel, whole record: must be 0);
* histograms — ``keel_step_duration_seconds{workflow,kind}`` from the step runs
  (started → finished) and ``keel_resume_latency_seconds`` from the events (a decision
  or signal → the next step started; ``metrics.measures.resumes``). They are counts
  over the whole record, so they only grow, as Prometheus expects of a histogram.

Why not prometheus-client's multiprocess mode: it sums files the processes of *one
machine* write, while keel's workers scale out across machines and a resume starts in
the web process and ends in a worker. The record already holds every observation.
"""

from __future__ import annotations

from collections.abc import Iterator

from django.db import connection
from django.db.models import Count, F, QuerySet
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily, HistogramMetricFamily, Metric

from executions import registry
from executions.models import Action, Execution, ExecutionEvent, Status, StepRun

from .measures import after_cancel, resumes, stuck_now
from .sql import Seconds

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
STEP_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 600)
RESUME_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300)


def exposition() -> bytes:
    registry_ = CollectorRegistry(auto_describe=False)
    registry_.register(RecordCollector())
    return generate_latest(registry_)


class RecordCollector:
    """A prometheus-client collector that reads the record at each scrape."""

    def collect(self) -> Iterator[Metric]:
        yield executions_gauge()
        yield stuck_gauge()
        yield actions_gauge()
        yield cancellation_gauge()
        yield step_duration_histogram()
        yield resume_latency_histogram()


def executions_gauge() -> GaugeMetricFamily:
    family = GaugeMetricFamily("keel_executions", "Executions by status and workflow.", labels=["status", "workflow"])
    counted = {
        (row["workflow"], row["status"]): row["n"]
        for row in Execution.objects.order_by().values("workflow", "status").annotate(n=Count("id"))
    }
    workflows = sorted({w for w, _ in counted} | set(registry.names()))
    for workflow in workflows:
        for status in Status.values:
            family.add_metric([status, workflow], counted.get((workflow, status), 0))
    return family


def stuck_gauge() -> GaugeMetricFamily:
    family = GaugeMetricFamily("keel_stuck_executions", "Executions stuck now, by reason.", labels=["reason"])
    for reason, n in stuck_now().items():
        family.add_metric([reason], n)
    return family


def actions_gauge() -> GaugeMetricFamily:
    family = GaugeMetricFamily("keel_actions", "Ledger actions (external effects) by status.", labels=["status"])
    counted = dict(Action.objects.order_by().values_list("status").annotate(n=Count("id")))
    for status in Action.State.values:
        family.add_metric([status], counted.get(status, 0))
    return family


def cancellation_gauge() -> GaugeMetricFamily:
    family = GaugeMetricFamily(
        "keel_cancellation_violations",
        "Effects sent after their execution was cancelled, in the whole record. Must be 0.",
    )
    cancelled = ExecutionEvent.objects.filter(execution__status=Status.CANCELLED)
    family.add_metric([], after_cancel(cancelled).count())
    return family


def _histograms(rows: QuerySet, value: str, buckets: tuple[float, ...], group: tuple[str, ...] = ()) -> list[dict]:
    """Cumulative bucket counts, count and sum of ``value`` over ``rows``, per ``group``.

    The rows' SQL is a materialized CTE under one outer query, so ``value`` (a subquery,
    for resumes) is computed once per row, not once per bucket."""
    inner, params = rows.values(*group, value).query.sql_with_params()
    quote = connection.ops.quote_name
    v = quote(value)
    columns = [
        *(quote(g) for g in group),
        "COUNT(*)",
        f"SUM({v})",
        *(f"SUM(CASE WHEN {v} <= {float(b)!r} THEN 1 ELSE 0 END)" for b in buckets),
    ]
    grouping = f" GROUP BY {', '.join(quote(g) for g in group)}" if group else ""
    with connection.cursor() as cursor:
        # MATERIALIZED: PostgreSQL would otherwise pull the subquery up and run ``value``'s
        # subplan once per reference.
        materialized = "MATERIALIZED " if connection.vendor == "postgresql" else ""
        sql = f"WITH rows AS {materialized}({inner}) SELECT {', '.join(columns)} FROM rows{grouping}"
        cursor.execute(sql, params)
        found = cursor.fetchall()
    return [
        {
            "group": list(row[: len(group)]),
            "count": row[len(group)],
            "total": row[len(group) + 1] or 0.0,
            "cumulative": [int(n or 0) for n in row[len(group) + 2 :]],
        }
        for row in found
    ]


def _add(family: HistogramMetricFamily, found: dict, buckets: tuple[float, ...]) -> None:
    counts = [(repr(float(b)), n) for b, n in zip(buckets, found["cumulative"], strict=True)]
    family.add_metric(found["group"], [*counts, ("+Inf", found["count"])], sum_value=float(found["total"]))


def step_duration_histogram() -> HistogramMetricFamily:
    family = HistogramMetricFamily(
        "keel_step_duration_seconds",
        "Step runs, started to finished, by workflow and step kind (every attempt).",
        labels=["workflow", "kind"],
    )
    runs = StepRun.objects.order_by().annotate(
        workflow=F("execution__workflow"), duration=Seconds(F("finished_at"), F("started_at"))
    )
    for found in _histograms(runs, "duration", STEP_BUCKETS, group=("workflow", "kind")):
        _add(family, found, STEP_BUCKETS)
    return family


def resume_latency_histogram() -> HistogramMetricFamily:
    family = HistogramMetricFamily(
        "keel_resume_latency_seconds", "A decision or signal committed to the next step started."
    )
    found = _histograms(resumes(ExecutionEvent.objects.order_by()), "latency", RESUME_BUCKETS)
    _add(family, found[0], RESUME_BUCKETS)
    return family
