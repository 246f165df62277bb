"""The triage console at a million executions (issue 12): list, filters, counts, the API
page and one sweeper pass, with their plans. Writes the "triage" section of
docs/BENCHMARKS.md.

Seeds its own database with SQL (``generate_series``, not the ORM): 1,000,000
executions of which 100,000 are not terminal and a few hundred are stuck for a reason
read off the clock (``no_worker``), plus recorded reasons (retrying, rate_limited,
unknown_outcome, permission_denied, retries_exhausted). Events, step runs and
actions are not seeded: none of the measured reads touches them for a page of rows.

    .venv/bin/python bench/triage_scale.py            # 1M rows (about a minute to seed)
    BENCH_TRIAGE_ROWS=100000 .venv/bin/python bench/triage_scale.py
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import doc, harness

DB = os.environ.get("BENCH_TRIAGE_DB", "keel_bench_triage")
ROWS = int(os.environ.get("BENCH_TRIAGE_ROWS", "1000000"))
REPEAT = int(os.environ.get("BENCH_TRIAGE_REPEAT", "20"))

harness.configure(db=DB, broker=os.environ.get("BENCH_BROKER_URL", "redis://127.0.0.1:6379/14"))

# (share of all rows, status, reason_code, columns that make it what it is)
# The last 100,000 ids (10 %) are the live ones, as in a real table: old rows are done.
LIVE = [
    (0.50, "awaiting_approval", "", "gate_sla_at = now() + interval '1 day'"),
    (0.10, "waiting", "", "due_at = now() + interval '6 days'"),
    (0.12, "retry_pending", "retrying", "due_at = now() + interval '5 minutes'"),
    (0.03, "retry_pending", "rate_limited", "due_at = now() + interval '15 minutes'"),
    (
        0.177,
        "running",
        "",
        "lease_owner = 'w', lease_expires_at = now() + interval '1 hour', "
        "step_deadline = now() + interval '10 minutes'",
    ),
    (0.05, "needs_attention", "unknown_outcome", ""),
    (0.02, "needs_attention", "permission_denied", ""),
    (0.003, "pending", "", "status_changed_at = now() - interval '1 hour'"),
]
# What the seed writes of an execution (the other columns keep their defaults).
INSERT = (
    "INSERT INTO executions_execution (workflow, workflow_version, input, input_digest, created_by_id, status, "
    "status_changed_at, status_reason, reason_code, current_step, round, context, lease_owner, lease_token, "
    "failed_attempts, parent_step, child_key, hold_reason, paused_by_workflow, paused_from, created_at, updated_at)"
)
CHILDREN = 100  # the children of one parent (GET /api/executions?parent=…)
STUCK_PENDING = 300  # pending for an hour, nobody claimed them: no_worker (the seeded "pending" rows)


def seed() -> None:
    from django.contrib.auth import get_user_model
    from django.db import connection

    user = get_user_model().objects.create_user("bench")
    done = ROWS - ROWS // 10
    with connection.cursor() as cur:
        cur.execute(
            INSERT
            + """
            SELECT CASE WHEN g %% 3 = 0 THEN 'replacement_order' ELSE 'monthly_report' END, 1, '{}', 'd', %s,
                   CASE WHEN g %% 20 = 0 THEN 'failed' WHEN g %% 25 = 0 THEN 'cancelled' ELSE 'completed' END,
                   now() - interval '30 days', '',
                   CASE WHEN g %% 20 = 0 THEN 'retries_exhausted' ELSE '' END,
                   '', 1, '{}', '', 1, 0, '', '', '', false, '', now() - interval '30 days', now() - interval '30 days'
              FROM generate_series(1, %s) AS g
            """,
            [user.pk, done],
        )
        start = done
        for share, status, code, extra in LIVE:
            n = int(ROWS // 10 * share)
            cur.execute(
                INSERT
                + """
                SELECT CASE WHEN g %% 3 = 0 THEN 'replacement_order' ELSE 'monthly_report' END, 1, '{}', 'd', %s,
                       %s, now() - interval '10 seconds', '', %s, 'publish', 1, '{}', '', 1, 0, '', '', '', false, '',
                       now(), now()
                  FROM generate_series(1, %s) AS g
                """,
                [user.pk, status, code, n],
            )
            if extra:
                cur.execute(
                    f"UPDATE executions_execution SET {extra} WHERE id > %s AND status = %s AND reason_code = %s",
                    [start, status, code],
                )
            start += n
        # A parent and its children (issue 21), and the workers' registry (issue 24): the
        # live rows' leases are owned by the processes of four registered workers.
        cur.execute(
            INSERT
            + """
            VALUES ('quarterly_report', 1, '{}', 'd', %s, 'waiting', now(), '', '', 'monthly_reports', 1, '{}', '', 1,
                    0, '', '', '', false, '', now(), now())
            RETURNING id
            """,
            [user.pk],
        )
        (parent,) = cur.fetchone()
        cur.execute(
            """
            INSERT INTO executions_execution
              (workflow, workflow_version, input, input_digest, created_by_id, status, status_changed_at,
               status_reason, reason_code, current_step, round, context, lease_owner, lease_token,
               failed_attempts, parent_id, parent_step, child_key, hold_reason, paused_by_workflow, paused_from,
               created_at, updated_at)
            SELECT 'monthly_report', 1, '{}', 'd', %s, 'awaiting_approval', now(), '', '', 'review', 1, '{}', '', 1,
                   0, %s, 'monthly_reports', 'month-' || g, '', false, '', now(), now()
              FROM generate_series(1, %s) AS g
            """,
            [user.pk, parent, CHILDREN],
        )
        cur.execute(
            """
            INSERT INTO fleet_worker (identity, host, pid, queues, pids, started_at, last_seen, beats)
            SELECT 'w' || g || '@bench', 'bench', 1000 + g, '["celery", "control"]', '[]', now(), now(), 1
              FROM generate_series(1, 4) AS g
            """
        )
        cur.execute(
            "UPDATE executions_execution SET lease_owner = 'worker:bench:' || (1000 + id % 4) || ':x' "
            "WHERE status = 'running'"
        )
        cur.execute("UPDATE fleet_worker SET pids = jsonb_build_array(pid)")
        cur.execute("VACUUM ANALYZE executions_execution")
        cur.execute(
            "SELECT count(*), count(*) FILTER (WHERE status NOT IN ('completed','failed','cancelled')) "
            "FROM executions_execution"
        )
        total, live = cur.fetchone()
    print(f"seeded {total:,} executions, {live:,} not terminal", file=sys.stderr)


def timed(fn, repeat: int = REPEAT) -> tuple[float, float]:
    """(p50, max) in milliseconds over ``repeat`` calls (after one warm-up)."""
    fn()
    samples = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - t0) * 1000)
    return statistics.median(samples), max(samples)


def plan(queryset) -> str:
    from django.db import connection

    sql, params = queryset.query.sql_with_params()
    with connection.cursor() as cur:
        cur.execute(f"EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY ON) {sql}", params)
        return "\n".join(row[0] for row in cur.fetchall())


def main() -> int:
    harness.recreate_database(DB)
    import django

    django.setup()
    from django.test import Client

    from accounts.tokens import api_token_create
    from executions import selectors
    from executions.engine import sweeper
    from executions.models import TERMINAL, Execution

    t0 = time.monotonic()
    seed()
    seeded = time.monotonic() - t0
    from triage import tallies

    t1 = time.monotonic()
    tallies.refresh(force=True)  # what beat's triage.tally does every ten minutes
    tally_ms = (time.monotonic() - t1) * 1000
    first_live = Execution.objects.filter(status="awaiting_approval").order_by("id").values_list("id", flat=True)[0]
    oldest_done = f"RUN_{1000:04d}"  # the last page of a filter over the old rows
    token = api_token_create(user=Execution.objects.first().created_by)
    client = Client()
    auth = {"HTTP_AUTHORIZATION": f"Bearer {token}"}
    from django.contrib.auth import get_user_model
    from django.contrib.auth.models import Group

    from accounts.roles import ensure_roles

    ensure_roles()
    operator_user = get_user_model().objects.create_user("bench-operator")
    operator_user.groups.add(Group.objects.get(name="operators"))
    operator = {"HTTP_AUTHORIZATION": f"Bearer {api_token_create(user=operator_user)}"}
    parent = Execution.objects.get(workflow="quarterly_report")

    cases = [
        ("list, first page, no filter", lambda: selectors.execution_page()),
        ("list, status=needs_attention", lambda: selectors.execution_page(status="needs_attention")),
        ("list, status=completed, last page", lambda: selectors.execution_page(status="completed", cursor=oldest_done)),
        ("list, reason=no_worker", lambda: selectors.execution_page(reason="no_worker")),
        ("list, reason=unknown_outcome", lambda: selectors.execution_page(reason="unknown_outcome")),
        ("list, workflow=replacement_order", lambda: selectors.execution_page(workflow="replacement_order")),
        ("counts (GET /api/executions/summary)", lambda: tallies.summary()),
        ("API page (GET /api/executions)", lambda: client.get("/api/executions", **auth)),
        ("API page, reason=rate_limited", lambda: client.get("/api/executions?reason=rate_limited", **auth)),
        # The endpoints of the third round (issue 25's target: < 50 ms each).
        ("catalogue (GET /api/workflows)", lambda: client.get("/api/workflows", **auth)),
        ("workers (GET /api/workers)", lambda: client.get("/api/workers", **operator)),
        (
            f"children of a parent (GET /api/executions?parent=…, {CHILDREN})",
            lambda: client.get(f"/api/executions?parent={parent.ref}", **auth),
        ),
    ]
    rows = []
    for name, fn in cases:
        p50, worst = timed(fn)
        rows.append((name, p50, worst))
        print(f"{name}: p50 {p50:.1f} ms, max {worst:.1f} ms", file=sys.stderr)
    # The sweeper: the first pass finds the stuck ones and rings for them; later passes
    # find them again only after redispatch_after.
    p50, worst = timed(lambda: sweeper.sweep(), repeat=10)
    rows.append(("one sweeper pass", p50, worst))
    print(f"sweeper: p50 {p50:.1f} ms, max {worst:.1f} ms", file=sys.stderr)

    plans = {
        "reason=no_worker (first page)": plan(selectors.filtered(reason="no_worker").order_by("-id").values("id")[:51]),
        "status=completed, last page": plan(
            selectors.filtered(status="completed").filter(pk__lt=1000).order_by("-id").values("id")[:51]
        ),
        "sweeper candidates": plan(sweeper.candidates_query()),
    }
    # Issue 12's 100 ms, issue 25's 50 ms for the counts and the third round's endpoints.
    target = {"one sweeper pass": 200, "counts (GET /api/executions/summary)": 50}
    target.update({name: 50 for name, *_ in rows if name.startswith(("catalogue", "workers", "children"))})
    lines = [
        f"Measured {datetime.now(UTC):%Y-%m-%d %H:%M} UTC on {harness.machine(DB)}.",
        f"{Execution.objects.count():,} executions ({Execution.objects.exclude(status__in=TERMINAL).count():,} "
        f"not terminal, {STUCK_PENDING} stuck with no worker), seeded in {seeded:.0f} s with `generate_series`; "
        f"{REPEAT} runs each after a warm-up, in-process (no HTTP server; the API rows go through Django's "
        "test client, so they include authentication, the query and the JSON).",
        "",
        "| read | p50 ms | max ms | target |",
        "|---|---:|---:|---:|",
        *(f"| {name} | {p50:.1f} | {worst:.1f} | < {target.get(name, 100)} |" for name, p50, worst in rows),
        "",
        f"The counts read the terminal executions from triage's tally (triage.tallies, retaken by beat's triage.tally; taking it "
        f"took {tally_ms:.0f} ms, every ten minutes) plus what became terminal since, and count the live ones "
        "directly. The sweeper pass is the steady state: the first one rang for the stuck executions "
        "(one message each), the later ones find them rung recently.",
        "",
        f"The first live row is RUN_{first_live}; the old rows are completed, failed or cancelled.",
        "",
    ]
    for name, text in plans.items():
        lines += [f"Plan: {name}", "", "```", text, "```", ""]
    doc.write_section(
        "triage", "## The triage console at 1M executions (`bench/triage_scale.py`)\n\n" + "\n".join(lines)
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
