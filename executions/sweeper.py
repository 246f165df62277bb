"""The sweeper (Celery beat, every ``RUNTIME_SWEEP_SECONDS``): re-rings the doorbell.

It runs every gate's sweep hook (approvals expire, waits time out; executions.gates),
fails or flags executions waiting past their deadline, and dispatches executions that
are runnable but that nobody works on:
pending or running with no live lease (lost message, dead worker), and retry/wait
timers that came due. A dispatch is repeated only after ``redispatch_after`` seconds, so a busy
queue isn't flooded; duplicates are harmless anyway (the lease decides).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import DateTimeField, ExpressionWrapper, Q, Value
from django.db.models.functions import Now

from . import dispatch, gates, lifecycle
from .models import Execution, Status

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SweepReport:
    dispatched: tuple[int, ...]
    past_deadline: tuple[int, ...] = ()
    closed_by_gates: dict[str, list[int]] | None = None  # gate kind → what its sweep closed


def redispatch_after() -> timedelta:
    return timedelta(seconds=max(2 * settings.RUNTIME_SWEEP_SECONDS, 2))


def sweep() -> SweepReport:
    since = ExpressionWrapper(Now() - Value(redispatch_after()), output_field=DateTimeField())
    not_recently = Q(dispatched_at__isnull=True) | Q(dispatched_at__lt=since)
    unowned = Q(lease_expires_at__isnull=True) | Q(lease_expires_at__lt=Now())
    runnable = Q(status__in=[Status.PENDING, Status.RUNNING]) & unowned
    due = Q(status__in=[Status.RETRY_PENDING, Status.WAITING], due_at__lte=Now())
    candidates = list(Execution.objects.filter(runnable | due).filter(not_recently).values_list("pk", flat=True)[:500])
    dispatched = []
    for pk in candidates:
        # Claim the right to re-ring so two sweepers don't both send.
        if Execution.objects.filter(not_recently, pk=pk).update(dispatched_at=Now()):
            dispatch.send(pk)
            dispatched.append(pk)
    if dispatched:
        log.info("sweeper re-dispatched %d execution(s): %s", len(dispatched), dispatched)
    return SweepReport(
        dispatched=tuple(dispatched), past_deadline=_enforce_deadlines(), closed_by_gates=gates.sweep_all()
    )


# What a deadline does to an execution nobody is running: (status, transition).
DEADLINE = {Status.RETRY_PENDING: "fail", Status.WAITING: "flag"}


def _enforce_deadlines() -> tuple[int, ...]:
    """Executions waiting (for a retry or an event) past their deadline stop waiting."""
    stopped = []
    for pk in Execution.objects.filter(status__in=list(DEADLINE), deadline__lte=Now()).values_list("pk", flat=True)[
        :500
    ]:
        with transaction.atomic():
            execution = (
                Execution.objects.select_for_update(no_key=True).filter(pk=pk, status__in=list(DEADLINE)).first()
            )
            if execution is None:
                continue
            lifecycle.apply(
                execution,
                DEADLINE[execution.status],
                actor_label="sweeper",
                reason=f"deadline {execution.deadline:%Y-%m-%d %H:%M:%S} UTC passed while {execution.status}",
                code="deadline_passed",
            )
        stopped.append(pk)
    return tuple(stopped)
