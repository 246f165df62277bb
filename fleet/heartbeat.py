"""The worker's heartbeat: a daemon thread of each Celery worker process that writes
its registry row once per ``RUNTIME_WORKER_HEARTBEAT_SECONDS`` — one statement, an
upsert stamped with the database clock (so hosts' clocks never matter), and nothing
else: what the worker holds is read off its leases by whoever asks.

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
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import connection
from django.utils import timezone

from .models import Worker

log = logging.getLogger(__name__)

_UPSERT = """
INSERT INTO fleet_worker (identity, host, pid, queues, pids, started_at, last_seen, stopped_at, beats)
VALUES (%s, %s, %s, %s::jsonb, %s::jsonb, now(), now(), NULL, 1)
ON CONFLICT (identity) DO UPDATE SET
    host = EXCLUDED.host, pid = EXCLUDED.pid, queues = EXCLUDED.queues, pids = EXCLUDED.pids,
    started_at = CASE WHEN fleet_worker.pid = EXCLUDED.pid AND fleet_worker.stopped_at IS NULL
                      THEN fleet_worker.started_at ELSE now() END,
    last_seen = now(), stopped_at = NULL, beats = fleet_worker.beats + 1
"""


def task_pids(pid: int) -> list[int]:
    """The processes that run this worker's tasks: itself and its children (prefork's pool)."""
    try:
        children = [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        children = []
    return [pid, *children]


def beat(identity: str, queues: list[str], *, host: str | None = None, pid: int | None = None) -> None:
    """Write the row once: one statement (PostgreSQL: an upsert with now())."""
    import json

    host = host or socket.gethostname()
    pid = pid or os.getpid()
    pids = task_pids(pid) if pid == os.getpid() else [pid]
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(_UPSERT, [identity, host, pid, json.dumps(sorted(queues)), json.dumps(pids)])
        return
    now = timezone.now()
    Worker.objects.update_or_create(
        identity=identity,
        defaults={
            "host": host,
            "pid": pid,
            "queues": sorted(queues),
            "pids": pids,
            "last_seen": now,
            "stopped_at": None,
        },
        create_defaults={
            "host": host,
            "pid": pid,
            "queues": sorted(queues),
            "pids": pids,
            "started_at": now,
            "last_seen": now,
        },
    )


def stopped(identity: str) -> None:
    """A clean shutdown: listed as not alive at once (until it ages out)."""
    Worker.objects.filter(identity=identity).update(stopped_at=timezone.now())


class Heartbeat(threading.Thread):
    def __init__(self, identity: str, queues: list[str]) -> None:
        super().__init__(name="keel-fleet-heartbeat", daemon=True)
        self.identity, self.queues = identity, queues
        self.halt = threading.Event()

    def run(self) -> None:
        interval = settings.RUNTIME_WORKER_HEARTBEAT_SECONDS
        while True:
            try:
                beat(self.identity, self.queues)
            except Exception as exc:  # the database or the pooler away: try again at the next beat
                log.warning("worker heartbeat of %s not written: %r", self.identity, exc)
                connection.close()
            if self.halt.wait(interval):
                break
        connection.close()


_running: Heartbeat | None = None


def _on_ready(sender: Any = None, **kwargs: Any) -> None:
    global _running
    consumer = sender
    queues = sorted(consumer.app.amqp.queues.consume_from or consumer.app.amqp.queues)
    _running = Heartbeat(consumer.hostname, queues)
    _running.start()


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
    from celery.signals import worker_ready, worker_shutdown

    worker_ready.connect(_on_ready, weak=False, dispatch_uid="keel-fleet-ready")
    worker_shutdown.connect(_on_shutdown, weak=False, dispatch_uid="keel-fleet-shutdown")
