"""`make bench`: what a parent with N children costs, against N independent executions.

The claim (issue 21): a parent with 100 children costs no more than 100 independent
executions plus one. Measured on its own database, exactly, from its own WAL records
(pg_walinspect, as bench/run.py):

1. N independent ``bench_child`` executions (one compute step each), started through
   ``execution_start`` and advanced by the runner in this process, then one more (the
   "plus one");
2. one ``bench_parent`` whose children step starts N ``bench_child``s (in the
   transaction that parks it), each child advanced in this process, the parent woken
   by the last child's commit, then its last step;
3. time to wake the parent: the last child's completion → the parent's ``wake`` →
   the parent's next step started — in process, and with real Celery workers over
   Redis (the message after the wake).

``BENCH_CHILDREN`` (default 100) sets N; run it small to try it (``BENCH_CHILDREN=5``).
Writes the "children" section of docs/BENCHMARKS.md (``BENCH_WRITE=0``: print only).
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
DB = os.environ.get("BENCH_DB", "keel_bench_children")
BROKER = os.environ.get("BENCH_BROKER_URL", "redis://127.0.0.1:6379/14")
N = int(os.environ.get("BENCH_CHILDREN", "100"))
WORKERS = int(os.environ.get("BENCH_WORKERS", "2"))
WRITE = os.environ.get("BENCH_WRITE", "1") != "0"

harness.configure(db=DB, broker=BROKER, RUNTIME_LEASE_SECONDS="300", RUNTIME_SLICE_SECONDS="60")


def main() -> None:
    harness.recreate_database(DB)
    import django

    django.setup()
    import logging

    import redis

    logging.getLogger("executions").setLevel(logging.WARNING)
    from django.contrib.auth import get_user_model

    from executions.engine import runner
    from executions.models import Execution, ExecutionEvent, Status, StepRun
    from executions.services import execution_start

    redis.Redis.from_url(BROKER).flushdb()
    user = get_user_model().objects.create_user("bench")
    own = harness.OwnWal(DB)

    def run(pk: int) -> None:
        runner.advance(pk, worker="bench")

    own.hold()
    try:
        # 1: N independent executions, then one more.
        before = own.position()
        independent = [execution_start(user=user, workflow="bench_child", input={"n": i})[0].pk for i in range(N)]
        for pk in independent:
            run(pk)
        after_n = own.position()
        run(execution_start(user=user, workflow="bench_child", input={"n": N})[0].pk)
        independent_writes, _ = own.between(before, after_n)
        one_more, _ = own.between(after_n, own.position())

        # 2: a parent with N children.
        before = own.position()
        parent = execution_start(user=user, workflow="bench_parent", input={"n": N})[0]
        run(parent.pk)  # parks at the children step, the N children created with it
        children = list(Execution.objects.filter(parent=parent).order_by("pk").values_list("pk", flat=True))
        assert len(children) == N, children
        for pk in children:
            run(pk)
        assert Execution.objects.get(pk=parent.pk).status == Status.RUNNING  # woken by the last child
        run(parent.pk)
        family_writes, _ = own.between(before, own.position())
    finally:
        own.release()
    assert Execution.objects.get(pk=parent.pk).status == Status.COMPLETED
    in_process = _wake_times(parent.pk, Execution, ExecutionEvent, StepRun)

    # 3: the same with real workers over Redis.
    redis.Redis.from_url(BROKER).flushdb()
    workers = [
        harness.start_worker(name=f"children{i}", log=ROOT / "var" / "bench" / f"children{i}.log", args=["--pool=solo"])
        for i in range(WORKERS)
    ]
    try:
        time.sleep(4)
        t0 = time.perf_counter()
        e2e_parent = execution_start(user=user, workflow="bench_parent", input={"n": N})[0]
        harness.wait_until(
            lambda: Execution.objects.get(pk=e2e_parent.pk).status == Status.COMPLETED,
            timeout=600,
            what="the parent and its children to complete with real workers",
            interval=0.05,
        )
        e2e_seconds = time.perf_counter() - t0
    finally:
        for worker in workers:
            harness.stop_worker(worker)
    e2e = _wake_times(e2e_parent.pk, Execution, ExecutionEvent, StepRun)

    result = {
        "children": N,
        "independent_writes": independent_writes,
        "one_more": one_more,
        "family_writes": family_writes,
        "bound": independent_writes + one_more,
        "within": family_writes <= independent_writes + one_more,
        "in_process": in_process,
        "e2e": {**e2e, "seconds": e2e_seconds, "workers": WORKERS},
    }
    print(result)
    if WRITE:
        write_report(result)
    if not result["within"]:
        raise SystemExit(
            f"a parent with {N} children cost {family_writes} write transactions, more than {result['bound']}"
        )


def _wake_times(parent_pk: int, Execution, ExecutionEvent, StepRun) -> dict[str, float]:
    """From the record: the last child's completion → the parent's wake → its next step started (ms)."""
    last_child = (
        ExecutionEvent.objects.filter(execution__parent_id=parent_pk, type="transition", to_status="completed")
        .order_by("-created_at")
        .first()
    )
    wake = ExecutionEvent.objects.get(execution_id=parent_pk, type="transition", payload__transition="wake")
    after = StepRun.objects.get(execution_id=parent_pk, step="after")
    return {
        "to_wake_ms": (wake.created_at - last_child.created_at).total_seconds() * 1000,
        "to_next_step_ms": (after.started_at - last_child.created_at).total_seconds() * 1000,
        "woken_by": wake.actor_label,
    }


def write_report(r: dict) -> None:
    today = datetime.now(UTC).strftime("%Y-%m-%d")
    n = r["children"]
    text = f"""## A parent and its children (`bench/children.py`)

`bench/children.py` on {today}, on {harness.machine(DB)}; N = {n} children of one
compute step each (`bench_parent` / `bench_child`, bench/flows.py). Write transactions
counted exactly from this database's own WAL records (pg_walinspect).

| | write transactions |
|---|---:|
| {n} independent `bench_child` executions (start, claim, step each) | {r["independent_writes"]} |
| one more independent execution ("plus one") | {r["one_more"]} |
| **a parent with {n} children**, start to completion | **{r["family_writes"]}** |
| per child | {r["family_writes"] / n:.2f} (independent: {r["independent_writes"] / n:.2f}) |

The claim holds {"✔" if r["within"] else "✘"}: {r["family_writes"]} ≤ {r["bound"]}. The children are created in
the one transaction that parks the parent (no start transaction each), and a child
that isn't the last reads its parent without a lock (no write); the last one's
commit wakes the parent in one more transaction.

Time to wake the parent (the last child's completion → the parent's `wake` → its
next step started):

| | to wake | to the next step | woken by |
|---|---:|---:|---|
| in process (the runner, no broker) | {r["in_process"]["to_wake_ms"]:.1f} ms | {r["in_process"]["to_next_step_ms"]:.1f} ms | `{r["in_process"]["woken_by"]}` |
| {r["e2e"]["workers"]} Celery workers over Redis | {r["e2e"]["to_wake_ms"]:.1f} ms | {r["e2e"]["to_next_step_ms"]:.1f} ms | `{r["e2e"]["woken_by"]}` |

With the workers the whole family (1 + {n} executions) completed in {r["e2e"]["seconds"]:.1f} s. One run on a
shared 2-core machine (1-minute load average {os.getloadavg()[0]:.1f}); compare runs on the same machine only.
"""
    doc.write_section("children", text)
    print("wrote the children section of docs/BENCHMARKS.md")


if __name__ == "__main__":
    main()
