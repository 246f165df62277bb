"""What the claim reads (issue 25).

- Compiled once (executions.engine.compiled), the read gives what Django's queryset gives:
  every field converted the same way (JSON, decimals, aware datetimes, NULLs), the
  annotations, None for a row the filter leaves out; each read takes the id it is given.
- A step's output is stored once, in its step run: ``Execution.outputs()`` is the latest
  succeeded run of each step over what a restart carried over (or, in a row written
  before issue 25, the copy its context kept), the same whether the claim's read brought
  them (PostgreSQL) or they are read on first use; a checkpoint no longer copies them into
  the execution's row."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import psycopg
import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.db.models import Q
from django.db.models.functions import Now
from django.utils import timezone

import bench.flows  # noqa: F401 - registers bench_noop5
from executions.engine import leases, pauses, runner
from executions.engine.compiled import CompiledRead
from executions.models import Execution, Status, StepRun, WorkflowSwitch


def _queryset(pk):
    return (
        Execution.objects.filter(pk=pk, status__in=[Status.PENDING, Status.RUNNING])
        .annotate(db_now=Now(), switch_thrown=pauses.switch_thrown_of_row())
        .order_by()
    )


READ = CompiledRead(_queryset)


def _execution(user, workflow: str, **fields) -> Execution:
    return Execution.objects.create(
        workflow=workflow,
        workflow_version=3,
        input={"month": "2026-08", "nested": {"n": [1, 2]}},
        input_digest="d",
        created_by=user,
        current_step="retrieve",
        context={"notes": {"facts": [{"id": "F1", "statement": "ünïcode"}]}},
        **fields,
    )


def test_a_compiled_read_gives_the_instance_the_queryset_gives(transactional_db):
    user = get_user_model().objects.create_user("reader")
    plain = _execution(user, "monthly_report")
    full = _execution(
        user,
        "quarterly_report",
        budget_usd=Decimal("2.500001"),
        deadline=timezone.now() + timedelta(days=1),
        idempotency_key="k-1",
    )
    WorkflowSwitch.objects.create(workflow="quarterly_report", paused=True, reason="drill", actor=user)
    for execution in (plain, full):
        compiled, orm = READ.get(execution.pk), _queryset(execution.pk).first()
        assert type(compiled) is Execution and not compiled._state.adding
        for field in Execution._meta.concrete_fields:
            assert getattr(compiled, field.attname) == getattr(orm, field.attname), field.name
            assert type(getattr(compiled, field.attname)) is type(getattr(orm, field.attname)), field.name
        assert compiled.switch_thrown is orm.switch_thrown
        assert abs(compiled.db_now - orm.db_now) < timedelta(seconds=5) and compiled.db_now.tzinfo is not None
    assert (READ.get(plain.pk).switch_thrown, READ.get(full.pk).switch_thrown) == (False, True)


def test_a_row_the_filter_leaves_out_is_none(transactional_db):
    user = get_user_model().objects.create_user("reader")
    execution = _execution(user, "monthly_report")
    assert READ.get(execution.pk + 1000) is None
    Execution.objects.filter(pk=execution.pk).update(status=Status.COMPLETED)
    assert READ.get(execution.pk) is None


def test_a_read_that_does_not_take_exactly_one_id_is_refused(transactional_db):
    with pytest.raises(ValueError, match="each of its arguments exactly once"):
        CompiledRead(lambda pk: Execution.objects.filter(Q(pk=pk) | Q(parent_id=pk))).get(1)


def _run(execution: Execution, step: str, output: dict, outcome: str = StepRun.Outcome.SUCCEEDED, round: int = 1):
    StepRun.objects.create(
        execution=execution,
        step=step,
        kind="compute",
        round=round,
        outcome=outcome,
        output=output,
        lease_token=0,
        workflow_version=execution.workflow_version,
        started_at=timezone.now(),
    )


def test_outputs_are_the_latest_succeeded_run_of_each_step_over_what_was_carried(transactional_db):
    user = get_user_model().objects.create_user("reader")
    legacy = _execution(user, "monthly_report")
    legacy.context = {**legacy.context, "state": {"retrieve": {"rows": 1}, "analyze": {"v": 1}}}
    legacy.save()
    carried = _execution(user, "monthly_report")
    carried.context = {**carried.context, "carried": {"retrieve": {"rows": 2}}}
    carried.save()
    for execution in (legacy, carried):
        _run(execution, "analyze", {"v": 2})
        _run(execution, "draft", {"failed": True}, outcome=StepRun.Outcome.FAILED)  # never an output
        _run(execution, "analyze", {"v": 3}, round=2)  # changes requested: the later round's run wins
    expected = {
        legacy.pk: {"retrieve": {"rows": 1}, "analyze": {"v": 3}},
        carried.pk: {"retrieve": {"rows": 2}, "analyze": {"v": 3}},
    }
    for execution in (legacy, carried):
        read_lazily = Execution.objects.get(pk=execution.pk).outputs()
        Execution.objects.filter(pk=execution.pk).update(status=Status.RUNNING)
        claimed = leases._CLAIMABLE.get(execution.pk)
        assert "succeeded_outputs" in claimed.__dict__  # brought by the claim's read on PostgreSQL
        assert read_lazily == claimed.outputs() == expected[execution.pk]
        _run(claimed, "draft", {"d": 1}, round=2)
        assert "draft" not in claimed.outputs()  # read once per instance…
        claimed.refresh_from_db()
        assert claimed.outputs()["draft"] == {"d": 1}  # …and again when the row is


def test_a_checkpoint_keeps_the_outputs_in_the_step_runs_only(transactional_db):
    from tests.integration.test_cost_floor import pending

    user = get_user_model().objects.create_user("reader")
    execution = pending(user, "bench_noop5")
    assert runner.advance(execution.pk, worker="worker:test-outputs") == "stopped"
    execution.refresh_from_db()
    assert execution.status == Status.COMPLETED
    assert "state" not in execution.context and "carried" not in execution.context
    assert execution.outputs() == {f"step{n}": {"i": n} for n in range(1, 6)}
    assert execution.context["notes"]["completed_steps"] == [f"step{n}" for n in range(1, 6)]


def test_a_compiled_values_read_takes_several_arguments_and_gives_the_tuple(transactional_db):
    """An approval gate's visit reads its request and decision this way (approvals.gate)."""
    user = get_user_model().objects.create_user("reader")
    first, second = _execution(user, "monthly_report"), _execution(user, "monthly_report")
    _run(second, "analyze", {"v": 1}, round=2)

    def build(execution_id, step, round):
        return StepRun.objects.filter(execution_id=execution_id, step=step, round=round).values_list(
            "execution__workflow", "output", "round"
        )

    read = CompiledRead(build, args=(int, str, int))
    assert (
        read.get(second.pk, "analyze", 2) == build(second.pk, "analyze", 2).first() == ("monthly_report", {"v": 1}, 2)
    )
    assert read.get(second.pk, "analyze", 1) is None and read.get(first.pk, "analyze", 2) is None


