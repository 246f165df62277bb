"""The sweeper (Celery beat, every ``RUNTIME_SWEEP_SECONDS``): re-rings the doorbell.

It dispatches executions that are runnable but that nobody works on (pending or
running with no live lease: a lost message, a dead worker; retry and wait timers
that came due), fails or flags executions waiting past their deadline and runs
every gate's sweep hook (approvals expire, waits time out; executions.engine.gates).
``flag_unheld`` (its own beat task, every ``RUNTIME_UNHELD_SECONDS``, 60) is the safety
net under "nothing hangs without a reason": a parked execution that no gate holds and
no timer wakes needs attention, with a sentence saying so.
Each execution is rung on its own queue (``executions.engine.routing``).
A dispatch is repeated only after ``redispatch_after`` seconds, so a busy queue isn't
flooded; duplicates are harmless anyway (the lease decides). It rings the doorbell
and nothing else: what the screens count is their own (triage's tally).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import DateTimeField, Exists, ExpressionWrapper, OuterRef, Q, Value
from django.db.models.functions import Now

from ..models import Action, Execution, Status
from ..reasons import StuckReason
from . import dispatch, gates, ledger, lifecycle, routing

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SweepReport:
    dispatched: tuple[int, ...]
    past_deadline: tuple[int, ...] = ()
    closed_by_gates: dict[str, list[int]] | None = None  # gate kind → what its sweep closed


def redispatch_after() -> timedelta:
    return timedelta(seconds=max(2 * settings.RUNTIME_SWEEP_SECONDS, 2))


BATCH = 500


def _not_recently() -> Q:
    since = ExpressionWrapper(Now() - Value(redispatch_after()), output_field=DateTimeField())
    return Q(dispatched_at__isnull=True) | Q(dispatched_at__lt=since)


def candidates_query():
    """Runnable executions nobody works on and not rung for recently: pending or running
    without a live lease, and retries (or timers) that came due. Unordered, so the
    planner reads the (status, lease_expires_at) and (status, due_at) indexes instead of
    walking the primary key."""
    unowned = Q(lease_expires_at__isnull=True) | Q(lease_expires_at__lt=Now())
    runnable = Q(status__in=[Status.PENDING, Status.RUNNING]) & unowned
    due = Q(status__in=[Status.RETRY_PENDING, Status.WAITING], due_at__lte=Now())
    return Execution.objects.filter(runnable | due).filter(_not_recently()).order_by().values_list("pk", flat=True)


def sweep() -> SweepReport:
    # Claim the right to re-ring in one statement (locked rows skipped), so two sweepers
    # never both send for the same execution; send once the claim is committed.
    # Each on its own queue (routing), read with the claim.
    with transaction.atomic():
        claimed = list(
            candidates_query()
            .values_list("pk", "workflow", "workflow_version", "current_step")
            .select_for_update(skip_locked=True, no_key=True)[:BATCH]
        )
        dispatched = [row[0] for row in claimed]
        if dispatched:
            Execution.objects.filter(pk__in=dispatched).update(dispatched_at=Now())
    for pk, workflow, version, step in claimed:
        dispatch.send(pk, queue=routing.queue_for(workflow, version, step))
    if dispatched:
        shown = ", ".join(map(str, dispatched[:10])) + (" …" if len(dispatched) > 10 else "")
        log.info("sweeper re-dispatched %d execution(s): %s", len(dispatched), shown)
    return SweepReport(
        dispatched=tuple(dispatched), past_deadline=_enforce_deadlines(), closed_by_gates=gates.sweep_all()
    )


# What a deadline does to an execution nobody is running: (status, transition).
DEADLINE = {Status.RETRY_PENDING: "fail", Status.WAITING: "flag"}


def past_deadline_query():
    """Executions waiting past their deadline that the sweeper still has to stop: every one
    but a retry already due with an action of its step in doubt, which its worker stops
    (``runner._stop_at_deadline``), so a queue nobody consumes never fills the batch."""
    in_doubt = Action.objects.filter(
        execution=OuterRef("pk"),
        step=OuterRef("current_step"),
        beside=False,
        status__in=ledger.IN_DOUBT,
    )
    handed_over = Q(status=Status.RETRY_PENDING, due_at__lte=Now()) & Q(Exists(in_doubt))
    return Execution.objects.filter(status__in=list(DEADLINE), deadline__lte=Now()).exclude(handed_over).order_by()


def _enforce_deadlines() -> tuple[int, ...]:
    """Executions waiting (for a retry or an event) past their deadline stop waiting."""
    stopped = []
    for pk in past_deadline_query().values_list("pk", flat=True)[:BATCH]:
        with transaction.atomic():
            execution = (
                Execution.objects.select_for_update(no_key=True).filter(pk=pk, status__in=list(DEADLINE)).first()
            )
            if execution is None:
                continue
            if execution.status == Status.RETRY_PENDING and ledger.in_flight(execution, execution.current_step):
                # The retry would reconcile an action that may have acted: not failed here. Due
                # now, the worker that claims it stops at the deadline for a person to establish
                # the outcome first (runner._stop_at_deadline: unknown_outcome).
                later = Execution.objects.filter(pk=pk).filter(Q(due_at__isnull=True) | Q(due_at__gt=Now()))
                if later.update(due_at=Now()):  # once: then the sweeper's dispatch rings it while it is due
                    there = routing.queue_for(execution.workflow, execution.workflow_version, execution.current_step)
                    dispatch.dispatch_on_commit(execution.pk, queue=there)
                continue
            lifecycle.apply(
                execution,
                DEADLINE[execution.status],
                actor_label="sweeper",
                reason=f"deadline {execution.deadline:%Y-%m-%d %H:%M:%S} UTC passed while {execution.status}",
                code=StuckReason.DEADLINE_PASSED,
            )
        stopped.append(pk)
    return tuple(stopped)


# Where an execution waits for something outside a worker (a gate holds it, or a timer).
PARKED = (Status.WAITING, Status.AWAITING_APPROVAL)


def unheld_query():
    """Parked executions (``PARKED``, no ``due_at``) that no gate holds (``gates.held``: no
    pending approval request, no open wait, no child at the current step) for longer
    than a re-dispatch interval: nothing would ever wake them. Unordered: the planner
    reads the (status, due_at) index and anti-joins each gate's few open rows."""
    since = ExpressionWrapper(Now() - Value(redispatch_after()), output_field=DateTimeField())
    return (
        Execution.objects.filter(status__in=PARKED, due_at__isnull=True, status_changed_at__lt=since)
        .exclude(gates.held())
        .order_by()
    )


def flag_unheld() -> tuple[int, ...]:
    """Every non-terminal execution has a live lease, a due time or a stuck reason: the
    ones ``unheld_query`` finds get one (needs_attention ``step_error``, one transition each,
    re-checked under the row's lock). A resume visits the step again."""
    flagged = []
    for pk in unheld_query().values_list("pk", flat=True)[:BATCH]:
        with transaction.atomic():
            execution = unheld_query().select_for_update(no_key=True).filter(pk=pk).first()
            if execution is None:
                continue
            waiting_for = (
                "an approval" if execution.status == Status.AWAITING_APPROVAL else "a signal, a timer or a child"
            )
            lifecycle.apply(
                execution,
                "flag",
                actor_label="sweeper",
                reason=(
                    f"{execution.status} at {execution.current_step} with nothing to wait for: no {waiting_for} "
                    "is open and no timer would wake it; resume to visit the step again, or cancel"
                ),
                code=StuckReason.STEP_ERROR,
                step=execution.current_step,
            )
        flagged.append(pk)
    if flagged:
        log.warning("flagged %d parked execution(s) nothing holds: %s", len(flagged), flagged[:10])
    return tuple(flagged)
