"""Access by workflow off and on (issue 45 item 2; issue 46 item 5): what the rule costs.

The hot path — bench/hotpath.py's in-process 5-step no-op workflow — run in a fresh process
per pass, without ``KEEL_WORKFLOW_ACCESS`` and with a rule naming another workflow,
alternately, three passes each (the runtime reads as no one: the rule must cost it
nothing). Then a person's read: ``GET /api/executions`` (a page of 50) as a user the rule
hides a workflow from, against the same read with no rule — statements and the median time
of 50 calls. Then what every scoped read adds when no rule is set, alone. Writes the
"access" section of docs/BENCHMARKS.md.

    .venv/bin/python bench/access.py [N]        (N workflows per pass, default 400)
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import doc, harness

DB = os.environ.get("BENCH_ACCESS_DB", "keel_bench_access")
BROKER = os.environ.get("BENCH_BROKER_URL", "redis://127.0.0.1:6379/13")
WORKFLOW, STEPS, WARMUP, PASSES, READS = "bench_noop5", 5, 50, 3, 100
RULE = json.dumps({"monthly_report": {"read": ["reporting"], "decide": ["reporting"], "operate": ["reporting"]}})

harness.configure(db=DB, broker=BROKER)


def child(n: int) -> None:
    """One pass in this process: warm up, then N workflows; prints ms per workflow."""
    import django

    django.setup()
    from django.conf import settings

    harness.eager_starts(WARMUP, workflow=WORKFLOW, first=-WARMUP)
    per_workflow = harness.eager_starts(n, workflow=WORKFLOW) / n * 1000
    print(json.dumps({"ms": per_workflow, "rule": bool(settings.KEEL_WORKFLOW_ACCESS)}))


def reads() -> None:
    """A person's page of executions, with no rule and with the rule, alternating in this
    process (the rule is read at each request): statements and the median time of each."""
    import django

    django.setup()
    from django.conf import settings
    from django.contrib.auth import get_user_model
    from django.db import connection
    from django.test import Client

    from executions.models import Execution

    settings.ALLOWED_HOSTS = ["*"]
    reader, _ = get_user_model().objects.get_or_create(username="bench-reader")
    client = Client()
    client.force_login(reader)
    rules = {"none": {}, "rule": json.loads(RULE)}
    found: dict[str, dict] = {}
    times: dict[str, list[float]] = {"none": [], "rule": []}
    for name, rule in rules.items():  # warm each, and count its statements
        settings.KEEL_WORKFLOW_ACCESS = rule
        client.get("/api/executions")
        statements: list[str] = []

        def counted(execute, sql, params, many, context, statements=statements):
            statements.append(sql)
            return execute(sql, params, many, context)

        with connection.execute_wrapper(counted):
            answer = client.get("/api/executions")
        assert answer.status_code == 200, answer.content[:200]
        found[name] = {"queries": len(statements), "items": len(answer.json()["items"])}
    for _ in range(READS):
        for name, rule in rules.items():
            settings.KEEL_WORKFLOW_ACCESS = rule
            started = time.perf_counter()
            client.get("/api/executions")
            times[name].append((time.perf_counter() - started) * 1000)
    settings.KEEL_WORKFLOW_ACCESS = rules["rule"]
    for name in rules:
        found[name]["ms"] = statistics.median(times[name])
    found["hidden"] = Execution.objects.filter(workflow="monthly_report").count()
    print(json.dumps(found))


def helpers() -> None:
    """What a scoped read adds with no rule set, alone: the manager's question (µs, median of 5)."""
    import timeit

    import django

    django.setup()
    from executions.models import Execution

    scoped = [timeit.timeit(lambda: Execution.objects.all(), number=50000) / 50000 * 1e6 for _ in range(5)]
    plain = [timeit.timeit(lambda: Execution._base_manager.all(), number=50000) / 50000 * 1e6 for _ in range(5)]
    print(json.dumps({"scoped_us": statistics.median(scoped), "plain_us": statistics.median(plain)}))


