"""keel in the anchors' own units (issue 46, item 3), beside their published figures.

1. **Steps/s per PostgreSQL vCPU** (DBOS's unit): every PostgreSQL process pinned to core 0,
   the in-process client (bench_noop5, Celery eager: the counterpart of DBOS's direct call)
   to core 1; steps/s, how busy core 0 was, and so the steps per PostgreSQL CPU-second.
2. **Latency against load** (Hatchet's table): one worker of 2 prefork processes over Redis;
   starts offered at a fixed rate for ``SECONDS`` each, open loop; for each rate the
   throughput achieved, PostgreSQL's CPU and start-to-complete p50/p95/p99.
3. **A three-step round trip** (Restate's and Temporal Cloud's figure): ``bench_noop3``
   started over HTTP (``POST /api/executions`` to the production web server, gunicorn's
   ASGI worker) until the client holds its completion (the worker's mark, after the last
   commit), one at a time; and the same started in-process.

    .venv/bin/python bench/anchors.py [N]     (N workflows for 1, default 1000)

Needs to set the CPU affinity of PostgreSQL's processes (root, on this machine; else part 1
is skipped, said so). Writes the "anchors" section of docs/BENCHMARKS.md.
"""

from __future__ import annotations

import contextlib
import json
import os
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import harness

DB = os.environ.get("BENCH_ANCHORS_DB", "keel_bench_anchors")
BROKER = os.environ.get("BENCH_BROKER_URL", "redis://127.0.0.1:6379/13")
RATES = (10, 25, 50, 100, 150, 200)
SECONDS = float(os.environ.get("BENCH_ANCHORS_SECONDS", "10"))
ROUND_TRIPS = int(os.environ.get("BENCH_ANCHORS_ROUND_TRIPS", "200"))
WEB_PORT = int(os.environ.get("BENCH_ANCHORS_PORT", "8391"))

harness.configure(db=DB, broker=BROKER)

SOURCES = {
    "dbos": "https://www.dbos.dev/blog/benchmarking-workflow-execution-scalability-on-postgres",
    "hatchet": "https://docs.hatchet.run/self-hosting/benchmarking",
    "restate": "https://news.ycombinator.com/item?id=40659160",
    "temporal": "https://temporal.io/blog/reduce-latency-and-speed-up-your-temporal-workflows",
}


# --- what the kernel says


def postgres_pids() -> list[int]:
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdecimal():
            try:
                if (entry / "comm").read_text().strip() == "postgres":
                    pids.append(int(entry.name))
            except OSError:
                pass
    return pids


