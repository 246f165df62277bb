"""Issue 8: the rollup. The measures read from folded minutes and hours are the measures
read from the raw record, whatever was folded when; folding twice counts nothing twice;
durations kept as buckets keep their percentiles within a bucket's width and split at
Prometheus's bounds exactly."""

from __future__ import annotations

import math
import random
import threading
from datetime import datetime, timedelta

import pgtrigger
import pytest
from django.db import connection, transaction
from django.test import Client
from django.utils import timezone

from approvals.models import ApprovalRequest, Decision
from executions.models import Action, Execution, ExecutionEvent, Status, StepRun
from metrics import histograms, rollup
from metrics.history import history
from metrics.measures import measures
from metrics.models import Folded, Rollup
from metrics.prometheus import RESUME_BUCKETS, STEP_BUCKETS
from metrics.windows import Window
from tests.support.records import approved_execution
from tests.support.scraping import TOKEN, bearer, queries

# --- histograms


@pytest.mark.parametrize(
    "seconds", [1e-5, 0.0099, 0.01, 0.0101, 0.05, 0.25, 0.999, 1, 2.5, 47.2, 99.5, 100, 600, 86400]
)
def test_a_bucket_holds_its_value_and_is_at_most_a_tenth_wide(seconds):
    b = histograms.bucket(seconds)
    assert histograms.lower(b) < seconds <= histograms.upper(b) * (1 + 1e-12)
    assert histograms.upper(b) - histograms.lower(b) <= 0.1 * histograms.upper(b) + 1e-15


def test_prometheus_bounds_split_the_buckets_exactly():
    rng = random.Random(8)
    values = [rng.lognormvariate(0, 2) for _ in range(5000)] + [float(b) for b in STEP_BUCKETS]
    counts: dict[int, int] = {}
    for v in values:
        counts[histograms.bucket(v)] = counts.get(histograms.bucket(v), 0) + 1
    for bounds in (STEP_BUCKETS, RESUME_BUCKETS):
        assert histograms.cumulative(counts, bounds) == [sum(v <= b for v in values) for b in bounds]


