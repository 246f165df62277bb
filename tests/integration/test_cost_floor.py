"""Issue 10: durability at the cost floor, counted on the wire and on real workers.

- A 5-step compute workflow run in-process sends one statement per compute step plus
  the claim's two, each its own round trip, and writes exactly one commit per step plus
  one for the claim, with the workflow's kill switch read before every step (issue 25:
  no statement of its own).
- A Celery worker process serves 100 tasks on one database connection.

Measured before the optimisation: 41 statements and 11 commits for the 5-step
workflow, and a new connection per task. Issue 10 made it 7 statements and 9 round
trips; issue 25, 7 statements in 7 round trips (the claim: the row read with its
workflow's kill switch, then the lease, the transition and its event in one fenced
statement; each step: one statement that fences, checkpoints and records the step
run — for the last step also the completion and its event — and reads the kill switch
for the next, committing on its own: executions.engine.writer) and 6 writing commits.
A broken measurement is a plain failure (``pytest.fail``), not a floor
miss.
"""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.db import transaction

import bench.flows  # noqa: F401 - registers bench_noop5
import tests.support.connection_probe  # noqa: F401 - registers connection_probe
from executions.engine import runner
from executions.models import Execution, Status, StepRun
from executions.services import execution_start
from tests.support.procs import wait_for
from tests.support.records import pending
from tests.support.wire import wire_trace

STEPS = 5
# The claim: the row locked and read (with its workflow's kill switch), then the lease, the
# pending → running transition and its event in one fenced statement.
CLAIM_STATEMENTS = 2
PROBE_TASKS = 100


class Boom(Exception):
    pass


def test_the_wire_trace_counts_statements_round_trips_and_commits(transactional_db, tmp_path):
    """The instrument the floors rely on, on a sequence whose cost is known."""
    with wire_trace(tmp_path / "wire.log") as wire:
        with transaction.atomic():  # BEGIN, 2 statements, COMMIT: one commit
            Execution.objects.filter(pk=0).update(round=1)
            Execution.objects.filter(pk=0).exists()
        Execution.objects.filter(pk=0).count()  # autocommit: its own commit
        with pytest.raises(Boom), transaction.atomic():  # BEGIN, 1 statement, ROLLBACK: no commit
            Execution.objects.filter(pk=0).update(round=2)
            raise Boom
    assert wire.kinds == {"UPDATE": 2, "SELECT": 2}
    assert (wire.commits, wire.write_commits) == (2, 1)
    assert wire.round_trips == 4 + 1 + 3


def test_the_wire_trace_reads_statements_prepared_before_it(transactional_db, tmp_path):
    """The hot path's statements are prepared on the connection (executions.engine.compiled)
    before a trace starts: an Execute names one, and the trace still knows its SQL."""
    from executions.engine.compiled import cursor

    for _ in range(6):  # past psycopg's prepare_threshold
        with cursor() as c:
            c.execute("SELECT count(*) FROM executions_execution WHERE id = %s", [0])
        with cursor() as c:
            c.execute("UPDATE executions_execution SET round = 1 WHERE id = %s", [0])
    with wire_trace(tmp_path / "wire.log") as wire:
        with cursor() as c:
            c.execute("SELECT count(*) FROM executions_execution WHERE id = %s", [0])
        with cursor() as c:
            c.execute("UPDATE executions_execution SET round = 1 WHERE id = %s", [0])
    assert wire.statements == [
        "SELECT count(*) FROM executions_execution WHERE id = $1",
        "UPDATE executions_execution SET round = 1 WHERE id = $1",
    ]
    assert (wire.commits, wire.write_commits, wire.round_trips) == (2, 1, 2)
    assert "\tParse\t" not in (tmp_path / "wire.log").read_text()  # both were prepared before the trace


