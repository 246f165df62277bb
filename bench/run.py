"""`make bench`: what a step costs the runtime, on PostgreSQL and Redis.

Writes the "keel" section of docs/BENCHMARKS.md (bench/doc.py). Measures
1. write transactions per step (the design's floor: one per compute step, one claim
   per slice), counted exactly from this database's own WAL records (pg_walinspect),
   whatever else writes to the same PostgreSQL;
2. in-process runner throughput (steps/s, one worker, no broker);
3. end-to-end throughput with real Celery worker processes over Redis.
"""

from __future__ import annotations

import os
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import doc, harness

ROOT = harness.ROOT
DB = os.environ.get("BENCH_DB", "keel_bench")
BROKER = os.environ.get("BENCH_BROKER_URL", "redis://127.0.0.1:6379/14")
EXECUTIONS = int(os.environ.get("BENCH_EXECUTIONS", "200"))
E2E_EXECUTIONS = int(os.environ.get("BENCH_E2E_EXECUTIONS", "200"))
WORKERS = int(os.environ.get("BENCH_WORKERS", "2"))

harness.configure(
    db=DB,
    broker=BROKER,
    RUNTIME_LEASE_SECONDS="300",  # no heartbeat commits during the measurement
    RUNTIME_SLICE_SECONDS="60",
)


def recreate_database() -> None:
    harness.recreate_database(DB)


def main() -> None:
    recreate_database()
    import django

    django.setup()
    import logging

    logging.getLogger("executions").setLevel(logging.WARNING)
    from django.contrib.auth import get_user_model

    from bench.flows import STEPS
    from executions.engine import runner
    from executions.models import Execution, Status
    from executions.services import execution_start

    user = get_user_model().objects.create_user("bench")

    # 1 + 2: the runner in this process, executions started without a broker message.
    from django.db import transaction

    started = []
    with transaction.atomic():  # one transaction for the setup, not measured
        for i in range(EXECUTIONS):
            execution = Execution.objects.create(
                workflow="bench_compute",
                workflow_version=1,
                input={"n": i},
                input_digest=str(i),
                created_by=user,
                current_step="s0",
                context={
                    "artifacts": {},
                    "notes": {
                        "goal": "",
                        "constraints": [],
                        "facts": [],
                        "completed_steps": [],
                        "open_questions": [],
                        "next_action": "",
                    },
                },
            )
            started.append(execution.pk)
    own = harness.OwnWal(DB)
    own.hold()
    try:
        before = own.position()
        t0 = time.perf_counter()
        for pk in started:
            assert runner.advance(pk, worker="bench") == "stopped"
        elapsed = time.perf_counter() - t0
        writes, _ = own.between(before, own.position())
    finally:
        own.release()
    assert Execution.objects.filter(pk__in=started, status=Status.COMPLETED).count() == EXECUTIONS
    steps = EXECUTIONS * STEPS
    in_process = {
        "executions": EXECUTIONS,
        "steps": steps,
        "write_txns": writes,
        "per_step": writes / steps,
        "per_execution": writes / EXECUTIONS,
        "steps_per_s": steps / elapsed,
        "ms_per_step": elapsed / steps * 1000,
    }
    print(in_process)

    # 3: end to end, real workers over Redis, started through the service (on_commit dispatch).
    import redis

    redis.Redis.from_url(BROKER).flushdb()
    workers = [
        harness.start_worker(name=f"bench{i}", log=ROOT / "var" / "bench" / f"worker{i}.log", args=["--pool=solo"])
        for i in range(WORKERS)
    ]
    try:
        time.sleep(4)
        t0 = time.perf_counter()
        refs = [
            execution_start(user=user, workflow="bench_compute", input={"n": 10_000 + i})[0].pk
            for i in range(E2E_EXECUTIONS)
        ]
        deadline = time.monotonic() + 600
        while Execution.objects.filter(pk__in=refs, status=Status.COMPLETED).count() < E2E_EXECUTIONS:
            if time.monotonic() > deadline:
                raise SystemExit("end-to-end benchmark did not finish in 600 s")
            time.sleep(0.2)
        e2e_elapsed = time.perf_counter() - t0
    finally:
        for w in workers:
            harness.stop_worker(w)
    e2e = {
        "executions": E2E_EXECUTIONS,
        "workers": WORKERS,
        "seconds": e2e_elapsed,
        "executions_per_s": E2E_EXECUTIONS / e2e_elapsed,
        "steps_per_s": E2E_EXECUTIONS * STEPS / e2e_elapsed,
    }
    print(e2e)
    write_report(in_process, e2e, STEPS)


def machine() -> str:
    return harness.machine(DB)


def write_report(p: dict, e: dict, steps: int) -> None:
    today = datetime.now(UTC).strftime("%Y-%m-%d")
    text = f"""## keel alone: write transactions and throughput (`make bench`)

`bench/run.py` on {today}, on {machine()}.
Workflow `bench_compute`: {steps} trivial compute steps, so what is measured is the
runtime's own cost (checkpoint, event, lease), not the work.

### Write transactions per step (exact)

Counted exactly from this database's own commit records in the WAL (pg_walinspect)
while the runner advanced {p["executions"]} executions in this process.

| | measured | design floor |
|---|---|---|
| write transactions per execution | {p["per_execution"]:.2f} | {steps} steps + 1 claim = {steps + 1} |
| write transactions per step | {p["per_step"]:.3f} | 1 (+ 1 claim per slice) |

The floor is one commit per compute/model step (output, checkpoint and step run
together) and one claim per slice; the last step's commit also completes the
execution and releases the lease. Durable engines such as DBOS pay about N+2
commits for N steps.

### Throughput, one worker in-process (no broker)

{p["steps"]} steps in total: **{p["steps_per_s"]:.0f} steps/s**, {p["ms_per_step"]:.2f} ms per step
(on PostgreSQL one statement, one round trip and one commit each: the fenced
checkpoint of the row with its JSON context, and the step run; executions/engine/writer.py).

### End to end: {e["workers"]} Celery worker processes over Redis

{e["executions"]} executions started through `execution_start` (commit, then the
Celery message on commit): all completed in {e["seconds"]:.1f} s —
**{e["executions_per_s"]:.1f} executions/s, {e["steps_per_s"]:.0f} steps/s**.

Numbers are from one run on a shared 2-core machine (1-minute load average
{os.getloadavg()[0]:.1f} when it ended); compare runs on the same machine only.
"""
    doc.write_section("keel", text)
    print("wrote the keel section of docs/BENCHMARKS.md")


if __name__ == "__main__":
    main()
