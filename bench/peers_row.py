"""keel's row for the side-by-side benchmark in ``/work/shared/bench-peers`` (DBOS,
LangGraph, a bare Celery chain, pgbench): ``OURS_CMD=".venv/bin/python bench/peers_row.py"``.

    .venv/bin/python bench/peers_row.py N

The peers' work: one workflow = 5 no-op compute steps (``bench_noop5``), N workflows
per row, on a database of its own (``BENCH_PEERS_DB``, default ``keel_bench_peers``,
dropped and recreated) and a Redis database of its own (``BENCH_BROKER_URL``, default
``redis://127.0.0.1:6379/13``, flushed). Prints one JSON line shaped like the peers'
(``{"system": "keel", "rows": [...], ...}``); progress goes to stderr.

Rows:
- in-process, concurrency 1: ``execution_start`` in the caller, whose dispatch runs
  the slice right there (Celery eager), so the call returns when the workflow is
  done: the counterpart of DBOS's direct call;
- end to end through Celery, one worker with 2 prefork processes over Redis: closed
  loops at 1 and 8 client threads (latency: ``execution_start`` → the mark of the
  task that completed it, see bench/marks.py) and an open loop (start all N, time
  to the last completion).

Besides the rows:
- ``resume_latency``: ``bench_gate`` executions wait at their approval gate; a
  manager's decision (``approval_decide``) commits; latency from that commit to the
  mark of the task that ran the step after the gate (``BENCH_RESUME_N``, default
  min(N, 200), one at a time, on the same 2 worker processes, idle otherwise);
- ``worker_rss``: the worker processes' resident memory, sampled as they serve
  executions, topped up to ``BENCH_RSS_EXECUTIONS`` (default 10000; 0: no top-up).

The Postgres costs per workflow are the peers' own ``common.snapshot`` and
``common.per_workflow`` (loaded from ``BENCH_PEERS_DIR``, default
``../shared/bench-peers``), each snapshot taken with this process's connections
closed and the workers idle for ``IDLE_SECONDS`` (PostgreSQL 15 publishes an idle
backend's counters within a second, an exiting one's at exit). Their write
transactions and WAL are cluster-wide, so other work on the same PostgreSQL counts
in them; keel's rows add ``own_write_txns_per_wf`` and ``own_wal_bytes_per_wf``:
the committed transactions and WAL records of this database alone, read back from
the WAL with pg_walinspect (needs a superuser, as creating the database does).
"""

from __future__ import annotations

import concurrent.futures as cf
import importlib.util
import os
import sys
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import harness

DB = os.environ.get("BENCH_PEERS_DB", "keel_bench_peers")
BROKER = os.environ.get("BENCH_BROKER_URL", "redis://127.0.0.1:6379/13")
PEERS_DIR = Path(os.environ.get("BENCH_PEERS_DIR", harness.ROOT.parent / "shared" / "bench-peers"))
WORKFLOW = "bench_noop5"
WARMUP = 50  # in-process, as the peers' DBOS and LangGraph scripts
E2E_WARMUP = 20  # end to end, as the peers' Celery script
IDLE_SECONDS = 1.5
WORKER_PROCESSES = 2

harness.configure(db=DB, broker=BROKER)
os.environ.setdefault("PEERS_PG", harness.PG)  # the peers' snapshots read the same cluster


