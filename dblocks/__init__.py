"""PostgreSQL advisory locks: the one helper every serialisation of keel's goes through,
and the order they are taken in.

Each lock is a pair of 32-bit keys, ``(namespace, key)``: ``Lock`` names the namespaces,
the key is an id (a budget holder), a name's hash (PostgreSQL's ``hashtext``: a
workflow) or 0 (one lock of its kind). ``xact`` holds it until the transaction ends
(shared or exclusive), ``session`` for a ``with`` block (``Busy`` when another holds it).
The embedded SQLite default has none of them: its writes are serialised already, and
every helper does nothing there.

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

from enum import IntEnum

from django.db import connection as default_connection


class Lock(IntEnum):
    """The namespaces (first key) of keel's advisory locks. Numbers never change: a
    rolling deploy runs old and new code against the same locks."""

    ARCHIVE = 0x6B65_6501  # one archive pass at a time (retention.archiver)
    WORKFLOW_SWITCH = 0x6B65_6502  # one switch of a workflow at a time (executions.pauses)
    BUDGET = 2121  # one reservation at a time per budget holder (executions.engine.costs)
    BLOBS = 0x6B65_6504  # the blob sweep against a version row reusing a blob (artifacts.store)


class Busy(Exception):
    """Another session holds the lock ``session`` asked for."""


def _postgres(connection) -> bool:
    return connection.vendor == "postgresql"


def xact(lock: Lock, key: int | str = 0, *, shared: bool = False, connection=default_connection) -> None:
    """Inside a transaction: take ``(lock, key)`` until it ends (waits for it). A ``str``
    key is hashed by PostgreSQL (``hashtext``)."""
    if not _postgres(connection):
        return
    second = "hashtext(%s)" if isinstance(key, str) else "%s"
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT pg_advisory_xact_lock{'_shared' if shared else ''}(%s, {second})", [int(lock), key])


class session:
    """``with session(Lock.ARCHIVE, connection=…):`` — the lock for the block, taken at
    once or ``Busy``; given back when the block ends (and by PostgreSQL if the session does)."""

    def __init__(self, lock: Lock, key: int = 0, *, connection=default_connection, busy: str = "") -> None:
        self.lock, self.key, self.connection = lock, key, connection
        self.busy = busy or f"another session holds the {lock.name.lower()} lock"

    def __enter__(self) -> session:
        if _postgres(self.connection):
            with self.connection.cursor() as cursor:
                cursor.execute("SELECT pg_try_advisory_lock(%s, %s)", [int(self.lock), self.key])
                if not cursor.fetchone()[0]:
                    raise Busy(self.busy)
        return self

    def __exit__(self, *exc: object) -> None:
        if _postgres(self.connection) and self.connection.connection is not None:
            with self.connection.cursor() as cursor:
                cursor.execute("SELECT pg_advisory_unlock(%s, %s)", [int(self.lock), self.key])