def percentile_cont(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    position = fraction * (len(ordered) - 1)
    low, high = math.floor(position), math.ceil(position)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


@pytest.mark.parametrize("n", [1, 2, 7, 1000])
def test_percentiles_from_buckets_are_within_a_bucket_of_the_exact_ones(n):
    rng = random.Random(n)
    values = [rng.lognormvariate(-1, 1.5) for _ in range(n)]
    counts: dict[int, int] = {}
    for v in values:
        counts[histograms.bucket(v)] = counts.get(histograms.bucket(v), 0) + 1
    for fraction in (0.5, 0.95):
        exact = percentile_cont(values, fraction)
        assert math.isclose(histograms.quantile(counts, fraction), exact, rel_tol=0.1), fraction
    assert histograms.quantile({}, 0.5) is None


# --- folding


def _minute(moment: datetime) -> datetime:
    return moment.replace(second=0, microsecond=0)


def spread_history(people, hours: int, per_hour: int) -> None:
    """Executions spread over the last ``hours``, each with the rows a real run leaves
    (events, step runs, an approval and its decision, a reconciled effect), their times
    set to that past; durations vary so the buckets do."""
    requester, manager = people["requester"].user, people["manager"].user
    now = timezone.now()
    rng = random.Random(hours * 1000 + per_hour)
    for i in range(hours * per_hour):
        began = now - timedelta(hours=hours) + timedelta(seconds=i * 3600 / per_hour + rng.random() * 20)
        with transaction.atomic(), rewriting_history():
            _one(requester, manager, began, i, rng)


def rewriting_history():
    """The append-only triggers let this test date its rows in the past (nothing else)."""
    return pgtrigger.ignore(
        "executions.ExecutionEvent:execution_event_append_only", "approvals.Decision:decision_append_only"
    )


def _one(requester, manager, began: datetime, i: int, rng: random.Random) -> None:
    workflow = "replacement_order" if i % 3 == 0 else "monthly_report"
    execution, request, decision = approved_execution(requester, manager, i, workflow=workflow)
    asked, decided = began + timedelta(seconds=5), began + timedelta(seconds=5 + rng.uniform(1, 300))
    ApprovalRequest.objects.filter(pk=request.pk).update(created_at=asked)
    Decision.objects.filter(pk=decision.pk).update(created_at=decided)
    key = f"{execution.ref}:publish:v1"
    Action.objects.create(
        key=key, execution=execution, step="publish", type="publish_report", attempts=1, gate_ref=request.gate_ref
    )
    taken_over = i % 4 == 0
    ending = Status.COMPLETED if i % 5 else Status.FAILED
    at = lambda seconds: began + timedelta(seconds=seconds)  # noqa: E731
    events = [
        ("execution.created", "", "pending", {}, at(0)),
        ("transition", "pending", "running", {}, at(rng.uniform(0.01, 2))),
        *([("lease.taken_over", "", "", {}, at(3))] if taken_over else []),
        ("transition", "running", "awaiting_approval", {}, asked),
        ("approval.decided", "", "", {"decision": "approve"}, decided),
        ("transition", "awaiting_approval", "running", {}, decided),
        ("action.executing", "", "", {"key": key, "from": "approved"}, decided + timedelta(seconds=1)),
        ("action.succeeded", "", "", {"key": key, "reconciled": i % 7 == 0}, decided + timedelta(seconds=2)),
        (
            "transition",
            "running",
            ending,
            {"code": "retries_exhausted"} if ending == Status.FAILED else {},
            decided + timedelta(seconds=3),
        ),
    ]
    for type_, from_status, to_status, payload, moment in events:
        event = ExecutionEvent.objects.create(
            execution=execution, type=type_, from_status=from_status, to_status=to_status, payload=payload
        )
        ExecutionEvent.objects.filter(pk=event.pk).update(created_at=moment)
    Execution.objects.filter(pk=execution.pk).update(status=ending)
    resumed = decided + timedelta(seconds=rng.uniform(0.005, 2))
    for step, kind, started, took in (
        ("analyze", "model", at(1), rng.uniform(0.05, 20)),
        ("publish", "effect", resumed, rng.uniform(0.01, 1)),
    ):
        run = StepRun.objects.create(
            execution=execution,
            step=step,
            kind=kind,
            outcome="succeeded",
            lease_token=1,
            workflow_version=1,
            started_at=started,
        )
        StepRun.objects.filter(pk=run.pk).update(finished_at=started + timedelta(seconds=took))


def everything(until: datetime) -> list:
    """Every measure and chart the API answers, for windows of 1h, 24h and 7d, all
    workflows and one."""
    found = []
    for length in (timedelta(hours=1), timedelta(hours=24), timedelta(days=7)):
        window = Window(until=until, length=length)
        for workflow in (None, "replacement_order"):
            found.append(measures(window, workflow=workflow))
            found.append(history(window, workflow=workflow))
    return found


def test_measures_are_the_same_folded_or_read_raw(people):
    spread_history(people, hours=30, per_hour=12)
    until = _minute(timezone.now())
    raw = everything(until)
    assert raw[2]["approval_integrity"]["matched"] > 0 and raw[2]["recovery_success_rate"] is not None

    # Half folded: the minutes up to five hours ago.
    assert rollup.fold_all(now=until - timedelta(hours=5)) >= 1
    assert rollup.folded_through() == until - timedelta(hours=5) - rollup.LAG
    assert everything(until) == raw
    # All of it: hours where whole hours fit, minutes at the edges.
    rollup.fold_all(now=until + rollup.LAG)
    assert rollup.folded_through() == until
    assert Rollup.objects.filter(resolution=Rollup.HOUR).exists()
    assert everything(until) == raw


def test_folding_twice_counts_nothing_twice(people):
    spread_history(people, hours=3, per_hour=10)
    now = timezone.now()
    rollup.fold_all(now=now)
    rows = list(Rollup.objects.order_by("pk").values_list("resolution", "start", "workflow", "measure", "bucket", "n"))
    assert rollup.fold(now=now) is None
    assert (
        list(Rollup.objects.order_by("pk").values_list("resolution", "start", "workflow", "measure", "bucket", "n"))
        == rows
    )
    started = sum(r.n for r in Rollup.objects.filter(resolution=Rollup.EVER, measure="started"))
    assert started == Execution.objects.count() == 30


def test_folders_racing_count_each_minute_once(people):
    """Four folders at once (each its own connection): each span is folded by one."""
    spread_history(people, hours=3, per_hour=8)
    now = timezone.now()
    done, failures = [], []

    def folder() -> None:
        try:
            done.append(rollup.fold_all(now=now))
        except Exception as error:  # reported below
            failures.append(error)
        finally:
            connection.close()

    threads = [threading.Thread(target=folder) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not failures, failures
    assert sum(done) >= 1
    ever = {r.measure: r.n for r in Rollup.objects.filter(resolution=Rollup.EVER, bucket=0, workflow="monthly_report")}
    assert ever["started"] == Execution.objects.filter(workflow="monthly_report").count() == 16
    minutes = Rollup.objects.filter(resolution=Rollup.MINUTE, measure="started")
    assert sum(minutes.values_list("n", flat=True)) == 24


def test_minute_rows_past_keep_are_dropped_and_hours_remain(people):
    spread_history(people, hours=2, per_hour=6)
    Folded.objects.create(pk=1, through=_minute(timezone.now() - timedelta(days=10)), folded_at=timezone.now())
    with transaction.atomic(), rewriting_history():
        ExecutionEvent.objects.filter(type="execution.created").update(created_at=timezone.now() - timedelta(days=9))
    rollup.fold_all(now=timezone.now())
    old = timezone.now() - rollup.KEEP
    assert not Rollup.objects.filter(resolution=Rollup.MINUTE, start__lt=old).exists()
    assert Rollup.objects.filter(resolution=Rollup.HOUR, start__lt=old, measure="started").exists()
    window = Window(until=timezone.now(), length=timedelta(days=30))
    assert sum(history(window)["executions"]["started"]) == 12


def test_the_query_count_does_not_grow_with_the_rollup(people, settings):
    settings.RUNTIME_METRICS_TOKEN = scrape_token = TOKEN
    client, operator = Client(), people["operator"].token
    paths = ("/api/metrics?window=7d", "/api/metrics/history?window=7d", "/metrics")
    spread_history(people, hours=2, per_hour=3)
    rollup.fold_all()
    small = {path: queries(client, path, scrape_token if path == "/metrics" else operator) for path in paths}
    spread_history(people, hours=20, per_hour=3)
    Folded.objects.all().delete()
    Rollup.objects.all().delete()
    rollup.fold_all()
    assert Rollup.objects.filter(resolution=Rollup.HOUR).count() > 20
    large = {path: queries(client, path, scrape_token if path == "/metrics" else operator) for path in paths}
    assert small == large, (small, large)
    assert client.get(paths[0], **bearer(operator)).json()["approval_integrity"]["matched"] == 66


def test_the_beat_schedule_folds_beside_the_sweeper():
    from config.celery import app

    app.loader.import_default_modules()
    app.finalize()
    tasks = {entry["task"] for entry in app.conf.beat_schedule.values()}
    assert {"executions.sweep", "metrics.fold"} <= tasks
    assert "metrics.fold" in app.tasks
