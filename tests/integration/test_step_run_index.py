"""The step runs' one index (issue 46, bytes): the unique (execution, step, round,
succeeded) both keeps "a step succeeds once per round" in the database and serves the
reads of one execution's runs, which used an index of their own before."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from executions.models import Execution, StepRun

pytestmark = pytest.mark.django_db


def _execution() -> Execution:
    user = get_user_model().objects.create_user("runs")
    return Execution.objects.create(workflow="monthly_report", workflow_version=1, input_digest="d", created_by=user)


def _run(execution: Execution, outcome: str, *, step: str = "draft_report", round: int = 1) -> StepRun:
    return StepRun.objects.create(
        execution=execution,
        step=step,
        kind="compute",
        round=round,
        outcome=outcome,
        lease_token=1,
        workflow_version=1,
        started_at=timezone.now(),
    )


def test_a_step_succeeds_once_per_round_and_fails_as_often_as_it_does():
    execution = _execution()
    failed = [_run(execution, StepRun.Outcome.FAILED) for _ in range(3)]  # failures are never equal
    _run(execution, StepRun.Outcome.SUCCEEDED)
    with pytest.raises(IntegrityError), transaction.atomic():
        _run(execution, StepRun.Outcome.SUCCEEDED)
    _run(execution, StepRun.Outcome.SUCCEEDED, round=2)  # a later visit of the step
    _run(execution, StepRun.Outcome.SUCCEEDED, step="review")
    assert StepRun.objects.filter(execution=execution).count() == len(failed) + 3


def _plan(queryset) -> str:
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")  # a table this small is read whole otherwise
        sql, params = queryset.query.sql_with_params()
        cursor.execute(f"EXPLAIN {sql}", params)
        return "\n".join(row[0] for row in cursor.fetchall())


@pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL's plans")
def test_the_runs_of_one_execution_are_read_through_the_one_index():
    execution = _execution()
    run = _run(execution, StepRun.Outcome.SUCCEEDED)
    plan = _plan(StepRun.objects.filter(execution=execution).order_by("id"))
    assert "step_succeeds_once_per_round" in plan, plan
    # "A run of this execution started between two times" (the measures' resumes, for every
    # run of a long chat): the same index, which carries started_at, so the range is checked
    # in the index (an index-only scan once the pages are all-visible), not in every run's row.
    between = (
        StepRun.objects.filter(execution=execution, started_at__gte=run.started_at, started_at__lt=timezone.now())
        .order_by()
        .values("execution_id")
    )
    assert "step_succeeds_once_per_round" in _plan(between)
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_get_indexdef('step_succeeds_once_per_round'::regclass)")
        assert cursor.fetchone()[0].endswith("INCLUDE (started_at)")
