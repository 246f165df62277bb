"""``GET /api/workers`` (docs/design.md §6, Workers): operators. ``config.api`` adds this router.

``items`` is the contract's; ``queues`` (every routed queue with its live consumers), an
item's ``node`` and ``tasks`` are ours, additively (docs/api.md, Workers)."""

from __future__ import annotations

from datetime import datetime

from django.http import HttpRequest
from ninja import Router, Schema

from apikit.answers import READ, ErrorOut
from executions.errors import Forbidden

from . import registry

router = Router()
OPERATE = "executions.operate_execution"


class RunningOut(Schema):
    task: str
    execution: str | None  # the execution an advance slice works on (RUN_0042)


class TasksOut(Schema):
    ran: int
    succeeded: int
    failed: int
    running: RunningOut | None


class WorkerOut(Schema):
    identity: str
    node: str
    host: str
    pid: int
    queues: list[str]
    started_at: datetime
    last_seen: datetime
    executions: list[str]
    alive: bool
    tasks: TasksOut | None  # null: not counted (a prefork worker's tasks run in its children)


class QueueOut(Schema):
    name: str
    consumers: int


class WorkersOut(Schema):
    items: list[WorkerOut]
    queues: list[QueueOut]


@router.get("/workers", response={200: WorkersOut, **READ, 403: ErrorOut}, tags=["workers"])
def workers_list(request: HttpRequest):
    """The worker processes from their heartbeats, alive first; a stopped one is listed as
    not alive until it ages out. Each execution a worker holds is named by its id (``RUN_0042``)."""
    if not request.user.has_perm(OPERATE):
        raise Forbidden("only operators see the workers")
    fleet = registry.fleet()
    return {
        "items": [
            {
                "identity": w.identity,
                "node": w.node,
                "host": w.host,
                "pid": w.pid,
                "queues": w.queues,
                "started_at": w.started_at,
                "last_seen": w.last_seen,
                "executions": w.refs,
                "alive": w.alive,
                "tasks": w.tasks,
            }
            for w in fleet.workers
        ],
        "queues": [{"name": q.name, "consumers": q.consumers} for q in fleet.queues],
    }