def load_peers_common():
    """The peers' ``common`` module (snapshot, per_workflow, rate_row, pct, emit), unchanged."""
    path = PEERS_DIR / "common.py"
    if not path.exists():
        raise SystemExit(f"bench/peers_row.py: {path} not found; set BENCH_PEERS_DIR to the bench-peers folder")
    spec = importlib.util.spec_from_file_location("bench_peers_common", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


peers = load_peers_common()


def main() -> None:
    if len(sys.argv) < 2 or not sys.argv[-1].isdecimal() or int(sys.argv[-1]) < 1:
        raise SystemExit("usage: bench/peers_row.py N   (N: workflows per row, a positive integer)")
    n = int(sys.argv[-1])
    resume_n = int(os.environ.get("BENCH_RESUME_N", min(n, 200)))
    rss_target = int(os.environ.get("BENCH_RSS_EXECUTIONS", "10000"))

    harness.recreate_database(DB)
    import django

    django.setup()
    import redis
    from django.contrib.auth import get_user_model
    from django.contrib.auth.models import Group

    from accounts.roles import ensure_roles

    r = redis.Redis.from_url(BROKER)
    r.flushdb()
    ensure_roles()
    User = get_user_model()
    requester = User.objects.create_user("bench")
    manager = User.objects.create_user("bench-manager")
    manager.groups.add(Group.objects.get(name="managers"))

    OWN.hold()
    bench = E2E(r, requester)
    try:
        rows = [in_process(n, requester)]
        peers.log(rows[-1])
        bench.start()
        for concurrency in (1, 8):
            rows.append(bench.closed_loop(n, concurrency))
            peers.log(rows[-1])
        rows.append(bench.open_loop(n))
        peers.log(rows[-1])
        resume = bench.resume_latency(resume_n, manager)
        peers.log({"resume_latency": resume})
        bench.top_up(rss_target)
        rss = bench.rss_report(rss_target)
        peers.log({"worker_rss": rss})
    finally:
        bench.stop()
        OWN.release()
        r.flushdb()
    peers.emit(
        "keel",
        rows,
        resume_latency=resume,
        worker_rss=rss,
        versions=peers.versions("Django", "celery", "kombu", "psycopg", "django-fsm-2"),
    )


def in_process(n: int, user) -> dict:
    """Concurrency 1, no broker: each ``execution_start`` runs its slice before returning."""
    from django.db import connections

    from config.celery import app
    from executions.models import Execution, Status, StepRun
    from executions.services import execution_start

    app.conf.task_always_eager = True
    try:
        for i in range(WARMUP):
            execution_start(user=user, workflow=WORKFLOW, input={"n": -1 - i})
        before = quiet_snapshot(connections)
        latencies = []
        t0 = time.perf_counter()
        for i in range(n):
            t = time.perf_counter()
            execution_start(user=user, workflow=WORKFLOW, input={"n": i})
            latencies.append(time.perf_counter() - t)
        seconds = time.perf_counter() - t0
        after = quiet_snapshot(connections)
    finally:
        app.conf.task_always_eager = False
    done = Execution.objects.filter(workflow=WORKFLOW, status=Status.COMPLETED).count()
    steps = StepRun.objects.filter(execution__workflow=WORKFLOW, outcome=StepRun.Outcome.SUCCEEDED).count()
    assert done == WARMUP + n and steps == 5 * done, (done, steps, n)
    return peers.rate_row(
        "keel",
        "in-process: execution_start, slice in the caller",
        1,
        n,
        seconds,
        latencies,
        **costs(before, after, n),
        checked={"completed": done, "step_runs": steps},
    )


def quiet_snapshot(connections) -> dict:
    """The peers' snapshot, with this process's connections closed and the workers idle,
    plus the WAL position (bytes) for ``costs``."""
    connections.close_all()
    time.sleep(IDLE_SECONDS)
    snapshot = peers.snapshot(DB, "public")
    snapshot["lsn"] = harness.OwnWal.position()
    return snapshot


OWN = harness.OwnWal(DB)


def costs(before: dict, after: dict, n: int) -> dict:
    """The peers' per-workflow costs, and keel's own write transactions and WAL bytes."""
    out = peers.per_workflow(before, after, n)
    commits, wal = OWN.between(before["lsn"], after["lsn"])
    out.update(own_write_txns_per_wf=round(commits / n, 2), own_wal_bytes_per_wf=round(wal / n))
    return out


class E2E:
    """One ``celery worker --pool prefork --concurrency 2`` over Redis, and its clients."""

    def __init__(self, r, user) -> None:
        self.r = r
        self.user = user
        self.worker = None
        self.served = 0  # executions the worker processes have completed
        self.samples: list[dict] = []

    def start(self) -> None:
        self.worker = harness.start_worker(
            name="keel-bench-peers",
            log=harness.ROOT / "var" / "bench" / "peers-worker.log",
            args=["--pool", "prefork", "--concurrency", str(WORKER_PROCESSES)],
            env={"KEEL_BENCH_MARKS": BROKER},  # the workers mark completions; this process doesn't
        )
        self.open_loop(E2E_WARMUP, measured=False)  # up, connected, warm
        self.sample()

    def stop(self) -> None:
        if self.worker is not None:
            harness.stop_worker(self.worker)

    def _start(self, i: int) -> int:
        from executions.services import execution_start

        return execution_start(user=self.user, workflow=WORKFLOW, input={"n": i})[0].pk

    def _wait_done(self, execution_id: int) -> float:
        from bench.marks import wait_done

        return wait_done(self.r, execution_id)

    def closed_loop(self, n: int, concurrency: int) -> dict:
        from django.db import connections

        latencies = []

        def client(count: int, first: int) -> None:
            try:
                for i in range(first, first + count):
                    t = time.perf_counter()
                    self._wait_done(self._start(i))
                    latencies.append(time.perf_counter() - t)
            finally:
                connections.close_all()

        share = [n // concurrency + (k < n % concurrency) for k in range(concurrency)]
        firsts = [sum(share[:k]) for k in range(concurrency)]
        before = quiet_snapshot(connections)
        t0 = time.perf_counter()
        with cf.ThreadPoolExecutor(concurrency) as pool:
            list(pool.map(client, share, firsts))
        seconds = time.perf_counter() - t0
        after = quiet_snapshot(connections)
        self.served += n
        self.sample()
        return peers.rate_row(
            "keel",
            f"Celery, {WORKER_PROCESSES} worker processes, closed loop",
            concurrency,
            n,
            seconds,
            latencies,
            **costs(before, after, n),
            checked=self.check(),
        )

    def open_loop(self, n: int, *, measured: bool = True) -> dict | None:
        from django.db import connections

        from bench.marks import PREFIX

        before = quiet_snapshot(connections) if measured else None
        self.r.set(f"{PREFIX}:count", 0)
        t0 = time.time()
        for i in range(n):
            self._start(i)
        sent = time.time() - t0
        harness.wait_until(
            lambda: int(self.r.get(f"{PREFIX}:count") or 0) >= n, timeout=max(300, n), what=f"{n} executions"
        )
        seconds = float(self.r.get(f"{PREFIX}:last")) - t0
        self.served += n
        self._forget_marks()
        if not measured:
            return None
        after = quiet_snapshot(connections)
        self.sample()
        return peers.rate_row(
            "keel",
            f"Celery, {WORKER_PROCESSES} worker processes, open: send all, wait",
            "all N",
            n,
            seconds,
            **costs(before, after, n),
            send_seconds=round(sent, 3),
            checked=self.check(),
        )

    def _forget_marks(self) -> None:
        from bench.marks import PREFIX

        keys = list(self.r.scan_iter(f"{PREFIX}:done:*", count=1000))
        for i in range(0, len(keys), 500):
            self.r.delete(*keys[i : i + 500])

    def check(self) -> dict:
        from executions.models import Execution, Status

        left = Execution.objects.filter(workflow=WORKFLOW).exclude(status=Status.COMPLETED).count()
        done = Execution.objects.filter(workflow=WORKFLOW, status=Status.COMPLETED).count()
        assert left == 0, f"{left} {WORKFLOW} executions not completed"
        return {"completed": done}

    def resume_latency(self, m: int, manager) -> dict:
        """Decision committed → the task that ran the step after the gate marked it done."""
        from django.db import transaction

        from approvals.models import ApprovalRequest
        from approvals.services import approval_decide
        from executions.models import Execution, Status, StepRun
        from executions.services import execution_start

        latencies = []
        refs = []
        for i in range(m):
            execution, _ = execution_start(user=self.user, workflow="bench_gate", input={"n": i})
            self._wait_done(execution.pk)  # stopped at the gate
            request = ApprovalRequest.objects.get(execution=execution, step="review")
            committed: list[float] = []
            with transaction.atomic():
                # Registered before the decision's own dispatch: runs first, right after the commit.
                transaction.on_commit(lambda committed=committed: committed.append(time.time()))
                result = approval_decide(
                    user=manager,
                    execution_ref=execution.ref,
                    approval_id=request.pk,
                    decision="approve",
                    artifact_version=request.version,
                    content_sha256=request.content_sha256,
                    event_id=uuid.uuid4().hex,
                )
            assert result.execution_status == Status.RUNNING, result.execution_status
            latencies.append(self._wait_done(execution.pk) - committed[0])
            refs.append(execution.pk)
        self.served += m
        done = Execution.objects.filter(pk__in=refs, status=Status.COMPLETED).count()
        after_gate = StepRun.objects.filter(execution__in=refs, step="after", outcome="succeeded").count()
        assert done == after_gate == m, (done, after_gate, m)
        self.sample()
        return {
            "n": m,
            "p50_ms": peers.pct(latencies, 0.50),
            "p99_ms": peers.pct(latencies, 0.99),
            "mean_ms": round(sum(latencies) / len(latencies) * 1000, 2),
            "from": "approval_decide's commit (on_commit hook registered first)",
            "to": "postrun mark of the task that ran the step after the gate (and completed the execution)",
            "checked": {"completed": done},
        }

    def top_up(self, target: int) -> None:
        """Serve executions (open loop, batches of 1000) until the workers served ``target``."""
        while self.served < target:
            self.open_loop(min(1000, target - self.served), measured=False)
            self.sample()

    def sample(self) -> None:
        parent = self.worker.pid
        self.samples.append(
            {
                "executions": self.served,
                "parent_mb": harness.rss_mb(parent),
                "children_mb": [harness.rss_mb(c) for c in harness.children(parent)],
            }
        )

    def rss_report(self, target: int) -> dict:
        last = self.samples[-1]
        first = self.samples[0]
        return {
            "executions_served": self.served,
            "target": target,
            "max_child_mb": max(last["children_mb"] or [0]),
            "parent_mb": last["parent_mb"],
            "after_warmup_max_child_mb": max(first["children_mb"] or [0]),
            "samples": self.samples,
            "note": "VmRSS of the prefork parent and its 2 children (shared pages counted in each)",
        }


if __name__ == "__main__":
    main()
