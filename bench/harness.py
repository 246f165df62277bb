"""What the benchmark scripts share: their own database and Redis, real worker processes.

Every script runs against a database it drops and recreates (never the project's or
the tests'), and a Redis database it flushes. Call ``configure`` before Django is
imported.
"""

from __future__ import annotations

import os
import platform
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PG = os.environ.get("BENCH_PG", "postgres://postgres@127.0.0.1:5432")
WORKFLOW_MODULES = "workflows.monthly_report,bench.flows"


def configure(*, db: str, broker: str, **env: str) -> None:
    """Point this process (and the workers it starts) at ``db`` and ``broker``."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    os.environ.update(
        DJANGO_SETTINGS_MODULE="config.settings",
        DATABASE_URL=f"{PG}/{db}",
        CELERY_BROKER_URL=broker,
        RUNTIME_WORKFLOW_MODULES=WORKFLOW_MODULES,
        KEEL_VAR_DIR=str(ROOT / "var" / "bench"),
        KEEL_LOG_LEVEL="WARNING",
        **env,
    )


def recreate_database(db: str) -> None:
    import psycopg

    with psycopg.connect(f"{PG}/postgres", autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{db}"')
    subprocess.run(
        [sys.executable, "manage.py", "migrate", "-v0"], cwd=ROOT, check=True, stdout=sys.stderr, stderr=sys.stderr
    )


# The WAL records between two positions that belong to one database: those touching
# its relations, and every record (commits included) of a transaction that did.
OWN_WAL = """
WITH r AS (
    SELECT xid, resource_manager, record_type, record_length, block_ref
      FROM pg_get_wal_records_info('0/0'::pg_lsn + %(start)s, '0/0'::pg_lsn + %(end)s)
), mine AS (
    SELECT DISTINCT xid FROM r WHERE xid <> 0 AND block_ref LIKE %(pattern)s
)
SELECT (SELECT count(*) FROM r WHERE resource_manager = 'Transaction' AND record_type LIKE 'COMMIT%%'
                                 AND xid IN (SELECT xid FROM mine)),
       (SELECT coalesce(sum(record_length), 0) FROM r
         WHERE xid IN (SELECT xid FROM mine) OR block_ref LIKE %(pattern)s)
"""


# The same records, grouped by the relation of their first block (a table or one of its
# indexes) and by record type; records with no block (commits) under "(transaction)".
OWN_WAL_BY_RELATION = """
WITH r AS (
    SELECT xid, resource_manager, record_type, record_length, fpi_length, block_ref,
           substring(block_ref from 'rel \\d+/\\d+/(\\d+)')::oid AS filenode
      FROM pg_get_wal_records_info('0/0'::pg_lsn + %(start)s, '0/0'::pg_lsn + %(end)s)
), mine AS (
    SELECT DISTINCT xid FROM r WHERE xid <> 0 AND block_ref LIKE %(pattern)s
)
SELECT coalesce(c.relname, CASE WHEN r.filenode IS NULL THEN '(transaction)' ELSE '(other)' END),
       r.resource_manager || '/' || r.record_type, count(*), sum(r.record_length), sum(r.fpi_length)
  FROM r LEFT JOIN pg_class c ON c.oid <> 0 AND pg_relation_filenode(c.oid) = r.filenode
 WHERE r.xid IN (SELECT xid FROM mine) OR r.block_ref LIKE %(pattern)s
 GROUP BY 1, 2
