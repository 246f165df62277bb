"""Replica reads (issue 24, docs/design.md §4 "Many machines"): with ``DATABASE_REPLICA_URL`` the
dashboard's and the API's read-only pages — lists, counts, metrics, audit — read from a
streaming replica; workers, every write and every read-before-write stay on the primary.

``ReplicaReads`` (middleware, installed only when a replica is configured) marks a GET
of one of ``READ_PATHS`` for the replica; ``ReplicaRouter`` sends that request's reads
there and everything else to ``default``. A replica that doesn't answer is a warning in
the log and reads from the primary (never a 500), asked again after
``RUNTIME_REPLICA_RECHECK_SECONDS``; its lag (how far its replay is behind) is read with
the same check, and pages say so past ``RUNTIME_REPLICA_LAG_SECONDS``.
"""

from __future__ import annotations

import logging
import time
from contextvars import ContextVar
from dataclasses import dataclass

from django.conf import settings
from django.db import DatabaseError, connections

log = logging.getLogger(__name__)

ALIAS = "replica"
# The read-only pages and endpoints whose reads may be a little behind (exact paths;
# /api/metrics… and the approvals audit by prefix). A page that writes is never here.
READ_PATHS = frozenset(
    {
        "/",
        "/live/executions/",
        "/api/executions",
        "/api/executions/summary",
        "/api/operator-audit",
        "/dashboard/metrics/",
    }
)
READ_PREFIXES = ("/api/metrics", "/approvals/audit/")

_routed: ContextVar[bool] = ContextVar("keel_replica_reads", default=False)

_LAG = """
SELECT CASE WHEN NOT pg_is_in_recovery() OR pg_last_wal_receive_lsn() = pg_last_wal_replay_lsn() THEN 0
            ELSE extract(epoch FROM now() - pg_last_xact_replay_timestamp()) END
"""


@dataclass
class Health:
    usable: bool
    lag_seconds: float | None
    checked_at: float


_health: Health | None = None


def configured() -> bool:
    return ALIAS in settings.DATABASES


def health() -> Health:
    """Whether the replica answers and how far behind it is, checked at most every
    ``RUNTIME_REPLICA_RECHECK_SECONDS`` per process."""
    global _health
    now = time.monotonic()
    if _health is not None and now - _health.checked_at < settings.RUNTIME_REPLICA_RECHECK_SECONDS:
        return _health
    try:
        with connections[ALIAS].cursor() as cursor:
            cursor.execute(_LAG)
            (lag,) = cursor.fetchone()
        _health = Health(usable=True, lag_seconds=float(lag or 0), checked_at=now)
    except DatabaseError as exc:
        log.warning("the replica (DATABASE_REPLICA_URL) does not answer; reading from the primary: %s", exc)
        connections[ALIAS].close()
        _health = Health(usable=False, lag_seconds=None, checked_at=now)
    return _health


def routed() -> bool:
    """This request reads from the replica (it is one of the read-only pages, and it answers)."""
    return _routed.get() and health().usable


class ReplicaRouter:
    def db_for_read(self, model, **hints):
        return ALIAS if routed() else None

    def db_for_write(self, model, **hints):
        return None

    def allow_relation(self, obj1, obj2, **hints):
        return True

    def allow_migrate(self, db, app_label, model_name=None, **hints):
        return db != ALIAS


def is_read_path(method: str, path: str) -> bool:
    return method in ("GET", "HEAD") and (path in READ_PATHS or path.startswith(READ_PREFIXES))


class ReplicaReads:
    """Marks the read-only GETs for the replica (config/settings.py adds it with a replica)."""

    def __init__(self, get_response) -> None:
        self.get_response = get_response

    def __call__(self, request):
        if not is_read_path(request.method, request.path):
            return self.get_response(request)
        token = _routed.set(True)
        try:
            return self.get_response(request)
        finally:
            _routed.reset(token)


def page_notice(request) -> dict:
    """For the pages: ``replica_notice``, a sentence when this page read from a replica
    that lags past ``RUNTIME_REPLICA_LAG_SECONDS``, or fell back to the primary."""
    if not configured() or not is_read_path(request.method, request.path):
        return {}
    state = health()
    if not state.usable:
        return {"replica_notice": "The read replica does not answer: this page was read from the primary."}
    if state.lag_seconds is not None and state.lag_seconds > settings.RUNTIME_REPLICA_LAG_SECONDS:
        return {
            "replica_notice": f"This page was read from a replica {state.lag_seconds:.0f} s behind the primary: "
            "the latest changes may not show yet."
        }
    return {}
