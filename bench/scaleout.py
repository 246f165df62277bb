"""The scale-out benchmark (`make bench`, issue 24): steps per second of the 5-step
no-op workflow with 1, 2 and 4 Celery worker processes, connected directly and through
PgBouncer in transaction mode; where the CPU went; write transactions per workflow and
the commit ceiling they imply (pgbench's figure ÷ write transactions per workflow).

    .venv/bin/python bench/scaleout.py            (BENCH_SCALE_EXECUTIONS per run, default 200)

Its own database (``BENCH_SCALE_DB``, default ``keel_bench_scale``) and Redis database
(``BENCH_BROKER_URL``), a PgBouncer of its own (tests/support/procs.py, the settings
docs/operations.md documents), real solo-pool workers; readiness is read off the worker
registry (each worker's heartbeat row), not a sleep. CPU is each process's own
user+system time from /proc: the workers, this process (the starter), the database
backends of this database (pg_stat_activity), PgBouncer. Writes the "scale-out" section
of docs/BENCHMARKS.md; ``--json`` prints the numbers.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import doc, harness

DB = os.environ.get("BENCH_SCALE_DB", "keel_bench_scale")
BROKER = os.environ.get("BENCH_BROKER_URL", "redis://127.0.0.1:6379/12")
EXECUTIONS = int(os.environ.get("BENCH_SCALE_EXECUTIONS", "200"))
WORKER_COUNTS = tuple(int(n) for n in os.environ.get("BENCH_SCALE_WORKERS", "1,2,4").split(","))
PGBENCH_SECONDS = int(os.environ.get("BENCH_PGBENCH_SECONDS", "10"))
STEPS = 5
TICK = os.sysconf("SC_CLK_TCK")

harness.configure(db=DB, broker=BROKER, RUNTIME_LEASE_SECONDS="300", RUNTIME_WORKER_HEARTBEAT_SECONDS="1")


def cpu_seconds(pid: int) -> float:
    """User + system CPU of one process so far (0 if it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / TICK


def backends_cpu() -> float:
    """CPU of every backend connected to this database now (the workers' or PgBouncer's)."""
    import psycopg

    with psycopg.connect(f"{harness.PG}/postgres", autocommit=True) as conn:
        pids = [r[0] for r in conn.execute("SELECT pid FROM pg_stat_activity WHERE datname = %s", (DB,))]
    return sum(cpu_seconds(pid) for pid in pids)


def drop_backends() -> None:
    import psycopg

    with psycopg.connect(f"{harness.PG}/postgres", autocommit=True) as conn:
        conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()",
            (DB,),
        )


def one_run(user, n_workers: int, *, url: str, pooled: bool, own=None) -> dict:
    import redis
    from django.db import connection

    from executions.models import Execution, Status
    from executions.services import execution_start
    from fleet.models import Worker

    redis.Redis.from_url(BROKER).flushdb()
    Worker.objects.all().delete()
    env = {"DATABASE_URL": url, **({"DATABASE_POOL_MODE": "transaction"} if pooled else {})}
    logs = Path(tempfile.gettempdir()) / "keel-bench-scale"
    workers = [
        harness.start_worker(
            name=f"scale{i}", log=logs / f"w{i}.log", args=["--pool=solo", "-Q", "celery,control"], env=env
        )
        for i in range(n_workers)
    ]
    try:
        harness.wait_until(
            lambda: Worker.objects.filter(stopped_at__isnull=True).count() >= n_workers, timeout=120, what="workers"
        )
        mark = own.position() if own else None
        cpu0 = {w.pid: cpu_seconds(w.pid) for w in workers}
        me0 = sum(os.times()[:2])
        t0 = time.perf_counter()
        ids = [
            execution_start(user=user, workflow="bench_noop5", input={"n": i})[0].pk
            for i in range(n_workers * 100_000, n_workers * 100_000 + EXECUTIONS)
        ]
        harness.wait_until(
            lambda: Execution.objects.filter(pk__in=ids, status=Status.COMPLETED).count() == EXECUTIONS,
            timeout=900,
            what="every execution to complete",
            interval=0.05,
        )
        elapsed = time.perf_counter() - t0
        writes = own.between(mark, own.position())[0] if own else None
        workers_cpu = sum(cpu_seconds(w.pid) - cpu0[w.pid] for w in workers)
        me = sum(os.times()[:2]) - me0
        database = backends_cpu()  # backends opened for the run (the starter's included)
    finally:
        for w in workers:
            harness.stop_worker(w)
        connection.close()
        drop_backends()
    return {
        "workers": n_workers,
        "pooled": pooled,
        "seconds": elapsed,
        "steps_per_s": EXECUTIONS * STEPS / elapsed,
        "cpu": {"workers": workers_cpu, "starter": me, "postgres": database},
        "write_txns_per_workflow": writes / EXECUTIONS if writes is not None else None,
    }


