"""``GET /metrics`` in the Prometheus text format (prometheus-client).

Everything is computed at scrape time from the database, so every web process answers
the same and nothing is kept in any process's memory:

* gauges — ``keel_executions{status,workflow}`` (every status of every deployed
  workflow, terminal included: the sweeper's tally of terminal rows plus the live ones,
  ``triage.tallies``), ``keel_stuck_executions{reason}`` (every reason),
  ``keel_actions{status}`` (every ledger status: the succeeded ones tallied as the
  terminal executions are), ``keel_notifications{channel,outcome}``
  (e-mails and webhooks: sent, failed, unknown, pending), ``keel_cancellation_violations``
  (effects sent after a cancel, whole record: must be 0);
* a counter — ``keel_model_cost_usd_total{workflow,model}`` (the journal's priced
  calls, ``metrics.costs``);
* histograms — ``keel_step_duration_seconds{workflow,kind}`` (step runs, started →
  finished) and ``keel_resume_latency_seconds`` (a decision or signal → the next step
  started), from the rollup's ever rows plus the minutes not folded yet
  (``metrics.rollup``). They count the whole record, so they only grow, as Prometheus
  expects of a histogram; their ``le`` bounds split the rollup's buckets exactly.

Why not prometheus-client's multiprocess mode: it sums files the processes of *one
machine* write, while keel's workers scale out across machines and a resume starts in
the web process and ends in a worker. The record already holds every observation.
"""

from __future__ import annotations

from collections.abc import Iterator

from django.utils import timezone
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric

from executions.authoring import registry
from executions.models import Action, Status
from triage import tallies

from . import costs, histograms, rollup
from .measures import notifications_now, stuck_now

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
STEP_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 600)
RESUME_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300)
STEP = "step:"


def exposition() -> bytes:
    registry_ = CollectorRegistry(auto_describe=False)
    registry_.register(RecordCollector())
    return generate_latest(registry_)


class RecordCollector:
    """A prometheus-client collector that reads the record at each scrape."""

    def collect(self) -> Iterator[Metric]:
        ever = rollup.summed(None, timezone.now(), by_workflow=True)
        yield executions_gauge()
        yield stuck_gauge()
        yield actions_gauge()
        yield notifications_gauge()
        yield cancellation_gauge(ever)
        yield step_duration_histogram(ever)
        yield resume_latency_histogram(ever)
        yield model_cost_counter()


def executions_gauge() -> GaugeMetricFamily:
    family = GaugeMetricFamily("keel_executions", "Executions by status and workflow.", labels=["status", "workflow"])
    counted = tallies.counts_by_workflow()
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
    counted = tallies.action_counts()
    for status in Action.State.values:
        family.add_metric([status], counted[status])
    return family


def notifications_gauge() -> GaugeMetricFamily:
    family = GaugeMetricFamily(
        "keel_notifications",
        "E-mails and webhooks sent beside the steps, by channel and outcome (sent, failed, unknown, pending).",
        labels=["channel", "outcome"],
    )
    for channel, outcomes in notifications_now().items():
        for outcome, n in outcomes.items():
            family.add_metric([channel, outcome], n)
    return family


def cancellation_gauge(ever: rollup.Sums | None = None) -> GaugeMetricFamily:
    family = GaugeMetricFamily(
        "keel_cancellation_violations",
        "Effects sent after their execution was cancelled, in the whole record. Must be 0.",
    )
    ever = ever if ever is not None else rollup.summed(None, timezone.now(), by_workflow=True)
    family.add_metric([], sum(rollup.count(ever, "cancel.violation", w) for w in _workflows(ever)))
    return family


def _workflows(sums: rollup.Sums) -> list[str]:
    return sorted({group for group, _ in sums})


def _add(family: HistogramMetricFamily, labels: list[str], counts: dict[int, int], total: float, bounds) -> None:
    cumulative = histograms.cumulative(counts, bounds)
    buckets = [(repr(float(b)), n) for b, n in zip(bounds, cumulative, strict=True)]
    family.add_metric(labels, [*buckets, ("+Inf", sum(counts.values()))], sum_value=float(total))


def step_duration_histogram(ever: rollup.Sums) -> HistogramMetricFamily:
    family = HistogramMetricFamily(
        "keel_step_duration_seconds",
        "Step runs, started to finished, by workflow and step kind (every attempt).",
        labels=["workflow", "kind"],
    )
    for workflow, measure in sorted(k for k in ever if k[1].startswith(STEP)):
        counts = rollup.counts(ever, measure, workflow)
        _add(
            family, [workflow, measure.removeprefix(STEP)], counts, rollup.total(ever, measure, workflow), STEP_BUCKETS
        )
    return family


def resume_latency_histogram(ever: rollup.Sums) -> HistogramMetricFamily:
    family = HistogramMetricFamily(
        "keel_resume_latency_seconds", "A decision or signal committed to the next step started."
    )
    counts: dict[int, int] = {}
    for workflow in _workflows(ever):
        for bucket, n in rollup.counts(ever, "resume", workflow).items():
            counts[bucket] = counts.get(bucket, 0) + n
    total = sum(rollup.total(ever, "resume", w) for w in _workflows(ever))
    _add(family, [], counts, total, RESUME_BUCKETS)
    return family


def model_cost_counter() -> CounterMetricFamily:
    family = CounterMetricFamily(
        "keel_model_cost_usd",
        "USD spent on model calls, by workflow and model requested, in the whole record (priced calls only).",
        labels=["workflow", "model"],
    )
    for workflow, models in costs.by_workflow_and_model().items():
        for model, usd in models.items():
            family.add_metric([workflow, model], usd)
    return family
