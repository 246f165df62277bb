"""Ownership of an execution by one worker: lease, heartbeat, fencing token.

A worker owns an execution while ``lease_expires_at`` (compared with the database
clock) is in the future. Each acquisition increments ``lease_token``, and every write
the worker makes is conditional on it, so a worker that lost its lease can't commit
anything: either the write is itself the fenced UPDATE (the claim, a checkpoint, the
completion: ``fence_conditions`` in its WHERE, through the fenced writer), or it runs
in a transaction whose first statement is ``fence`` — an UPDATE conditional on the
token, which on PostgreSQL also holds the row lock until commit (the ledger's writes,
a model call's journal row, a failed step, parking at a gate).

The lease fields (``lease_token``, ``lease_owner``, ``lease_expires_at``) are written
here and nowhere else: the claim takes them, ``fence`` and the heartbeat extend them,
``release`` and ``given_back`` give them back.
"""

from __future__ import annotations

import contextvars
import logging
import os
import socket
import threading
import time
import uuid
from dataclasses import dataclass, field
from datetime import timedelta
from functools import cache, lru_cache

from django.conf import settings
from django.db import connection, transaction
from django.db.models import DateTimeField, ExpressionWrapper, JSONField, Q, QuerySet, Value
from django.db.models.expressions import RawSQL
from django.db.models.functions import Now

from ..models import Execution, Status, StepRun
from . import lifecycle, pauses, routing, writer
from .compiled import CompiledRead

log = logging.getLogger(__name__)


@cache
def worker_identity() -> str:
    """Who holds a lease: host, pid and a per-process nonce (pids are reused)."""
    return f"worker:{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"


class LeaseLost(Exception):
    """This worker's token is no longer the execution's token: stop, write nothing."""


class Misrouted(Exception):
    """The execution's current step rings on ``queue``, which this worker doesn't consume
    (a message left on another queue, e.g. a sweep's re-dispatch before the step moved
    on): nothing was claimed; the caller rings the right queue."""

    def __init__(self, queue: str) -> None:
        super().__init__(f"its step rings on the queue {queue!r}, which this worker doesn't consume")
        self.queue = queue


@dataclass(frozen=True)
class Lease:
    execution_id: int
    token: int
    owner: str
    # Set on a takeover from a worker whose step ran past its timeout: that worker.
    overran_by: str = ""
    # The row as the claim left it (annotated with ``db_now`` and its workflow's kill switch,
    # ``switch_thrown``: executions.engine.pauses), for the slice to start from.
    row: Execution | None = field(default=None, compare=False, repr=False)


def _expiry() -> ExpressionWrapper:
    return in_seconds(settings.RUNTIME_LEASE_SECONDS)


def in_seconds(seconds: float | None) -> ExpressionWrapper | None:
    """``now() + seconds`` on the database clock (None for None). One expression object
    per number of seconds (expressions are never changed once built), so the fenced
    writer knows a statement's shape again (executions.engine.writer)."""
    return None if seconds is None else _now_plus(seconds)


@lru_cache(maxsize=256)
def _now_plus(seconds: float) -> ExpressionWrapper:
    return ExpressionWrapper(Now() + Value(timedelta(seconds=seconds)), output_field=DateTimeField())


def step_deadline(execution: Execution, step: str) -> ExpressionWrapper | None:
    """When the attempt at ``step`` that starts now must be done by (its timeout)."""
    from ..authoring import registry

    try:
        return in_seconds(registry.get(execution.workflow, execution.workflow_version).timeout_for(step))
    except registry.UnknownWorkflow:
        return None


CLAIM_TRANSITION = {
    Status.PENDING: "start",
    Status.RETRY_PENDING: "retry",
    Status.WAITING: "wake",
}


def acquire(execution_id: int, *, owner: str, queues: frozenset[str] | None = None) -> Lease | None:
    """Take the execution if it is runnable and nobody holds a live lease on it.

    Returns None when another claimer has it, or it is not runnable, not yet due, or
    leased. A takeover of an expired lease is a lease change recorded as an event, not
    a transition. The lease carries the row, so the slice starts without reading it
    again. Given the ``queues`` the worker consumes (with routes configured), an
    execution whose current step rings elsewhere is left alone: ``Misrouted``.

    Two statements, each its own round trip, one commit: the row read with the database
    clock and its workflow's kill switch (no lock: a read takes no transaction id), then
    the lease — and the claim's transition, checked by django-fsm — written with its
    events, fenced on what the decision was made from: the lease token and expiry, the
    status, the step and the round as read (the fenced writer, executions.engine.writer:
    on PostgreSQL one statement; elsewhere the ORM writes the same rows in one
    transaction). Two claimers that read the same row both try the write; the second
    waits for the first's commit, finds the token moved on and writes nothing.
    """
    return _claim(execution_id, owner=owner, queues=queues)