def pgbench_tps() -> float:
    """Write transactions per second this PostgreSQL commits: pgbench's simple-update
    script (-N), 4 clients, on a scale-1 database of its own."""
    import psycopg

    from tests.support.procs import postgres_bin

    bench_db = f"{DB}_pgbench"
    with psycopg.connect(f"{harness.PG}/postgres", autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{bench_db}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{bench_db}"')
    url = f"{harness.PG}/{bench_db}"
    pgbench = str(postgres_bin() / "pgbench")
    subprocess.run([pgbench, "-i", "-s", "1", "-q", url], check=True, capture_output=True)
    out = subprocess.run(
        [pgbench, "-N", "-c", "4", "-j", "2", "-T", str(PGBENCH_SECONDS), url],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    with psycopg.connect(f"{harness.PG}/postgres", autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{bench_db}" WITH (FORCE)')
    return float(re.search(r"tps = ([\d.]+)", out).group(1))


def main() -> None:
    harness.recreate_database(DB)
    import django

    django.setup()
    import logging

    logging.getLogger("executions").setLevel(logging.WARNING)
    from django.contrib.auth import get_user_model

    from tests.support.procs import PgBouncer

    user = get_user_model().objects.create_user("bench")
    direct = f"{harness.PG}/{DB}"
    bouncer = PgBouncer(Path(tempfile.mkdtemp(prefix="keel-bench-pgb-")), users=("postgres",))
    bouncer.start()
    runs = []
    try:
        own = harness.OwnWal(DB)
        own.hold()
        try:
            runs.append(one_run(user, WORKER_COUNTS[0], url=direct, pooled=False, own=own))
        finally:
            own.release()
        for n in WORKER_COUNTS[1:]:
            runs.append(one_run(user, n, url=direct, pooled=False))
        for n in WORKER_COUNTS:
            runs.append(one_run(user, n, url=bouncer.url("postgres", DB), pooled=True))
    finally:
        bouncer.close()
    tps = pgbench_tps()
    result = {"executions": EXECUTIONS, "runs": runs, "pgbench_tps": tps}
    print(json.dumps(result, indent=2))
    if "--json" not in sys.argv:
        write_report(result)


def write_report(result: dict) -> None:
    runs, tps = result["runs"], result["pgbench_tps"]
    per_workflow = runs[0]["write_txns_per_workflow"]
    ceiling = tps / per_workflow
    rows = "\n".join(
        f"| {r['workers']} | {'PgBouncer (transaction)' if r['pooled'] else 'direct'} | {r['steps_per_s']:.0f} | "
        f"{r['cpu']['workers']:.1f} | {r['cpu']['postgres']:.1f} | {r['cpu']['starter']:.1f} | {r['seconds']:.1f} |"
        for r in runs
    )
    top = max(runs, key=lambda r: r["steps_per_s"])
    best = top["steps_per_s"]
    cores = os.cpu_count() or 1
    used = sum(top["cpu"].values())
    share = used / (top["seconds"] * cores)
    where = ", ".join(f"{k} {v:.1f} s ({v / used:.0%})" for k, v in top["cpu"].items() if used) + (
        f" of {top['seconds'] * cores:.1f} CPU-seconds available ({share:.0%} used by us)"
    )
    verdict = (
        "The cores were busy: more throughput needs more cores for workers (another machine), the workers' "
        "Python (runner, ORM, Celery, kombu) being the largest share."
        if share > 0.6
        else "The cores were mostly not ours or idle: the time went to waiting — commit latency (fsync), "
        "round trips and the broker — and to the other work of this shared machine, so more worker processes "
        "still help until the commits or the cores run out."
    )
    today = datetime.now(UTC).strftime("%Y-%m-%d")
    text = f"""## Scale-out: 1, 2 and 4 worker processes, direct and through PgBouncer (`make bench`)

`bench/scaleout.py` on {today}, on {harness.machine(DB)}; {result["executions"]} executions
of `bench_noop5` (five no-op compute steps) per run, started by one process through
`execution_start`, run by solo-pool Celery workers over Redis.

| workers | connection | steps/s | CPU s: workers | CPU s: PostgreSQL backends | CPU s: starter | wall s |
|---|---|---|---|---|---|---|
{rows}

**Write transactions per workflow**: {per_workflow:.2f} (the start's commit, the claim,
one per step; counted exactly from this database's WAL, pg_walinspect). **pgbench**
(simple-update, 4 clients, {PGBENCH_SECONDS} s) commits **{tps:.0f} write
transactions/s** on this server, so its commit ceiling for this workflow is
{tps:.0f} ÷ {per_workflow:.2f} ≈ **{ceiling:.0f} workflows/s** ({ceiling * 86400 / 1e6:.1f} M a day)
— {"above" if ceiling > best / STEPS else "below"} the {best / STEPS:.1f} workflows/s the best run here reached.
**Where the CPU went** (the best run): {where}. {verdict} PgBouncer adds a hop per
statement and a little CPU of its own; it pays off by capping server connections
(hundreds of worker processes on tens of server connections), not by speed.
docs/operations.md ("Scaling out") turns these figures into the capacity model.

One run on a shared 2-core machine (1-minute load average {os.getloadavg()[0]:.1f} when it
ended): more workers than cores only queue for the CPU here; compare runs on the same
machine only.
"""
    doc.write_section("scale-out", text)
    print("wrote the scale-out section of docs/BENCHMARKS.md")


if __name__ == "__main__":
    main()