"""


class OwnWal:
    """A database's own write transactions and WAL bytes, exact whatever else writes to
    the cluster: its records read back with pg_walinspect (PostgreSQL 15+, superuser).

    A physical replication slot keeps the WAL from ``hold`` until ``between`` has read
    it (each read advances the slot); ``release`` drops it. Slots of earlier runs that
    died without dropping theirs are dropped by the next ``hold``.
    """

    def __init__(self, db: str) -> None:
        self.db = db
        self.slot = f"keel_bench_{os.getpid()}"

    def hold(self) -> None:
        import psycopg

        with psycopg.connect(f"{PG}/postgres", autocommit=True) as conn:
            stale = conn.execute("SELECT slot_name FROM pg_replication_slots WHERE slot_name LIKE 'keel_bench_%'")
            for (name,) in stale.fetchall():
                if not Path(f"/proc/{name.removeprefix('keel_bench_')}").exists():
                    conn.execute("SELECT pg_drop_replication_slot(%s)", (name,))
            conn.execute("SELECT pg_create_physical_replication_slot(%s, true)", (self.slot,))

    def release(self) -> None:
        import psycopg

        with psycopg.connect(f"{PG}/postgres", autocommit=True) as conn:
            conn.execute(
                "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = %s",
                (self.slot,),
            )

    @staticmethod
    def position() -> int:
        """The current WAL position, in bytes."""
        import psycopg

        with psycopg.connect(f"{PG}/postgres", autocommit=True) as conn:
            return int(conn.execute("SELECT pg_current_wal_lsn() - '0/0'").fetchone()[0])

    def between(self, start: int, end: int) -> tuple[int, int]:
        """(committed write transactions, WAL bytes) of this database between two positions."""
        import psycopg

        with psycopg.connect(f"{PG}/{self.db}", autocommit=True) as conn:
            conn.execute("CREATE EXTENSION IF NOT EXISTS pg_walinspect")
            (oid,) = conn.execute("SELECT oid FROM pg_database WHERE datname = current_database()").fetchone()
            commits, wal = conn.execute(OWN_WAL, {"start": start, "end": end, "pattern": f"% rel %/{oid}/%"}).fetchone()
            conn.execute("SELECT pg_replication_slot_advance(%s, '0/0'::pg_lsn + %s)", (self.slot, end))
        return int(commits), int(wal)

    def by_relation(self, start: int, end: int) -> list[tuple[str, str, int, int, int]]:
        """This database's WAL between two positions as (relation, record type, records,
        bytes, of which full-page images), one row per pair; reads without advancing the slot."""
        import psycopg

        with psycopg.connect(f"{PG}/{self.db}", autocommit=True) as conn:
            conn.execute("CREATE EXTENSION IF NOT EXISTS pg_walinspect")
            (oid,) = conn.execute("SELECT oid FROM pg_database WHERE datname = current_database()").fetchone()
            rows = conn.execute(
                OWN_WAL_BY_RELATION, {"start": start, "end": end, "pattern": f"% rel %/{oid}/%"}
            ).fetchall()
        return [(name, kind, int(count), int(size), int(fpi)) for name, kind, count, size, fpi in rows]


def relation_bytes(db: str) -> dict[str, int]:
    """Every table, index and TOAST table of ``db`` outside the catalogs: its size on disk."""
    import psycopg

    with psycopg.connect(f"{PG}/{db}", autocommit=True) as conn:
        rows = conn.execute(
            """
            SELECT relname, pg_relation_size(oid) FROM pg_class
             WHERE relkind IN ('r', 'i', 't')
               AND relnamespace NOT IN ('pg_catalog'::regnamespace, 'information_schema'::regnamespace)
            """
        ).fetchall()
    return {name: int(size) for name, size in rows}


def start_worker(*, name: str, log: Path, args: list[str], env: dict[str, str] | None = None) -> subprocess.Popen:
    """A real ``celery -A config worker`` process in its own session (so it can be stopped whole)."""
    log.parent.mkdir(parents=True, exist_ok=True)
    cmd = [
        str(Path(sys.executable).parent / "celery"),
        "-A",
        "config",
        "worker",
        *args,
        "-l",
        "WARNING",
        "-n",
        f"{name}@%h",
        "--without-gossip",
        "--without-mingle",
        "--without-heartbeat",
    ]
    with open(log, "w") as out:
        return subprocess.Popen(
            cmd,
            cwd=ROOT,
            env={**os.environ, **(env or {})},
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def stop_worker(worker: subprocess.Popen) -> None:
    """SIGTERM (warm shutdown), then SIGKILL to its process group if it lingers."""
    if worker.poll() is not None:
        return
    worker.terminate()
    try:
        worker.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(worker.pid, signal.SIGKILL)
        worker.wait()


def rss_mb(pid: int) -> float | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        return None
    return None


def children(pid: int) -> list[int]:
    try:
        return [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def eager_starts(n: int, *, workflow: str = "bench_noop5", first: int = 0) -> float:
    """``n`` starts of ``workflow`` in this process (Django set up), Celery eager: each call
    returns once its workflow is done, as the in-process rows measure. Seconds taken."""
    from django.contrib.auth import get_user_model

    from config.celery import app
    from executions.services import execution_start

    app.conf.task_always_eager = True
    user, _ = get_user_model().objects.get_or_create(username="bench")
    began = time.perf_counter()
    for i in range(first, first + n):
        execution_start(user=user, workflow=workflow, input={"n": i})
    return time.perf_counter() - began


def wait_until(predicate, *, timeout: float, what: str, interval: float = 0.01):
    deadline = time.monotonic() + timeout
    while not (value := predicate()):
        if time.monotonic() > deadline:
            raise SystemExit(f"benchmark: timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(interval)
    return value


def machine(db: str) -> str:
    cpu = "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = ""
    try:
        kb = int(Path("/proc/meminfo").read_text().split()[1])
        mem = f", {kb / 1024 / 1024:.0f} GiB RAM"
    except (OSError, ValueError, IndexError):
        pass
    import psycopg

    with psycopg.connect(f"{PG}/{db}", autocommit=True) as conn:
        pg = conn.execute("SHOW server_version").fetchone()[0]
    return (
        f"{os.cpu_count()} cores ({cpu}){mem}; Linux {platform.release()}; "
        f"Python {platform.python_version()}; PostgreSQL {pg}; Redis broker"
    )
