"""The control tasks beat sends (the sweep, the metrics fold) have a queue of their own,
so they never wait behind steps; and every worker command we ship or document consumes
every queue a task is routed to, so beat never sends to a queue nobody consumes."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest
from django.conf import settings

from config.celery import app
from tests.support import procs

ROOT = Path(__file__).resolve().parents[2]


def finalized():
    app.loader.import_default_modules()
    app.finalize()
    return app


def queue_of(task: str) -> str:
    return finalized().amqp.router.route({}, task)["queue"].name


def defined_queues() -> set[str]:
    return {queue.name for queue in settings.CELERY_TASK_QUEUES}


def consumed(command: str) -> set[str]:
    """The queues ``celery -A config worker …`` consumes, as Celery reads its -Q (all
    defined queues without one)."""
    args = shlex.split(command)
    for i, arg in enumerate(args):
        if arg in ("-Q", "--queues"):
            return set(args[i + 1].split(","))
        if arg.startswith("--queues="):
            return set(arg.split("=", 1)[1].split(","))
        if arg.startswith("-Q") and len(arg) > 2:
            return set(arg[2:].split(","))
    return defined_queues()


def routed() -> set[str]:
    """Every queue a task of ours, or an entry of beat's schedule, is sent to."""
    ours = [name for name in finalized().tasks if not name.startswith("celery.")]
    scheduled = [entry["task"] for entry in finalized().conf.beat_schedule.values()]
    return {queue_of(task) for task in {*ours, *scheduled}}


# The routes docs/operations.md ("Many machines") and Procfile.fleet document.
DOCUMENTED_QUEUES = {"agents": ["kind:model", "kind:agent"], "effects": ["kind:effect"]}


def documented_worker_commands() -> list[str]:
    """Every ``celery -A config worker`` command line in the Procfiles and docs/operations.md."""
    found = []
    for path in (ROOT / "Procfile", ROOT / "Procfile.fleet", ROOT / "docs" / "operations.md"):
        for match in re.finditer(r"celery -A config worker[^`#\n]*", path.read_text()):
            found.append((path.name, match.group(0).strip()))
    return found


def test_the_control_tasks_have_their_own_queue_and_steps_the_default_one():
    assert queue_of("executions.sweep") == queue_of("metrics.fold") == "control"
    assert queue_of("executions.advance") == settings.CELERY_TASK_DEFAULT_QUEUE == "celery"
    assert defined_queues() == {"celery", "control"}
    schedule = {entry["task"]: entry for entry in finalized().conf.beat_schedule.values()}
    assert {queue_of(task) for task in schedule} == {"control"}


def test_a_worker_without_q_consumes_every_queue():
    assert consumed("celery -A config worker --loglevel=INFO") == routed() | {"celery", "control"}


@pytest.mark.parametrize("where, command", documented_worker_commands())
def test_every_shipped_or_documented_worker_consumes_queues_that_exist(where, command):
    queues = consumed(command)
    assert queues <= defined_queues() | set(DOCUMENTED_QUEUES), (where, command)


def test_the_shipped_procfile_worker_runs_steps_and_the_control_tasks():
    [command] = [c for name, c in documented_worker_commands() if name == "Procfile"]
    assert routed() <= consumed(command)


def test_the_fleet_layout_consumes_every_queue_its_routes_name(settings):
    settings.RUNTIME_QUEUES = DOCUMENTED_QUEUES
    from executions.engine import routing

    fleet = set().union(*(consumed(c) for name, c in documented_worker_commands() if name == "Procfile.fleet"))
    assert set(routing.routed_queues()) <= fleet and routed() <= fleet
    assert json.loads(re.search(r"RUNTIME_QUEUES='([^']+)'", (ROOT / "Procfile.fleet").read_text()).group(1)) == (
        DOCUMENTED_QUEUES
    )
    assert json.dumps(DOCUMENTED_QUEUES) in (ROOT / "docs" / "operations.md").read_text()


def test_the_documented_commands_include_the_procfiles_and_a_production_worker():
    where = {name for name, _ in documented_worker_commands()}
    assert where == {"Procfile", "Procfile.fleet", "operations.md"}


def test_the_test_stacks_and_the_chaos_run_consume_every_queue():
    # tests/support/procs.py starts every worker of the tests and of scripts/chaos.py with -Q WORKER_QUEUES.
    assert set(procs.WORKER_QUEUES.split(",")) == defined_queues() >= routed()
    assert "queues=" not in (ROOT / "scripts" / "chaos.py").read_text()  # its workers take the default
