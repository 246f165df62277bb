"""Leases, heartbeats, fencing and the sweeper, on real worker processes."""

from __future__ import annotations

import signal

import pytest
import redis
from django.conf import settings

from artifacts.models import ArtifactVersion
from config.celery import app
from executions.models import Execution, ExecutionEvent, Status, StepRun
from tests.support.procs import wait_for
from tests.support.stack import FOLD_DONE, pk


def status_of(ref: str) -> str:
    return Execution.objects.get(pk=pk(ref)).status


@pytest.mark.own_stack
def test_s15_message_lost_after_commit_sweeper_redispatches(stack, people, api_as):
    """S15: the Celery message is lost after commit (broker down or flushed)."""
    stack.up(beat=False, workers=0)
    ref = api_as(people["requester"]).start()["id"]
    redis.Redis.from_url(settings.CELERY_BROKER_URL).flushdb()  # the doorbell message is gone
    worker = stack.worker()
    # Nothing is queued for it, and it is consuming: a metrics fold sent now runs to its end.
    assert not redis.Redis.from_url(settings.CELERY_BROKER_URL).llen("celery")
    folded = worker.count(FOLD_DONE)
    app.send_task("metrics.fold")
    wait_for(lambda: worker.count(FOLD_DONE) > folded, timeout=30, what="the worker to run a fold")
    assert status_of(ref) == Status.PENDING  # nobody knows about it: no beat, no message

    stack.beat()
    wait_for(lambda: status_of(ref) == Status.AWAITING_APPROVAL, timeout=30, what="the sweeper to re-dispatch")
    assert StepRun.objects.filter(execution_id=pk(ref), outcome="succeeded").count() == 3


@pytest.mark.own_stack
def test_heartbeat_keeps_the_lease_through_a_long_step(stack, people, api_as):
    """A step longer than the lease (5 s vs 3 s) keeps its lease: no takeover, no rerun."""
    stack.up(workers=("slow",), worker_env={"RUNTIME_FAILPOINTS": "before_step:analyze=sleep:5"})
    ref = api_as(people["requester"]).start()["id"]
    wait_for(lambda: stack.failpoint_reached("before_step:analyze"), what="the slow step to start")
    stack.worker("eager")  # ready to take over if the lease ever lapsed
    wait_for(lambda: status_of(ref) == Status.AWAITING_APPROVAL, timeout=40, what="awaiting approval")
    assert not ExecutionEvent.objects.filter(execution_id=pk(ref), type="lease.taken_over").exists()
    runs = StepRun.objects.filter(execution_id=pk(ref))
    assert [r.step for r in runs] == ["retrieve_figures", "analyze", "draft_report"]
    assert runs.get(step="analyze").worker == runs.get(step="retrieve_figures").worker  # same lease held


@pytest.mark.own_stack
def test_s14_paused_worker_loses_its_lease_and_cannot_commit(stack, people, api_as):
    """S14: SIGSTOP a worker mid-step past its lease; another takes over; SIGCONT: fenced out."""
    paused = stack.up(workers=("paused",), worker_env={"RUNTIME_FAILPOINTS": "before_step:draft_report=sleep:2"}).worker
    ref = api_as(people["requester"]).start()["id"]
    wait_for(lambda: stack.failpoint_reached("before_step:draft_report"), what="the worker to reach draft_report")
    paused.popen.send_signal(signal.SIGSTOP)  # a GC pause, a partition, a frozen VM
    first_token = Execution.objects.get(pk=pk(ref)).lease_token

    stack.worker("successor")
    wait_for(lambda: status_of(ref) == Status.AWAITING_APPROVAL, timeout=40, what="the successor to finish drafting")
    paused.popen.send_signal(signal.SIGCONT)
    wait_for(lambda: "'lease lost'" in paused.output(), timeout=30, what="the paused worker to wake and be refused")

    drafts = StepRun.objects.filter(execution_id=pk(ref), step="draft_report")
    assert drafts.count() == 1 and drafts.get().lease_token > first_token
    assert not StepRun.objects.filter(execution_id=pk(ref), lease_token=first_token, step="draft_report").exists()
    assert ArtifactVersion.objects.filter(artifact__execution_id=pk(ref)).count() == 1
    assert status_of(ref) == Status.AWAITING_APPROVAL


def test_deadline_stops_executions_waiting_past_it(people, transactional_db):
    """The sweeper fails a retry that would come after the deadline and flags a wait."""
    from datetime import timedelta

    from django.db import transaction
    from django.utils import timezone

    from executions.engine import lifecycle
    from executions.engine.sweeper import sweep

    def execution_in(*transitions):
        execution = Execution.objects.create(
            workflow="monthly_report",
            workflow_version=1,
            input={"month": "2026-08"},
            input_digest="d",
            created_by=people["requester"].user,
            current_step="publish",
            deadline=timezone.now() - timedelta(seconds=1),
            due_at=timezone.now() + timedelta(hours=1),
        )
        with transaction.atomic():
            for name in transitions:
                execution = Execution.objects.get(pk=execution.pk)
                lifecycle.apply(execution, name)
        return execution

    retrying = execution_in("start", "schedule_retry")
    waiting = execution_in("start", "wait")
    report = sweep()
    assert set(report.past_deadline) == {retrying.pk, waiting.pk}
    assert Execution.objects.get(pk=retrying.pk).status == Status.FAILED
    assert "deadline" in Execution.objects.get(pk=retrying.pk).status_reason
    assert Execution.objects.get(pk=waiting.pk).status == Status.NEEDS_ATTENTION
    assert sweep().past_deadline == ()  # nothing left to stop