def _claim(execution_id: int, *, owner: str, queues: frozenset[str] | None) -> Lease | None:
    row = _CLAIMABLE.get(execution_id)
    if row is None:
        return None
    if row.status == Status.PENDING and row.switch_thrown:
        return None  # its workflow's kill switch is thrown: it waits, pending (executions.engine.pauses)
    waiting = row.status in (Status.RETRY_PENDING, Status.WAITING)
    if waiting and not (row.due_at is not None and row.due_at <= row.db_now):
        return None
    if row.lease_expires_at is not None and row.lease_expires_at >= row.db_now:
        return None  # somebody holds a live lease (a heartbeat since the read moves the expiry: the fence refuses)
    if queues is not None and routing.routes():
        there = routing.queue_for(row.workflow, row.workflow_version, row.current_step)
        if there not in queues:
            raise Misrouted(there)
    read = {
        "pk": row.pk,
        "lease_token": row.lease_token,
        "lease_expires_at": row.lease_expires_at,
        "current_step": row.current_step,
        "round": row.round,
    }
    previous = row.lease_owner
    overran = (
        row.status == Status.RUNNING and previous and row.step_deadline is not None and row.step_deadline < row.db_now
    )
    row.lease_token += 1
    row.lease_owner = owner
    row.lease_expires_at = _expiry()
    row.step_deadline = step_deadline(row, row.current_step)
    lease = Lease(
        execution_id=row.pk, token=row.lease_token, owner=owner, overran_by=previous if overran else "", row=row
    )
    taken_over = (
        lifecycle.event(
            row,
            "lease.taken_over",
            step=row.current_step,
            actor_label=owner,
            payload={"previous_owner": previous, "token": lease.token},
        )
        if previous
        else None
    )
    try:
        if row.status in CLAIM_TRANSITION:
            lifecycle.apply(
                row,
                CLAIM_TRANSITION[row.status],
                actor_label=owner,
                payload={"token": lease.token},
                update_fields=LEASE_FIELDS,
                where=read,
                with_rows=(taken_over,) if taken_over else (),
            )
        else:
            lease_values = {f: getattr(row, f) for f in LEASE_FIELDS}
            extra = [taken_over] if taken_over else []
            if writer.write(lease_values, {**read, "status": row.status}, extra) is None:
                return None
    except lifecycle.Fenced:
        return None  # the row moved on since it was read (another claimer won): nothing written
    return lease


def _claimable(pk: int) -> QuerySet[Execution]:
    """The claim's read: the row if it is in a status a claim takes, with the database clock,
    its workflow's kill switch and, on PostgreSQL, its steps' outputs (``Execution.outputs``:
    no second read when the slice starts)."""
    rows = Execution.objects.filter(pk=pk, status__in=[Status.RUNNING, *CLAIM_TRANSITION]).order_by()
    rows = rows.annotate(db_now=Now(), switch_thrown=pauses.switch_thrown_of_row())
    if connection.vendor == "postgresql":
        rows = rows.annotate(succeeded_outputs=_SUCCEEDED_OUTPUTS)
    return rows


# Each step's latest succeeded output, as one JSON object (PostgreSQL; the outer row is the execution's).
_SUCCEEDED_OUTPUTS = RawSQL(
    f"SELECT COALESCE(jsonb_object_agg(r.step, r.output ORDER BY r.id), '{{}}'::jsonb) "
    f'FROM "{StepRun._meta.db_table}" r WHERE r.execution_id = "{Execution._meta.db_table}"."id" '
    # After a migration to another version, only the runs since (Execution.succeeded_runs).
    f"""AND r.outcome = %s AND r.id > COALESCE(("{Execution._meta.db_table}"."context"->>'migrated_through')::bigint, 0)""",
    [StepRun.Outcome.SUCCEEDED],
    output_field=JSONField(),
)

_CLAIMABLE = CompiledRead(_claimable)  # compiled once per database (executions.engine.compiled)


LEASE_FIELDS = ("lease_token", "lease_owner", "lease_expires_at", "step_deadline")


