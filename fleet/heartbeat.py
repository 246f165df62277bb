"""The worker's heartbeat: a daemon thread of each Celery worker process that writes
its registry row once per ``RUNTIME_WORKER_HEARTBEAT_SECONDS`` — one statement, an
upsert stamped with the database clock (so hosts' clocks never matter), and nothing
else: what the worker holds is read off its leases by whoever asks.

The row is the process's, never the node name's (issue 39, item 2): its identity is the
node name, the pid and a nonce made at start, so two processes started with the same
``-n`` (or both the default ``celery@host``) each have a row and go stale on their own.
The beat carries the process's ``Tally`` of the tasks it ran itself (solo and thread
pools); a prefork worker's tasks run in its children and it reports none (null).

Started on Celery's ``worker_ready`` (the main process: with the solo pool, the
process that runs the steps), stopped and marked on ``worker_shutdown``. A failed
write (the database restarting, the pooler restarting) is logged and retried at the
next beat on a new connection; it never touches the worker's tasks.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import uuid
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import connection
from django.utils import timezone

from executions.runtime import ADVANCE

from .models import Worker

log = logging.getLogger(__name__)

_UPSERT = """
INSERT INTO fleet_worker (identity, node, host, pid, queues, pids, tasks, started_at, last_seen, stopped_at, beats)
VALUES (%s, %s, %s, %s, %s::jsonb, %s::jsonb, %s::jsonb, now(), now(), NULL, 1)
ON CONFLICT (identity) DO UPDATE SET
    node = EXCLUDED.node, host = EXCLUDED.host, pid = EXCLUDED.pid, queues = EXCLUDED.queues,
    pids = EXCLUDED.pids, tasks = EXCLUDED.tasks,
    started_at = CASE WHEN fleet_worker.pid = EXCLUDED.pid AND fleet_worker.stopped_at IS NULL
                      THEN fleet_worker.started_at ELSE now() END,
    last_seen = now(), stopped_at = NULL, beats = fleet_worker.beats + 1
"""


def process_identity(node: str, pid: int | None = None) -> str:
    """The registry's key for this process: ``<node>:<pid>:<nonce>`` (pids are reused)."""
    return f"{node}:{pid or os.getpid()}:{uuid.uuid4().hex[:6]}"


class Tally:
    """The tasks this process ran itself, counted by Celery's task signals: how many it
    started, how many returned, how many raised, and the one in flight (the execution an
    ``advance`` slice works on). Only the process that made it counts (a forked pool child
    inherits the object but not the count: its tasks are never seen here)."""

    def __init__(self) -> None:
        self.pid = os.getpid()
        self.lock = threading.Lock()
        self.ran = self.succeeded = self.failed = 0
        self.running: dict[str, Any] | None = None

    def started(self, task: Any, args: Any) -> None:
        if os.getpid() != self.pid:
            return
        execution = args[0] if getattr(task, "name", "") == ADVANCE and args else None
        with self.lock:
            self.ran += 1
            self.running = {"task": getattr(task, "name", "?"), "execution": execution}

    def ended(self, state: str | None) -> None:
        if os.getpid() != self.pid:
            return
        with self.lock:
            if state == "SUCCESS":
                self.succeeded += 1
            elif state == "FAILURE":
                self.failed += 1
            self.running = None

    def payload(self) -> dict[str, Any]:
        with self.lock:
            return {"ran": self.ran, "succeeded": self.succeeded, "failed": self.failed, "running": self.running}


def task_pids(pid: int) -> list[int]:
    """The processes that run this worker's tasks: itself and its children (prefork's pool)."""
    try:
        children = [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        children = []
    return [pid, *children]


def beat(
    identity: str,
    queues: list[str],
    *,
    node: str | None = None,
    host: str | None = None,
    pid: int | None = None,
    tasks: dict[str, Any] | None = None,
) -> None:
    """Write the row once: one statement (PostgreSQL: an upsert with now()). ``node`` is
    Celery's node name (default: the identity), ``tasks`` the process's ``Tally`` payload."""
    import json

    node = node or identity
    host = host or socket.gethostname()
    pid = pid or os.getpid()
    pids = task_pids(pid) if pid == os.getpid() else [pid]
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(
                _UPSERT,
                [identity, node, host, pid, json.dumps(sorted(queues)), json.dumps(pids), json.dumps(tasks)],
            )
        return
    now = timezone.now()
    row = {"node": node, "host": host, "pid": pid, "queues": sorted(queues), "pids": pids, "tasks": tasks}
    Worker.objects.update_or_create(
        identity=identity,
        defaults={**row, "last_seen": now, "stopped_at": None},
        create_defaults={**row, "started_at": now, "last_seen": now},
    )


def stopped(identity: str) -> None:
    """A clean shutdown: listed as not alive at once (until it ages out)."""
    Worker.objects.filter(identity=identity).update(stopped_at=timezone.now())


class Heartbeat(threading.Thread):
    """Beats ``identity``'s row every interval until ``halt``; with a ``tally``, its counts."""

    def __init__(self, identity: str, queues: list[str], *, node: str = "", tally: Tally | None = None) -> None:
        super().__init__(name="keel-fleet-heartbeat", daemon=True)
        self.identity, self.queues, self.node, self.tally = identity, queues, node, tally
        self.halt = threading.Event()

    def run(self) -> None:
        interval = settings.RUNTIME_WORKER_HEARTBEAT_SECONDS
        while True:
            try:
                tasks = self.tally.payload() if self.tally is not None else None
                beat(self.identity, self.queues, node=self.node, tasks=tasks)
            except Exception as exc:  # the database or the pooler away: try again at the next beat
                log.warning("worker heartbeat of %s not written: %r", self.identity, exc)
                connection.close()
            if self.halt.wait(interval):
                break
        connection.close()


_running: Heartbeat | None = None
_tally: Tally | None = None


def _counts_here(consumer: Any) -> bool:
    """Whether this process runs its tasks itself (solo, threads): prefork's run in children."""
    from celery.concurrency.prefork import TaskPool as Prefork

    return not isinstance(getattr(consumer, "pool", None), Prefork)


def _on_ready(sender: Any = None, **kwargs: Any) -> None:
    global _running, _tally
    consumer = sender
    queues = sorted(consumer.app.amqp.queues.consume_from or consumer.app.amqp.queues)
    _tally = Tally() if _counts_here(consumer) else None
    _running = Heartbeat(process_identity(consumer.hostname), queues, node=consumer.hostname, tally=_tally)
    _running.start()


def _on_prerun(sender: Any = None, args: Any = None, **kwargs: Any) -> None:
    if _tally is not None:
        _tally.started(sender, args)


def _on_postrun(sender: Any = None, state: str | None = None, **kwargs: Any) -> None:
    if _tally is not None:
        _tally.ended(state)


def _on_shutdown(sender: Any = None, **kwargs: Any) -> None:
    if _running is None:
        return
    _running.halt.set()
    _running.join(timeout=5)
    try:
        stopped(_running.identity)
    except Exception as exc:
        log.warning("could not mark %s stopped: %r", _running.identity, exc)


def connect_signals() -> None:
    from celery.signals import task_postrun, task_prerun, worker_ready, worker_shutdown

    worker_ready.connect(_on_ready, weak=False, dispatch_uid="keel-fleet-ready")
    worker_shutdown.connect(_on_shutdown, weak=False, dispatch_uid="keel-fleet-shutdown")
    task_prerun.connect(_on_prerun, weak=False, dispatch_uid="keel-fleet-prerun")
    task_postrun.connect(_on_postrun, weak=False, dispatch_uid="keel-fleet-postrun")