def test_a_compute_step_costs_one_commit_and_at_most_three_statements(transactional_db, tmp_path, settings):
    # At the default RUNTIME_SWITCH_RECHECK_SECONDS=0 the kill switch is read before every step,
    # with the claim's locked read and each checkpoint's statement (executions.engine.pauses): no
    # statement of its own.
    settings.RUNTIME_SWITCH_RECHECK_SECONDS = 0
    user = get_user_model().objects.create_user("floor")
    execution = pending(user, "bench_noop5")

    with wire_trace(tmp_path / "wire.log") as wire:
        outcome = runner.advance(execution.pk, worker="worker:test-cost-floor")

    execution.refresh_from_db()
    runs = StepRun.objects.filter(execution=execution, outcome=StepRun.Outcome.SUCCEEDED).count()
    if outcome != "stopped" or execution.status != Status.COMPLETED or runs != STEPS:
        pytest.fail(f"the run itself went wrong: {outcome}, {execution.status}, {runs} step runs")
    # The claim, then one statement a step (executions.engine.writer), each its own round trip.
    floor = STEPS + CLAIM_STATEMENTS
    assert (len(wire.statements), wire.round_trips, wire.write_commits) == (floor, floor, STEPS + 1), (
        f"{wire.summary()}; floor: {floor} statements in as many round trips, exactly {STEPS + 1} writing commits"
    )


def test_in_eager_mode_execution_start_runs_the_slice_in_the_caller(transactional_db):
    """Celery's task_always_eager runs the doorbell's task in the process that rang it, after
    the start commits (what a user's own tests expect of eager mode, and the benchmarks'
    in-process rows measure); no broker is reached."""
    from config.celery import app

    user = get_user_model().objects.create_user("eager")
    app.conf.task_always_eager = True
    try:
        execution, _ = execution_start(user=user, workflow="bench_noop5", input={"n": 1})
    finally:
        app.conf.task_always_eager = False
    execution.refresh_from_db()
    assert execution.status == Status.COMPLETED
    assert StepRun.objects.filter(execution=execution, outcome=StepRun.Outcome.SUCCEEDED).count() == STEPS


def test_a_start_of_a_workflow_with_one_version_is_one_statement(transactional_db, tmp_path):
    """The start writes the execution and its first event in one statement, and reads no
    rollout when one version is deployed (every rollout would choose it)."""
    user = get_user_model().objects.create_user("starter")
    execution_start(user=user, workflow="bench_noop5", input={"n": 0})  # prepared before the trace
    with wire_trace(tmp_path / "wire.log") as wire:
        execution_start(user=user, workflow="bench_noop5", input={"n": 1})
    assert (len(wire.statements), wire.round_trips, wire.write_commits) == (1, 1, 1), wire.summary()
    assert wire.statements[0].startswith("WITH r AS (INSERT INTO"), wire.statements


def test_a_worker_process_serves_100_tasks_on_one_database_connection(stack):
    user = get_user_model().objects.create_user("probe")
    stack.up(web=False, beat=False, RUNTIME_WORKFLOW_MODULES="workflows.monthly_report,tests.support.connection_probe")

    ids = [execution_start(user=user, workflow="connection_probe", input={"n": i})[0].pk for i in range(PROBE_TASKS)]
    wait_for(
        lambda: Execution.objects.filter(pk__in=ids, status=Status.COMPLETED).count() == PROBE_TASKS,
        timeout=240,
        what=f"{PROBE_TASKS} probe executions to complete",
    )

    outputs = list(
        StepRun.objects.filter(execution__in=ids, step="probe", outcome="succeeded").values_list("output", flat=True)
    )
    workers = {o["worker_pid"] for o in outputs}
    if len(outputs) != PROBE_TASKS or len(workers) != 1:
        pytest.fail(f"expected {PROBE_TASKS} probes by one worker process: {len(outputs)} by {len(workers)}")
    backends = {o["backend_pid"] for o in outputs}
    assert len(backends) == 1, f"{PROBE_TASKS} tasks in one worker process used {len(backends)} database connections"
