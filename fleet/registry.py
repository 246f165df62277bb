"""What the fleet looks like now, from the heartbeats: the workers (alive or stale, their
queues, what each holds), the queues something is routed to that no live worker
consumes, and the workers on a queue nothing is routed to (idle). docs/design.md §6, Workers.

A worker is alive while its last heartbeat is younger than ``RUNTIME_WORKER_STALE_SECONDS``
(three heartbeats by default) by the database clock and it didn't shut down; a worker
unseen for ``RUNTIME_WORKER_FORGET_SECONDS`` ages out of the list. Each row is one
process (issue 39, item 2): two processes with one node name are two workers, each
alive or stale on its own.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.conf import settings
from django.db.models import BooleanField, Case, DateTimeField, ExpressionWrapper, Q, Value, When
from django.db.models.functions import Now

from access import viewer
from executions import runtime
from executions.models import Execution, Status, ref_for

from .models import Worker


def _ago(seconds: float) -> ExpressionWrapper:
    return ExpressionWrapper(Now() - Value(timedelta(seconds=seconds)), output_field=DateTimeField())


def _listed():
    alive = Q(stopped_at__isnull=True, last_seen__gte=_ago(settings.RUNTIME_WORKER_STALE_SECONDS))
    return (
        Worker.objects.filter(last_seen__gte=_ago(settings.RUNTIME_WORKER_FORGET_SECONDS))
        .annotate(alive=Case(When(alive, then=Value(True)), default=Value(False), output_field=BooleanField()))
        .order_by("-alive", "identity")
    )


def live_queues() -> set[str]:
    """The queues at least one live worker consumes (routing's consumers: no_worker's detail)."""
    queues: set[str] = set()
    for row in _listed().filter(alive=True).values_list("queues", flat=True):
        queues.update(row)
    return queues


@dataclass
class WorkerView:
    identity: str  # the process's (fleet.heartbeat.process_identity)
    node: str  # Celery's node name; two processes may share one
    host: str
    pid: int
    queues: list[str]
    started_at: datetime
    last_seen: datetime
    alive: bool
    stopped: bool  # it shut down cleanly (not alive at once); else a stale one stopped beating
    executions: list[int] = field(default_factory=list)
    # The tasks it ran itself, from its last beat (fleet.heartbeat.Tally); None: not counted (prefork).
    tasks: dict | None = None
    idle_queues: list[str] = field(default_factory=list)  # consumed, but nothing is routed to them

    @property
    def refs(self) -> list[str]:
        """The executions it holds, by their ids (RUN_0042)."""
        return [ref_for(pk) for pk in self.executions]


@dataclass
class QueueView:
    name: str
    consumers: int  # live workers consuming it


@dataclass
class Fleet:
    workers: list[WorkerView]
    queues: list[QueueView]  # every routed queue, with its live consumers

    @property
    def unconsumed(self) -> list[str]:
        return [q.name for q in self.queues if q.consumers == 0]

    def stamp(self) -> tuple:
        """Everything the Workers page shows, for its live poll to compare (console.page.digest)."""
        return (
            [
                (w.identity, w.alive, w.stopped, w.last_seen, w.queues, w.executions, w.tasks, w.idle_queues)
                for w in self.workers
            ],
            [(q.name, q.consumers) for q in self.queues],
        )


def fleet() -> Fleet:
    """The workers (alive first) with what each holds, and the routed queues."""
    rows = list(_listed())
    held = _held([r for r in rows if r.alive])
    in_flight = {(r.tasks.get("running") or {}).get("execution") for r in rows if r.tasks} - {None}
    # The in-flight execution each beat names, unless the person looking may not read it (access by workflow).
    readable = (
        set(Execution.objects.filter(pk__in=in_flight).values_list("pk", flat=True))
        if in_flight and viewer.hidden_now()
        else in_flight
    )
    routed = runtime.routed_queues()
    workers = [
        WorkerView(
            identity=r.identity,
            node=r.node or r.identity,
            host=r.host,
            pid=r.pid,
            queues=list(r.queues),
            started_at=r.started_at,
            last_seen=r.last_seen,
            alive=r.alive,
            stopped=r.stopped_at is not None,
            executions=held.get(r.identity, []),
            tasks=_tally(r.tasks, readable),
            idle_queues=[q for q in r.queues if q not in routed],
        )
        for r in rows
    ]
    queues = [QueueView(name=q, consumers=sum(1 for w in workers if w.alive and q in w.queues)) for q in routed]
    return Fleet(workers=workers, queues=queues)


def _tally(tasks: dict | None, readable: set[int]) -> dict | None:
    """A beat's tally (fleet.heartbeat.Tally) with the execution in flight named by its id
    (None for one the person looking may not read: ``readable`` holds those they may)."""
    if tasks is None:
        return None
    running = tasks.get("running") or None
    if running is not None:
        execution = running.get("execution")
        shown = ref_for(execution) if execution and execution in readable else None
        running = {"task": running.get("task", "?"), "execution": shown}
    return {**{k: int(tasks.get(k, 0)) for k in ("ran", "succeeded", "failed")}, "running": running}


def _held(rows: list[Worker]) -> dict[str, list[int]]:
    """Identity → the executions whose live lease one of its processes owns (one query:
    the running executions' live leases, through the (status, lease_expires_at) index)."""
    if not rows:
        return {}
    owner_of = {f"worker:{r.host}:{pid}": r.identity for r in rows for pid in r.pids}
    held: dict[str, list[int]] = {}
    leases = Execution.objects.filter(status=Status.RUNNING, lease_expires_at__gt=Now()).order_by("id")
    for pk, owner in leases.values_list("pk", "lease_owner"):
        identity = owner_of.get(owner.rsplit(":", 1)[0])
        if identity is not None:
            held.setdefault(identity, []).append(pk)
    return held
