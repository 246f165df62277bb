"""Issue 23, item 7, measured: the purge as batched deletes (what keel does) against
dropping a time partition, on an append-only table of the retention data set's shape
(``BENCH_PARTITION_EXECUTIONS`` executions, default 1,000,000, 8 events each, 90 % of
them 100 days old). Writes the "partitions" section of docs/BENCHMARKS.md.

Two tables in a database of their own, the same rows in each: ``plain`` (the shape of
``executions_executionevent``: a bigint key, the execution, a kind, a JSON payload, the
time; indexed by execution) and ``parted``, partitioned by month on the time. The old
executions go from ``plain`` in batches of ``BENCH_RETENTION_BATCH`` executions (500)
by ``execution_id = ANY(...)``, as ``retention.purge`` deletes, then ``VACUUM``; from
``parted`` by ``DETACH PARTITION`` and ``DROP TABLE``. Plain SQL through psycopg: the
Python of the archive is not what is compared.

    .venv/bin/python bench/partitions.py
"""

from __future__ import annotations

import os
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import doc, harness

DB = os.environ.get("BENCH_PARTITION_DB", "keel_bench_partitions")
N = int(os.environ.get("BENCH_PARTITION_EXECUTIONS", "1000000"))
BATCH = int(os.environ.get("BENCH_RETENTION_BATCH", "500"))
EVENTS = 8
OLD_SHARE = 0.9

SCHEMA = """
CREATE TABLE plain (
    id bigint PRIMARY KEY, execution_id bigint NOT NULL, kind varchar(64) NOT NULL,
    payload jsonb NOT NULL, created_at timestamptz NOT NULL
);
CREATE INDEX plain_execution ON plain (execution_id, id);
CREATE TABLE parted (
    id bigint NOT NULL, execution_id bigint NOT NULL, kind varchar(64) NOT NULL,
    payload jsonb NOT NULL, created_at timestamptz NOT NULL,
    PRIMARY KEY (id, created_at)
) PARTITION BY RANGE (created_at);
CREATE INDEX parted_execution ON parted (execution_id, id);
CREATE TABLE parted_old PARTITION OF parted
    FOR VALUES FROM (date_trunc('month', now() - interval '100 days'))
    TO (date_trunc('month', now() - interval '100 days') + interval '1 month');
CREATE TABLE parted_now PARTITION OF parted
    FOR VALUES FROM (date_trunc('month', now() - interval '1 day')) TO (date_trunc('month', now()) + interval '1 month');
"""

# Old executions all on one day 100 days ago (one partition), the rest from yesterday on.
ROWS = """
INSERT INTO {table} (id, execution_id, kind, payload, created_at)
SELECT (e - 1) * %(events)s + k, e, 'step.completed',
       jsonb_build_object('step', 'step_' || k, 'token', e %% 97, 'outcome', 'succeeded'),
       CASE WHEN e <= %(old)s THEN date_trunc('day', now() - interval '100 days') + (e %% 86400) * interval '1 second'
            ELSE now() - interval '1 hour' END
  FROM generate_series(1, %(n)s) AS e, generate_series(1, %(events)s) AS k
"""


def size(cur, table: str) -> int:
    cur.execute(
        "SELECT coalesce(sum(pg_total_relation_size(relid)), pg_total_relation_size(%s::regclass)) "
        "FROM pg_partition_tree(%s::regclass) WHERE isleaf",
        [table, table],
    )
    return int(cur.fetchone()[0])


def main() -> int:
    with psycopg.connect(f"{harness.PG}/postgres", autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{DB}" WITH (FORCE)')
        admin.execute(f'CREATE DATABASE "{DB}"')
    old = int(N * OLD_SHARE)
    with psycopg.connect(f"{harness.PG}/{DB}", autocommit=True) as conn, conn.cursor() as cur:
        cur.execute(SCHEMA)
        t = time.perf_counter()
        for table in ("plain", "parted"):
            cur.execute(ROWS.format(table=table), {"events": EVENTS, "old": old, "n": N})
        cur.execute("VACUUM ANALYZE")
        seeded_s = time.perf_counter() - t
        before = {table: size(cur, table) for table in ("plain", "parted")}

        # keel's purge: batch after batch of executions, each its own transaction.
        t = time.perf_counter()
        batches, longest = 0, 0.0
        for first in range(1, old + 1, BATCH):
            ids = list(range(first, min(first + BATCH, old + 1)))
            b = time.perf_counter()
            with conn.transaction():
                cur.execute("DELETE FROM plain WHERE execution_id = ANY(%s)", [ids])
            longest = max(longest, time.perf_counter() - b)
            batches += 1
        deleted_s = time.perf_counter() - t
        t = time.perf_counter()
        cur.execute("VACUUM plain")
        vacuum_s = time.perf_counter() - t

        # The partition: detach and drop the month that holds only archived executions.
        t = time.perf_counter()
        cur.execute("ALTER TABLE parted DETACH PARTITION parted_old")
        cur.execute("DROP TABLE parted_old")
        dropped_s = time.perf_counter() - t
        after = {table: size(cur, table) for table in ("plain", "parted")}
        cur.execute("SELECT count(*) FROM plain")
        left_plain = cur.fetchone()[0]
        cur.execute("SELECT count(*) FROM parted")
        left_parted = cur.fetchone()[0]
    assert left_plain == left_parted == (N - old) * EVENTS, (left_plain, left_parted)

    rows = old * EVENTS
    text = f"""
## Retention: batched deletes against dropping a partition (issue 23, item 7)

Measured {datetime.now(UTC):%Y-%m-%d %H:%M} UTC on {harness.machine(DB)}, by `bench/partitions.py`:
{N:,} executions × {EVENTS} events in a table of `executions_executionevent`'s shape, the same rows
in a plain table and in one partitioned by month (seeded in {seeded_s:.0f} s); {old:,} executions
({rows:,} rows) purged from each. Plain SQL: what is compared is the database's cost, not the archive's.

| | plain table, batches of {BATCH} executions (keel's purge) | partitioned by month, `DETACH` + `DROP` |
|---|---|---|
| purge | {deleted_s:.1f} s: {old / deleted_s:,.0f} executions/s, {batches:,} transactions, the longest {longest * 1000:.0f} ms | {dropped_s * 1000:.0f} ms, one statement each |
| `VACUUM` after it | {vacuum_s:.1f} s | none needed |
| size before → after (MB, with indexes) | {before["plain"] / 1e6:,.0f} → {after["plain"] / 1e6:,.0f} (freed pages kept for reuse) | {before["parted"] / 1e6:,.0f} → {after["parted"] / 1e6:,.0f} (returned to the OS) |

Dropping a partition is the cheaper purge by orders of magnitude and gives the space
back. keel keeps the batched delete as long as it holds the issue's figures (the
archive-and-purge table above: a rate flat through the run, step p99 during the purge
within 2× of idle, a day's pass under a minute), because a partition can be dropped
only when *every* execution in it may go — a family spans months (a parent with a live
child, a legal hold, a workflow's longer `retention_days`) — and because PostgreSQL
needs the partition key in every unique constraint a foreign key points at, so each of
the tables' keys and the foreign keys into them would change. And the delete is not
what a purge costs: here it deletes {old / deleted_s:,.0f} executions' events a second, while the
archive-and-purge above runs at ~1,000 — reading each family and writing it to the
archive, which a dropped partition would need just the same. The day a daily pass
can't keep up (~1,000 executions/s is ~86 M a day), partition `executionevent` and `steprun` by month and let the
archiver drop a month once its executions are all archived.
"""
    doc.write_section("partitions", text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
