"""PostgreSQL advisory locks: the one helper every serialisation of keel's goes through,
and the order they are taken in.

``Lock`` names each lock; its key is fixed (one lock of its kind), an id (a budget
holder) or a name (a workflow). ``xact`` holds it until the transaction ends (shared or
exclusive), ``session`` for a ``with`` block (``Busy`` when another holds it). The keys
are the ones these locks had before this module gathered them, so code of both ages
excludes each other during a rolling deploy. The embedded SQLite default has none of
them: its writes are serialised already, and every helper does nothing there.

The order, outermost first, for a transaction that takes more than one — row locks and
advisory locks alike, so two transactions never wait for each other in a circle:

1. the archive pass (a session lock, around everything it does);
2. a workflow's switch (pause, resume, rollout of that workflow);
3. an execution's row (``select_for_update``; the lease's fence takes it), then its
   approval requests, then its actions;
4. the budget holders a model call reserves against, ascending by id (never an
   ancestor's row: a parent's cancel holds its row while it locks its children);
5. the blobs (the sweep exclusive, a version row that reuses a blob shared).
"""

from __future__ import annotations

from enum import Enum

from django.db import connection as default_connection

INT4 = 0x7FFFFFFF


class Lock(Enum):
    """keel's advisory locks. Their keys never change (``_key``): a rolling deploy runs
    old and new code against the same locks."""

    ARCHIVE = "archive"  # one archive pass at a time (retention.archiver)
    WORKFLOW_SWITCH = "workflow_switch"  # one switch of a workflow at a time (executions.pauses)
    BUDGET = "budget"  # one reservation at a time per budget holder (executions.engine.costs)
    BLOBS = "blobs"  # the blob sweep against a version row reusing a blob (artifacts.store)


def _key(lock: Lock, key: int | str) -> tuple[str, list[object]]:
    """The lock's key as SQL arguments: one bigint, or two int4s."""
    if lock is Lock.ARCHIVE:
        return "%s", [0x6B65656C23]
    if lock is Lock.BLOBS:
        return "%s", [0x6B65656C42]
    if lock is Lock.WORKFLOW_SWITCH:
        return "hashtext(%s)", [f"keel.workflow_switch:{key}"]
    return "%s, %s", [2121, int(key) & INT4]  # BUDGET: the holder's id (folded into an int4)


class Busy(Exception):
    """Another session holds the lock ``session`` asked for."""


def _postgres(connection) -> bool:
    return connection.vendor == "postgresql"


def xact(lock: Lock, key: int | str = 0, *, shared: bool = False, connection=default_connection) -> None:
    """Inside a transaction: take ``lock`` (for ``key``: a holder's id, a workflow's name)
    until it ends, waiting for it."""
    if not _postgres(connection):
        return
    sql, args = _key(lock, key)
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT pg_advisory_xact_lock{'_shared' if shared else ''}({sql})", args)


class session:
    """``with session(Lock.ARCHIVE, connection=…):`` — the lock for the block, taken at
    once or ``Busy``; given back when the block ends (and by PostgreSQL if the session does)."""

    def __init__(self, lock: Lock, key: int | str = 0, *, connection=default_connection, busy: str = "") -> None:
        self.lock, self.key, self.connection = lock, key, connection
        self.busy = busy or f"another session holds the {lock.value} lock"

    def __enter__(self) -> session:
        if _postgres(self.connection):
            sql, args = _key(self.lock, self.key)
            with self.connection.cursor() as cursor:
                cursor.execute(f"SELECT pg_try_advisory_lock({sql})", args)
                if not cursor.fetchone()[0]:
                    raise Busy(self.busy)
        return self

    def __exit__(self, *exc: object) -> None:
        if _postgres(self.connection) and self.connection.connection is not None:
            sql, args = _key(self.lock, self.key)
            with self.connection.cursor() as cursor:
                cursor.execute(f"SELECT pg_advisory_unlock({sql})", args)