def postgres_cpu() -> float:
    """CPU seconds PostgreSQL has used: its live processes' user + system time, plus what the
    postmaster reaped from backends that exited (``cutime``/``cstime``), so a backend that
    ends inside a window still counts."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0
    for pid in postgres_pids():
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12]) + int(fields[13]) + int(fields[14])
        except (OSError, IndexError, ValueError):
            pass
    return total / tick


def core_busy(core: int) -> tuple[float, float]:
    """(busy, total) jiffies of ``core`` since boot (/proc/stat)."""
    for line in Path("/proc/stat").read_text().splitlines():
        if line.startswith(f"cpu{core} "):
            values = [int(v) for v in line.split()[1:]]
            idle = values[3] + values[4]  # idle + iowait
            return sum(values) - idle, sum(values)
    raise SystemExit(f"benchmark: no core {core} in /proc/stat")


# --- 1. per PostgreSQL vCPU


def in_process(n: int) -> None:
    """Child (pinned by its parent): n bench_noop5 workflows in-process; prints steps/s."""
    import django

    django.setup()
    harness.eager_starts(50, first=-50)
    print("warm", flush=True)
    sys.stdin.readline()  # the parent reads core 0's counters, then says go
    seconds = harness.eager_starts(n)
    print(json.dumps({"steps_per_s": 5 * n / seconds, "seconds": seconds}), flush=True)


def per_vcpu(n: int) -> dict | None:
    pids = postgres_pids()
    try:
        before = {pid: os.sched_getaffinity(pid) for pid in pids}
        for pid in pids:
            os.sched_setaffinity(pid, {0})
    except (PermissionError, ProcessLookupError) as exc:
        print(f"anchors: PostgreSQL's processes can't be pinned ({exc}): part 1 skipped", file=sys.stderr)
        return None
    try:
        child = subprocess.Popen(
            [sys.executable, __file__, "--in-process", str(n)],
            cwd=harness.ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            preexec_fn=lambda: os.sched_setaffinity(0, {1}),
        )
        assert child.stdout is not None and child.stdin is not None
        assert child.stdout.readline().strip() == "warm"
        busy0, total0 = core_busy(0)
        child.stdin.write("go\n")
        child.stdin.flush()
        result = json.loads(child.stdout.readline())
        busy1, total1 = core_busy(0)
        child.wait()
    finally:
        for pid, cores in before.items():
            with contextlib.suppress(ProcessLookupError):
                os.sched_setaffinity(pid, cores)
        for pid in postgres_pids():  # the backends forked meanwhile inherited core 0
            with contextlib.suppress(ProcessLookupError):
                os.sched_setaffinity(pid, set(range(os.cpu_count() or 1)))
    busy = (busy1 - busy0) / max(total1 - total0, 1)
    result.update(core0_busy=busy, steps_per_pg_cpu_s=result["steps_per_s"] / busy if busy else None)
    return result


# --- 2 and 3: one worker, over Redis


class Worker:
    def __init__(self) -> None:
        import redis

        self.r = redis.Redis.from_url(BROKER)
        self.r.flushdb()
        self.proc = harness.start_worker(
            name="keel-bench-anchors",
            log=harness.ROOT / "var" / "bench" / "anchors-worker.log",
            args=["--pool", "prefork", "--concurrency", "2"],
            env={"KEEL_BENCH_MARKS": BROKER},
        )

    def done_at(self, execution_id: int) -> float:
        from bench.marks import wait_done

        return wait_done(self.r, execution_id)

    def stop(self) -> None:
        harness.stop_worker(self.proc)


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000


def against_load(worker: Worker, user) -> list[dict]:
    from executions.services import execution_start

    for i in range(20):  # up, connected, warm
        worker.done_at(execution_start(user=user, workflow="bench_noop5", input={"n": -1 - i})[0].pk)
    rows = []
    for rate in RATES:
        pg_cpu0, wall0 = postgres_cpu(), time.time()
        started: dict[int, float] = {}
        count = int(rate * SECONDS)
        begin = time.perf_counter()
        for i in range(count):
            due = begin + i / rate
            while (wait := due - time.perf_counter()) > 0:
                time.sleep(wait)
            at = time.time()
            started[execution_start(user=user, workflow="bench_noop5", input={"n": i})[0].pk] = at
        sent = time.perf_counter() - begin
        ends = {pk: worker.done_at(pk) for pk in started}
        wall = max(ends.values()) - min(started.values())
        pg_cpu = (postgres_cpu() - pg_cpu0) / (time.time() - wall0)
        latencies = [ends[pk] - started[pk] for pk in started]
        rows.append(
            {
                "offered": rate,
                "sent_per_s": count / sent,
                "achieved": count / wall,
                "pg_cpu": pg_cpu,
                "p50": pct(latencies, 0.50),
                "p95": pct(latencies, 0.95),
                "p99": pct(latencies, 0.99),
            }
        )
        print(json.dumps(rows[-1]), file=sys.stderr)
        if rows[-1]["achieved"] < 0.8 * rate:  # past what it sustains: higher rates only queue
            break
    return rows


def web_server() -> subprocess.Popen:
    log = harness.ROOT / "var" / "bench" / "anchors-web.log"
    proc = subprocess.Popen(
        [
            str(Path(sys.executable).parent / "gunicorn"),
            "config.asgi",
            "--worker-class",
            "config.web_worker.ASGIWorker",
            "--bind",
            f"127.0.0.1:{WEB_PORT}",
            "--workers",
            "1",
            "--no-control-socket",
        ],
        cwd=harness.ROOT,
        env={**os.environ, "DJANGO_ALLOWED_HOSTS": "127.0.0.1"},
        stdout=open(log, "w"),  # noqa: SIM115 - the server's log, closed with the process
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )

    def up() -> bool:
        try:
            return urllib.request.urlopen(f"http://127.0.0.1:{WEB_PORT}/login/", timeout=1).status == 200
        except OSError:
            return False

    harness.wait_until(up, timeout=60, what="the web server", interval=0.2)
    return proc


def round_trips(worker: Worker, user) -> dict:
    import requests

    from accounts.tokens import api_token_create
    from executions.services import execution_start

    token = api_token_create(user=user)
    web = web_server()
    http_times, direct_times = [], []
    try:
        with requests.Session() as client:  # one kept-alive connection, as a service calling keel holds
            client.headers["Authorization"] = f"Bearer {token}"
            url = f"http://127.0.0.1:{WEB_PORT}/api/executions"
            for i in range(20 + ROUND_TRIPS):
                body = {"workflow": "bench_noop3", "input": {"n": i}}
                started = time.perf_counter()
                answer = client.post(url, json=body, timeout=30)
                assert answer.status_code == 201, answer.text
                pk = int(answer.json()["id"].removeprefix("RUN_"))
                worker.done_at(pk)
                if i >= 20:
                    http_times.append(time.perf_counter() - started)
        for i in range(ROUND_TRIPS):
            started = time.perf_counter()
            worker.done_at(execution_start(user=user, workflow="bench_noop3", input={"n": 10_000 + i})[0].pk)
            direct_times.append(time.perf_counter() - started)
    finally:
        harness.stop_worker(web)
    return {
        "http": {"p50": pct(http_times, 0.5), "p99": pct(http_times, 0.99), "mean": statistics.mean(http_times) * 1000},
        "direct": {"p50": pct(direct_times, 0.5), "p99": pct(direct_times, 0.99)},
    }


def main() -> None:
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    n = int(args[-1]) if args else int(os.environ.get("BENCH_ANCHORS_N", "1000"))
    harness.recreate_database(DB)
    vcpu = per_vcpu(n)
    import django

    django.setup()
    from django.contrib.auth import get_user_model

    user, _ = get_user_model().objects.get_or_create(username="bench")
    worker = Worker()
    try:
        load = against_load(worker, user)
        trip = round_trips(worker, user)
    finally:
        worker.stop()
    write(n, vcpu, load, trip)


def write(n: int, vcpu: dict | None, load: list[dict], trip: dict) -> None:
    from bench import doc

    lines = [
        "## keel in the anchors' units (`bench/anchors.py`, issue 46)",
        "",
        f"{harness.machine(DB)}; {time.strftime('%Y-%m-%d')}. The anchors' figures are theirs, as published, "
        "on their hardware; keel's are this machine's.",
        "",
        "### Steps per second per PostgreSQL vCPU (DBOS's unit)",
        "",
    ]
    if vcpu is None:
        lines.append("Not measured: PostgreSQL's processes could not be pinned to one core here.")
    else:
        lines += [
            f"PostgreSQL pinned to core 0, the in-process client (N = {n} `bench_noop5` workflows, Celery eager) "
            f"to core 1: **{vcpu['steps_per_s']:.0f} steps/s** with core 0 {vcpu['core0_busy'] * 100:.0f} % busy, "
            f"so **{vcpu['steps_per_pg_cpu_s']:.0f} steps per PostgreSQL CPU-second** — the client's core, not "
            "PostgreSQL's, is the limit of one client process.",
            "",
            "DBOS, published: a single PostgreSQL server of 96 vCPUs sustained 43,000 workflows/s "
            "(each workflow two writes) and 144,000 single-row writes/s — about 450 workflows and 1,500 writes a "
            f"second per vCPU ([DBOS]({SOURCES['dbos']})).",
        ]
    lines += [
        "",
        "### Latency against load (Hatchet's table)",
        "",
        "One worker (2 prefork processes) over Redis, on the same 2 cores as PostgreSQL and the client; "
        f"`bench_noop5` started at each rate for {SECONDS:.0f} s, open loop; start → the worker's completion mark.",
        "",
        "| offered runs/s | achieved runs/s | PostgreSQL CPU (of one core) | p50 ms | p95 ms | p99 ms |",
        "|---:|---:|---:|---:|---:|---:|",
    ]
    for row in load:
        lines.append(
            f"| {row['offered']} | {row['achieved']:.0f} | {row['pg_cpu'] * 100:.0f} % | {row['p50']:.1f} | "
            f"{row['p95']:.1f} | {row['p99']:.1f} |"
        )
    lines += [
        "",
        "Hatchet, published, on an 8-vCPU database (RDS m7g.2xlarge): 100 runs/s at 15 % database CPU, 500 at "
        f"60 %, 2,000 at 83 % ([Hatchet]({SOURCES['hatchet']})).",
        "",
        "### A three-step round trip (Restate's and Temporal Cloud's figure)",
        "",
        f"`bench_noop3`, one at a time, {ROUND_TRIPS} each after 20 to warm up: from the client's "
        "`POST /api/executions` to the client holding the completion (the worker's mark after the last commit), "
        f"through the production web server: **p50 {trip['http']['p50']:.1f} ms, p99 {trip['http']['p99']:.1f} ms** "
        f"(mean {trip['http']['mean']:.1f}); started in-process instead: p50 {trip['direct']['p50']:.1f} ms, "
        f"p99 {trip['direct']['p99']:.1f} ms.",
        "",
        'Restate, published: "around 50ms roundtrip (invoke to result) for a 3-step durable workflow handler" '
        f"with an fsync per step ([Restate]({SOURCES['restate']})); Temporal Cloud: a minimum end-to-end workflow "
        f"latency around 100 ms ([Temporal]({SOURCES['temporal']})).",
    ]
    doc.write_section("anchors", "\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    if "--in-process" in sys.argv:
        in_process(int(sys.argv[-1]))
    else:
        main()