def test_a_statement_prepared_before_a_migration_is_prepared_again(transactional_db, caplog):
    """A worker that kept running across a deploy: its prepared claim read returns a column
    whose type a migration changed ("cached plan must not change result type"). The read
    lets go of its prepared statements and goes through, outside a transaction."""
    user = get_user_model().objects.create_user("reader")
    execution = _execution(user, "monthly_report")
    for _ in range(6):  # past psycopg's prepare_threshold: the read is prepared on this connection
        assert leases._CLAIMABLE.get(execution.pk).pk == execution.pk
    alter = "ALTER TABLE executions_execution ALTER COLUMN paused_from TYPE {}"
    settings = connection.settings_dict
    dsn = f"postgres://{settings['USER']}@{settings['HOST']}:{settings['PORT']}/{settings['NAME']}"
    with psycopg.connect(dsn, autocommit=True) as migrate:  # the deploy's own connection, not the worker's
        migrate.execute(alter.format("text"))
        try:
            assert leases._CLAIMABLE.get(execution.pk).pk == execution.pk
            assert "a prepared statement outlived a change of its table" in caplog.text  # it did fail first
        finally:
            migrate.execute(alter.format("varchar(30)"))
    assert leases._CLAIMABLE.get(execution.pk).pk == execution.pk  # and back


def test_a_value_too_long_for_its_column_is_refused_not_cut(transactional_db):
    """The fenced writer types its INSERT ... SELECT parameters without their length, so a
    value too long is refused as the ORM refuses it, never silently truncated."""
    from django.db import DataError

    from executions.engine import lifecycle, writer

    user = get_user_model().objects.create_user("reader")
    execution = _execution(user, "monthly_report")
    event = lifecycle.event(execution, "note", actor_label="x" * 201)
    with pytest.raises(DataError):
        writer.write({"round": 1}, {"pk": execution.pk}, [event])
    assert not execution.events.exists()