def run(mode: str, n: int, env: dict[str, str]) -> dict:
    done = subprocess.run(
        [sys.executable, __file__, mode, str(n)],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        check=True,
        cwd=harness.ROOT,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def _group() -> None:
    """The group the rule names, and some of the hidden workflow's executions to leave out."""
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.contrib.auth.models import Group

    from executions.services import execution_start

    Group.objects.get_or_create(name="reporting")
    user, _ = get_user_model().objects.get_or_create(username="bench")
    for month in ("2026-01", "2026-02", "2026-03", "2026-04", "2026-05"):
        execution_start(user=user, workflow="monthly_report", input={"month": month})


def main() -> None:
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    n = int(args[-1]) if args else int(os.environ.get("BENCH_ACCESS_N", "400"))
    harness.recreate_database(DB)
    subprocess.run([sys.executable, __file__, "--group"], check=True, cwd=harness.ROOT)
    rule = {"KEEL_WORKFLOW_ACCESS": RULE}
    results: dict[str, list[float]] = {"unset": [], "set": []}
    for _ in range(PASSES):
        for mode, env in (("unset", {}), ("set", rule)):
            found = run("--child", n, env)
            assert found["rule"] == (mode == "set"), found
            results[mode].append(found["ms"])
    unset, ruled = statistics.median(results["unset"]), statistics.median(results["set"])
    read = run("--reads", 0, {})
    open_read, hidden_read = read["none"], read["rule"]
    assert hidden_read["items"] == 50 and read["hidden"] >= 5, read
    alone = run("--helpers", 0, {})
    lines = [
        "## Access by workflow off and on (`bench/access.py`, issues 45 and 46)",
        "",
        f"{harness.machine(DB)}; {time.strftime('%Y-%m-%d')}. N = {n} workflows of {STEPS} no-op steps per pass, "
        f"in-process (Celery eager), {PASSES} passes of each alternating, each in a fresh process; the median.",
        "",
        "| `KEEL_WORKFLOW_ACCESS` | ms per workflow | steps/s | passes (ms per workflow) |",
        "|---|---|---|---|",
        f"| unset | {unset:.2f} | {STEPS * 1000 / unset:.0f} | "
        + ", ".join(f"{v:.2f}" for v in results["unset"])
        + " |",
        f"| a rule naming another workflow | {ruled:.2f} | {STEPS * 1000 / ruled:.0f} | "
        + ", ".join(f"{v:.2f}" for v in results["set"])
        + " |",
        "",
        f"The runtime reads as no one, so a rule adds no statement and no condition to its work: "
        f"{ruled - unset:+.2f} ms per workflow ({(ruled / unset - 1) * 100:+.1f} %), within what passes differ by.",
        "",
        "A person's read, `GET /api/executions` (a page of 50, in-process, the two alternating, the median of "
        f"{READS} each): with no rule {open_read['ms']:.1f} ms in {open_read['queries']} statements; as a user the rule "
        f"hides `monthly_report` from, {hidden_read['ms']:.1f} ms in {hidden_read['queries']} statements (the "
        "reader's groups, once a request; each read of an execution's rows with `NOT (workflow IN (…))`).",
        "",
        f"With no rule set, what every scoped read adds alone (the manager asking who is looking): "
        f"{alone['scoped_us'] - alone['plain_us']:.2f} µs ({alone['scoped_us']:.2f} against "
        f"{alone['plain_us']:.2f} µs to build the queryset), against ~{unset * 1000 / STEPS:.0f} µs per step.",
    ]
    doc.write_section("access", "\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    if "--child" in sys.argv:
        child(int(sys.argv[-1]))
    elif "--reads" in sys.argv:
        reads()
    elif "--helpers" in sys.argv:
        helpers()
    elif "--group" in sys.argv:
        _group()
    else:
        main()