# A fenced write found the row not as this worker left it (``diagnose`` says how).
Fenced = lifecycle.Fenced


def fence_conditions(lease: Lease, step: str | None = None, *, status: str = Status.RUNNING) -> dict:
    """The WHERE of a fenced write: our lease, running (or ``status``: ``paused`` for the
    checkpoint of a step a hold landed on), and (with ``step``) still at it."""
    conditions = {
        "pk": lease.execution_id,
        "lease_token": lease.token,
        "lease_owner": lease.owner,
        "status": status,
    }
    if step is not None:
        conditions["current_step"] = step
    return conditions


def checkpoint(lease: Lease, step: str, *, status: str = Status.RUNNING, **values) -> None:
    """One fenced UPDATE: write ``values`` only if the lease is ours and the execution
    still runs at ``step``. Raises Fenced otherwise. Without values it extends the lease
    (proving it before other writes).

    The lease is not extended with the values: the heartbeat does that every third of
    its length. So a checkpoint changes no indexed column (``lease_expires_at`` is in
    ``execution_status_lease``) and PostgreSQL can make it a HOT update: no index entry
    written, the old version pruned in place (the table's fillfactor leaves it room)."""
    if not Execution.objects.filter(**fence_conditions(lease, step, status=status)).update(
        **(values or {"lease_expires_at": _expiry()})
    ):
        raise Fenced(f"execution {lease.execution_id} is not running at {step} under token {lease.token}")


def diagnose(lease: Lease) -> Execution:
    """After Fenced: the row as it is. Raises LeaseLost if the lease is no longer ours."""
    current = Execution.objects.get(pk=lease.execution_id)
    if current.lease_token != lease.token or current.lease_owner != lease.owner:
        raise LeaseLost(f"lease token {lease.token} on execution {lease.execution_id} is no longer valid")
    return current


class ExecutionStopped(Exception):
    """The execution left ``running`` (cancelled, flagged) under the worker: stop quietly."""

    traced_as_error = False  # stopped from outside, by design (executions.engine.tracing)


def fenced_row(lease: Lease, *, running: bool = False, db_now: bool = False) -> Execution:
    """Inside the caller's transaction: ``fence`` the lease (LeaseLost if it isn't ours),
    then read the execution's row (the fence's UPDATE holds its lock on PostgreSQL). The
    one way a worker's transaction begins when it writes more than the fence.
    ``running``: ExecutionStopped unless it still runs. ``db_now``: the database clock
    read with it (``execution.db_now``)."""
    fence(lease)
    rows = Execution.objects.annotate(db_now=Now()) if db_now else Execution.objects
    execution = rows.get(pk=lease.execution_id)
    if running and execution.status != Status.RUNNING:
        raise ExecutionStopped(f"{execution.ref} is {execution.status}")
    return execution


def fence(lease: Lease, *, beat: bool = False) -> None:
    """First statement of every worker transaction: prove ownership and extend the lease.

    On PostgreSQL the UPDATE also holds the row lock until commit. Raises LeaseLost.
    ``beat``: the heartbeat's extension, which stops once the step in flight has run a
    lease's length past its timeout, or the execution's deadline passed: the lease
    then expires, another worker takes over, and the overrun counts as a failed
    attempt (the step is retried or flagged by its policy), never "running" forever.
    """
    mine = Execution.objects.filter(pk=lease.execution_id, lease_token=lease.token, lease_owner=lease.owner)
    if beat:
        grace = ExpressionWrapper(
            Now() - Value(timedelta(seconds=settings.RUNTIME_LEASE_SECONDS)), output_field=DateTimeField()
        )
        mine = mine.filter(Q(step_deadline__isnull=True) | Q(step_deadline__gt=grace))
        mine = mine.filter(Q(deadline__isnull=True) | Q(deadline__gt=Now()))
    if not mine.update(lease_expires_at=_expiry()):
        raise LeaseLost(f"lease token {lease.token} on execution {lease.execution_id} is no longer valid")


# A lease given back: nobody holds the execution (the token stays, so later fences fail).
RELEASED = {"lease_owner": "", "lease_expires_at": None}


def release(lease: Lease) -> None:
    """Give the lease up (inside the caller's fenced transaction). Later fences with it fail."""
    Execution.objects.filter(pk=lease.execution_id, lease_token=lease.token).update(**RELEASED)


