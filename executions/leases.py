"""Ownership of an execution by one worker: lease, heartbeat, fencing token.

A worker owns an execution while ``lease_expires_at`` (compared with the database
clock) is in the future. Each acquisition increments ``lease_token``; every write the
worker makes happens in a transaction whose first statement is ``fence`` — an UPDATE
conditional on that token — so a worker that lost its lease can't commit anything.
"""

from __future__ import annotations

import contextvars
import logging
import threading
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.db import connection, transaction
from django.db.models import DateTimeField, ExpressionWrapper, F, Q, Value
from django.db.models.functions import Now

from . import lifecycle
from .models import Execution, Status

log = logging.getLogger(__name__)


class LeaseLost(Exception):
    """This worker's token is no longer the execution's token: stop, write nothing."""


@dataclass(frozen=True)
class Lease:
    execution_id: int
    token: int
    owner: str


def _expiry() -> ExpressionWrapper:
    seconds = settings.RUNTIME_LEASE_SECONDS
    return ExpressionWrapper(Now() + Value(timedelta(seconds=seconds)), output_field=DateTimeField())


def in_seconds(seconds: float | None) -> ExpressionWrapper | None:
    """``now() + seconds`` on the database clock (None for None)."""
    if seconds is None:
        return None
    return ExpressionWrapper(Now() + Value(timedelta(seconds=seconds)), output_field=DateTimeField())


def step_deadline(execution: Execution, step: str) -> ExpressionWrapper | None:
    """When the attempt at ``step`` that starts now must be done by (its timeout)."""
    from . import registry

    try:
        return in_seconds(registry.get(execution.workflow, execution.workflow_version).timeout_for(step))
    except registry.UnknownWorkflow:
        return None


def _free() -> Q:
    return Q(lease_expires_at__isnull=True) | Q(lease_expires_at__lt=Now())


CLAIM_TRANSITION = {
    Status.PENDING: "start",
    Status.RETRY_PENDING: "retry",
    Status.WAITING: "wake",
}


def acquire(execution_id: int, *, owner: str) -> Lease | None:
    """Take the execution if it is runnable and nobody holds a live lease on it.

    Returns None when it is locked by another claimer, not runnable, not yet due,
    or leased. A takeover of an expired lease is a lease change recorded as an
    event, not a transition. Commits once.
    """
    with transaction.atomic():
        row = (
            Execution.objects.select_for_update(skip_locked=True, no_key=True)
            .filter(pk=execution_id, status__in=[Status.RUNNING, *CLAIM_TRANSITION])
            .first()
        )
        if row is None:
            return None
        waiting = row.status in (Status.RETRY_PENDING, Status.WAITING)
        if waiting and not Execution.objects.filter(pk=row.pk, due_at__lte=Now()).exists():
            return None
        won = Execution.objects.filter(_free(), pk=row.pk, lease_token=row.lease_token).update(
            lease_token=F("lease_token") + 1,
            lease_owner=owner,
            lease_expires_at=_expiry(),
            step_deadline=step_deadline(row, row.current_step),
        )
        if not won:
            return None
        lease = Lease(execution_id=row.pk, token=row.lease_token + 1, owner=owner)
        if row.lease_owner:
            lifecycle.record(
                row,
                "lease.taken_over",
                step=row.current_step,
                actor_label=owner,
                payload={"previous_owner": row.lease_owner, "token": lease.token},
            )
        if row.status in CLAIM_TRANSITION:
            lifecycle.apply(row, CLAIM_TRANSITION[row.status], actor_label=owner, payload={"token": lease.token})
        return lease


def fence(lease: Lease) -> None:
    """First statement of every worker transaction: prove ownership and extend the lease.

    On PostgreSQL the UPDATE also holds the row lock until commit. Raises LeaseLost.
    """
    if not Execution.objects.filter(pk=lease.execution_id, lease_token=lease.token, lease_owner=lease.owner).update(
        lease_expires_at=_expiry()
    ):
        raise LeaseLost(f"lease token {lease.token} on execution {lease.execution_id} is no longer valid")


def release(lease: Lease) -> None:
    """Give the lease up (inside the caller's fenced transaction). Later fences with it fail."""
    Execution.objects.filter(pk=lease.execution_id, lease_token=lease.token).update(
        lease_owner="", lease_expires_at=None
    )


class Heartbeat:
    """Extends the lease every third of its length while a slice runs.

    Runs in its own thread (with its own database connection). If the lease is lost,
    ``lost`` is set; the next fenced write refuses anyway.
    """

    def __init__(self, lease: Lease) -> None:
        self.lease = lease
        self.lost = threading.Event()
        self._stop = threading.Event()
        # In a copy of the starter's context: its log lines name the slice (executions.logcontext).
        self._thread = threading.Thread(
            target=contextvars.copy_context().run,
            args=(self._run,),
            name=f"heartbeat-{lease.execution_id}",
            daemon=True,
        )

    def __enter__(self) -> Heartbeat:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _run(self) -> None:
        interval = max(0.5, settings.RUNTIME_LEASE_SECONDS / 3)
        try:
            while not self._stop.wait(interval):
                try:
                    with transaction.atomic():
                        fence(self.lease)
                except LeaseLost:  # taken over, or released by the slice that is ending
                    log.info("heartbeat: lease on execution %s is gone", self.lease.execution_id)
                    self.lost.set()
                    return
                except Exception:  # a transient database error: the next beat tries again
                    log.exception("heartbeat failed for execution %s", self.lease.execution_id)
        finally:
            connection.close()
