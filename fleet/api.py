"""``GET /api/workers`` (DESIGN §6, Workers): operators. ``config.api`` adds this router.

``items`` is the contract's; ``queues`` (every routed queue with its live consumers) is
ours, additively (docs/api.md, Workers)."""

from __future__ import annotations

from datetime import datetime

from django.http import HttpRequest
from ninja import Router, Schema

from executions.api import READ, ErrorOut
from executions.errors import Forbidden
from executions.models import ref_for

from . import registry

router = Router()
OPERATE = "executions.operate_execution"


class WorkerOut(Schema):
    identity: str
    host: str
    pid: int
    queues: list[str]
    started_at: datetime
    last_seen: datetime
    executions: list[str]
    alive: bool


class QueueOut(Schema):
    name: str
    consumers: int


class WorkersOut(Schema):
    items: list[WorkerOut]
    queues: list[QueueOut]


@router.get("/workers", response={200: WorkersOut, **READ, 403: ErrorOut}, tags=["workers"])
def workers_list(request: HttpRequest):
    """The workers from their heartbeats, alive first; a stopped one is listed as not alive
    until it ages out. Each execution a worker holds is named by its id (``RUN_0042``)."""
    if not request.user.has_perm(OPERATE):
        raise Forbidden("only operators see the workers")
    fleet = registry.fleet()
    return {
        "items": [
            {
                "identity": w.identity,
                "host": w.host,
                "pid": w.pid,
                "queues": w.queues,
                "started_at": w.started_at,
                "last_seen": w.last_seen,
                "executions": [ref_for(pk) for pk in w.executions],
                "alive": w.alive,
            }
            for w in fleet.workers
        ],
        "queues": [{"name": q.name, "consumers": q.consumers} for q in fleet.queues],
    }