def given_back(execution: Execution) -> tuple[str, ...]:
    """``execution`` (in memory) with its lease given back, for a fenced write that ends
    the slice with it (the last step's completion); returns the fields to save."""
    for name, value in RELEASED.items():
        setattr(execution, name, value)
    return tuple(RELEASED)


class Heartbeat:
    """Extends the lease every third of its length while a slice runs.

    Every slice of a process is beaten for by one thread (``_Beater``), started with the
    process's first slice and kept: a slice neither starts nor joins a thread (a short slice
    never beats at all). It beats on a database connection of its own, closed whenever no
    slice is in flight. A beat waits at most an interval for the row (an operator's
    transaction may hold it), so one slow beat never starves the others. If the lease is
    lost, ``lost`` is set; the next fenced write refuses anyway. A beat's log lines name
    the slice (executions.engine.logcontext), as the slice's own do."""

    def __init__(self, lease: Lease) -> None:
        self.lease = lease
        self.lost = threading.Event()
        self._context = contextvars.copy_context()

    def __enter__(self) -> Heartbeat:
        _beater().watch(self)
        return self

    def __exit__(self, *exc: object) -> None:
        _beater().unwatch(self)

    def beat(self) -> None:
        """One extension (on the beater's thread). Lost: ``lost`` set, no more beats."""
        self._context.run(self._beat)

    def _beat(self) -> None:
        try:
            with transaction.atomic():
                if connection.vendor == "postgresql":  # a row lock held elsewhere delays only this beat
                    with connection.cursor() as cursor:
                        cursor.execute(f"SET LOCAL statement_timeout = {int(_Beater.interval() * 1000)}")
                fence(self.lease, beat=True)
        except LeaseLost:  # taken over, overran, or released by the slice that is ending
            log.info("heartbeat: lease on execution %s is gone", self.lease.execution_id)
            self.lost.set()
            _beater().unwatch(self)
        except Exception:  # a transient database error, a timeout: a new connection, and the next beat tries again
            log.exception("heartbeat failed for execution %s", self.lease.execution_id)
            connection.close()


class _Beater:
    """The thread that beats for every slice in flight in this process, each every
    ``max(0.5, RUNTIME_LEASE_SECONDS / 3)`` seconds from its start."""

    def __init__(self) -> None:
        self.pid = os.getpid()
        self._changed = threading.Condition()
        self._due: dict[Heartbeat, float] = {}
        self.thread = threading.Thread(target=self._run, name="heartbeat", daemon=True)
        self.thread.start()

    @staticmethod
    def interval() -> float:
        return max(0.5, settings.RUNTIME_LEASE_SECONDS / 3)

    def watch(self, heartbeat: Heartbeat) -> None:
        with self._changed:
            self._due[heartbeat] = time.monotonic() + self.interval()
            self._changed.notify()

    def unwatch(self, heartbeat: Heartbeat) -> None:
        with self._changed:
            self._due.pop(heartbeat, None)
            self._changed.notify()  # with none left, the beater lets its connection go

    def _run(self) -> None:
        while True:
            try:
                self._round()
            except Exception:  # never let the thread die: every slice of the process depends on it
                log.exception("heartbeat: a round of beats failed; the next one tries again")
                time.sleep(0.1)

    def _round(self) -> None:
        """Wait until a slice is due and beat for it; with no slice in flight, close the connection first."""
        with self._changed:
            now = time.monotonic()
            due = [h for h, at in self._due.items() if at <= now]
            while not due and self._due:
                self._changed.wait(min(self._due.values()) - now)
                now = time.monotonic()
                due = [h for h, at in self._due.items() if at <= now]
            for heartbeat in due:
                self._due[heartbeat] = now + self.interval()
        if not due:  # nothing in flight: hold no connection while waiting for the next slice
            connection.close()
            with self._changed:
                while not self._due:
                    self._changed.wait()
            return
        for heartbeat in due:  # outside the lock: a slice may end (unwatch) meanwhile
            if heartbeat in self._due:
                heartbeat.beat()


_the_beater: _Beater | None = None
_beater_lock = threading.Lock()


def _beater() -> _Beater:
    """This process's beater, started again if its thread is gone (a forked child starts
    its own: threads don't survive a fork)."""
    global _the_beater
    if _the_beater is None or _the_beater.pid != os.getpid() or not _the_beater.thread.is_alive():
        with _beater_lock:
            if _the_beater is None or _the_beater.pid != os.getpid() or not _the_beater.thread.is_alive():
                _the_beater = _Beater()
    return _the_beater
