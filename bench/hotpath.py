"""Where keel's time goes in the in-process 5-step no-op workflow (`make bench`).

    .venv/bin/python bench/hotpath.py [N]        (N workflows per pass, default 200)

The same work as the in-process row of bench/peers_row.py: ``execution_start`` of
``bench_noop5`` in the caller, whose dispatch runs the slice right there (Celery
eager). Two passes on a database of its own (``BENCH_PROFILE_DB``, default
``keel_bench_profile``):

1. counting: every SQL statement (Django's ``execute_wrapper``: kind, table, shape,
   time including the round trip) and every commit (timed), per workflow, with the
   creation (``execution_start``'s own transaction) and the run (claim + slice)
   apart;
2. cProfile: the profiled time split by who spent it (each function's own time,
   a builtin's charged to the package that called it), and the runtime's own
   functions by cumulative time.
3. bytes: the WAL of ``BENCH_BYTES_N`` (default 1000) more workflows read back record by
   record (pg_walinspect, needs a superuser) and charged to the relation each record
   touches, with each relation's growth on disk: where issue 25's bytes go.

Writes the "profile" section of docs/BENCHMARKS.md; ``--json`` prints the numbers.

``--bytes`` only runs the third pass and prints its table (a lever measured alone).

``--loop N`` only runs N workflows (after the warm-up) in ``measured_loop``, for a
sampling profiler without cProfile's overhead (bench/pyspy_summary.py says how).
"""

from __future__ import annotations

import cProfile
import json
import os
import pstats
import re
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import doc, harness

DB = os.environ.get("BENCH_PROFILE_DB", "keel_bench_profile")
BROKER = os.environ.get("BENCH_BROKER_URL", "redis://127.0.0.1:6379/13")
WORKFLOW = "bench_noop5"
STEPS = 5
WARMUP = 50

harness.configure(db=DB, broker=BROKER)


# --- pass 1: statements and commits -------------------------------------------------

TABLE = re.compile(r'(?:FROM|INTO|UPDATE)\s+"(\w+)"')
SET_COLUMNS = re.compile(r'"(\w+)" = ')


def shape(sql: str) -> tuple[str, str]:
    """(kind, a short label saying which statement it is)."""
    kind = sql.split(None, 1)[0].upper()
    main = re.search(r'FROM\s+"executions_execution"', sql)  # the claim's read: its subqueries read other tables
    found = main and re.match(r'FROM\s+"(\w+)"', main.group(0)) or TABLE.search(sql)
    table = (found.group(1) if found else "?").removeprefix("executions_")
    if kind == "WITH" and "fenced" in sql:  # executions.engine.writer: one fenced UPDATE and its INSERTs
        inserted = [t for t in ("steprun", "executionevent") if f"executions_{t}" in sql]
        kind = "UPDATE+INSERT"
        label = f"WITH fenced UPDATE execution … INSERT {' + '.join(inserted)} (executions.engine.writer)"
    elif kind == "UPDATE":
        head = sql.split(" WHERE ", 1)[0]
        columns = SET_COLUMNS.findall(head.split(" SET ", 1)[-1])
        label = f"UPDATE {table} SET {', '.join(columns)}"
    elif kind == "SELECT" and "COUNT(*)" in sql:
        label = f"SELECT COUNT(*) FROM {table}"
    elif kind == "SELECT" and " FOR " in sql:
        label = f"SELECT {table} … FOR NO KEY UPDATE SKIP LOCKED"
    elif kind == "SELECT":
        label = f"SELECT {table} (whole row{', with context' if 'context' in sql else ''})"
    else:
        label = f"{kind} {table}"
    return kind, label


class Counting:
    """Counts what one phase sends: statements (by kind and shape), transactions, time."""

    def __init__(self, connection) -> None:
        self.connection = connection
        self.kinds: Counter = Counter()
        self.shapes: Counter = Counter()
        self.shape_seconds: defaultdict = defaultdict(float)
        self.autocommit = 0  # statements outside a transaction block: each its own transaction
        self.commits = 0  # explicit transactions (BEGIN … COMMIT)
        self.write_commits = 0
        self.commit_seconds = 0.0
        self._writing = False

    def __call__(self, execute, sql, params, many, context):
        kind, label = shape(sql)
        t = time.perf_counter()
        try:
            return execute(sql, params, many, context)
        finally:
            self.shape_seconds[label] += time.perf_counter() - t
            self.kinds[kind] += 1
            self.shapes[label] += 1
            if self.connection.get_autocommit():
                self.autocommit += 1
            elif kind in ("INSERT", "UPDATE", "DELETE", "UPDATE+INSERT"):
                self._writing = True

    def on_commit(self, seconds: float) -> None:
        self.commits += 1
        self.write_commits += self._writing
        self._writing = False
        self.commit_seconds += seconds


def count_pass(n: int, user) -> dict:
    """Statements and commits per workflow, creation and run apart."""
    from django.db import connection

    from executions.engine import dispatch
    from executions.services import execution_start

    creation, run = Counting(connection), Counting(connection)
    current = [creation]
    original_commit = connection._commit
    original_send = dispatch.send

    def timed_commit():
        t = time.perf_counter()
        try:
            return original_commit()
        finally:
            current[0].on_commit(time.perf_counter() - t)

    def switching_send(execution_id: int, **how) -> None:  # creation committed: the run starts here
        current[0] = run
        original_send(execution_id, **how)

    def wrapper(execute, sql, params, many, context):
        return current[0](execute, sql, params, many, context)

    connection._commit = timed_commit  # instrumentation of this process's connection only
    dispatch.send = switching_send
    wall = 0.0
    try:
        with connection.execute_wrapper(wrapper):
            for i in range(n):
                current[0] = creation
                t = time.perf_counter()
                execution_start(user=user, workflow=WORKFLOW, input={"n": i})
                wall += time.perf_counter() - t
    finally:
        del connection._commit
        dispatch.send = original_send
    return {"n": n, "wall_ms_per_wf": wall / n * 1000, "creation": _per_wf(creation, n), "run": _per_wf(run, n)}


def _per_wf(c: Counting, n: int) -> dict:
    statements = sum(c.kinds.values())
    return {
        "statements": statements / n,
        "by_kind": {k: v / n for k, v in sorted(c.kinds.items())},
        "shapes": {
            label: {"count": count / n, "ms": c.shape_seconds[label] / n * 1000}
            for label, count in c.shapes.most_common()
        },
        "autocommit_statements": c.autocommit / n,
        "explicit_transactions": c.commits / n,
        "write_transactions": c.write_commits / n,
        "transactions": (c.commits + c.autocommit) / n,
        # psycopg sends BEGIN before a block's first statement and COMMIT at its end
        "round_trips": (statements + 2 * c.commits) / n,
        "statement_ms": sum(c.shape_seconds.values()) / n * 1000,
        "commit_ms": c.commit_seconds / n * 1000,
    }


# --- pass 2: cProfile -------------------------------------------------------------

FAMILIES = [
    (
        "psycopg: waiting on PostgreSQL (send, wait for the answer)",
        ("psycopg/connection.py:wait", "_execute_send", "_exec_command", "psycopg_binary"),
    ),
    ("psycopg: Python side (cursors, adapting parameters and rows)", ("/psycopg/",)),
    ("Django ORM: building and compiling queries, model instances", ("/django/db/",)),
    ("Django, other (signals, timezone, utils)", ("/django/",)),
    ("django-fsm (transitions, concurrent save)", ("/django_fsm/",)),
    ("Celery eager apply (dispatch in the caller)", ("/celery/", "/kombu/", "/billiard/", "/vine/")),
    ("logging (one INFO line per step)", ("/logging/",)),
    ("threads (the heartbeat's watch and unwatch)", ("/threading.py",)),
    ("json (context and payloads)", ("/json/",)),
    (
        "keel's own code (executions, approvals, artifacts, bench)",
        ("/executions/", "/approvals/", "/artifacts/", "/bench/"),
    ),
]
OTHER = "other (stdlib: copy, uuid, datetime …)"

KEEL_FUNCTIONS = [
    ("executions/services.py", "execution_start", "execution_start (creation + dispatch, whole workflow)"),
    ("executions/engine/runner.py", "advance", "runner.advance (claim + slice)"),
    ("executions/engine/leases.py", "acquire", "leases.acquire (the claim)"),
    ("executions/engine/runner.py", "_run_slice", "runner._run_slice (5 steps)"),
    ("executions/engine/writer.py", "checkpoint_step", "writer.checkpoint_step: the one-statement step"),
    ("executions/engine/runner.py", "_checkpoint", "runner._checkpoint (every step)"),
    ("executions/engine/runner.py", "_commit_step", "runner._commit_step (the ORM path: the last step)"),
    ("executions/engine/runner.py", "_record_run", "runner._record_run: INSERT step run (the ORM path)"),
    ("executions/engine/leases.py", "fence", "leases.fence"),
    ("executions/engine/lifecycle.py", "record", "lifecycle.record: INSERT event (creation included)"),
    ("executions/engine/lifecycle.py", "apply", "lifecycle.apply: start, complete"),
    ("django/db/backends/base/base.py", "commit", "Django commit (BEGIN…COMMIT blocks)"),
    ("executions/engine/leases.py", "__enter__", "Heartbeat: the slice watched by the process's beater"),
    ("executions/engine/leases.py", "__exit__", "Heartbeat: the slice unwatched"),
    ("logging/__init__.py", "info", "log.info"),
]


def family_of(func: tuple) -> str | None:
    filename, _, name = func
    if filename == "~":  # a builtin: charged to its callers
        return None
    where = f"{filename}:{name}"
    for label, needles in FAMILIES:
        if any(needle in where for needle in needles):
            return label
    return OTHER


def profile_pass(n: int, user) -> dict:
    from executions.services import execution_start

    profiler = cProfile.Profile()
    t = time.perf_counter()
    profiler.enable()
    for i in range(n):
        execution_start(user=user, workflow=WORKFLOW, input={"n": i})
    profiler.disable()
    wall = time.perf_counter() - t
    stats = pstats.Stats(profiler)
    totals: defaultdict = defaultdict(float)
    for func, (_, _, tottime, _, callers) in stats.stats.items():
        family = family_of(func)
        if family is not None:
            totals[family] += tottime
            continue
        charged = 0.0
        for caller, edge in callers.items():
            totals[family_of(caller) or OTHER] += edge[2]
            charged += edge[2]
        totals[OTHER] += max(0.0, tottime - charged)
    profiled = sum(totals.values())
    keel = []
    for path, name, label in KEEL_FUNCTIONS:
        for (filename, _, fname), (_, ncalls, _, cumtime, _) in stats.stats.items():
            if filename.endswith(path) and fname == name:
                keel.append({"function": label, "calls_per_wf": ncalls / n, "ms_per_wf": cumtime / n * 1000})
                break
    return {
        "n": n,
        "wall_ms_per_wf": wall / n * 1000,
        "profiled_ms_per_wf": profiled / n * 1000,
        "families": [
            {"who": who, "ms_per_wf": seconds / n * 1000, "share": seconds / profiled}
            for who, seconds in sorted(totals.items(), key=lambda kv: -kv[1])
        ],
        "keel_functions": keel,
    }


# --- pass 3: bytes, by relation ----------------------------------------------------

BYTES_N = int(os.environ.get("BENCH_BYTES_N", "1000"))


def bytes_pass(n: int, user) -> dict:
    """The WAL and the on-disk growth of N workflows, by relation (each table, each index):
    the profile of issue 25's byte targets. WAL from pg_walinspect (this database's own
    records); growth from pg_relation_size before and after."""
    from django.db import connections

    own = harness.OwnWal(DB)
    own.hold()
    try:
        connections.close_all()
        sizes = harness.relation_bytes(DB)
        start = own.position()
        measured_loop(n, user)
        connections.close_all()
        end = own.position()
        rows = own.by_relation(start, end)
        commits, wal = own.between(start, end)
        grown = harness.relation_bytes(DB)
    finally:
        own.release()
    relations: dict[str, dict] = defaultdict(
        lambda: {"wal": 0, "records": 0, "fpi": 0, "kinds": Counter(), "kind_bytes": Counter()}
    )
    for name, kind, count, size, fpi in rows:
        r = relations[name]
        r["wal"] += size
        r["records"] += count
        r["fpi"] += fpi
        r["kinds"][kind] += count
        r["kind_bytes"][kind] += size
    per = [
        {
            "relation": name,
            "wal_per_wf": r["wal"] / n,
            "records_per_wf": r["records"] / n,
            "fpi_per_wf": r["fpi"] / n,
            "kinds": {k: (r["kinds"][k] / n, size / n) for k, size in r["kind_bytes"].most_common(3)},
            "grown_per_wf": (grown.get(name, 0) - sizes.get(name, 0)) / n,
        }
        for name, r in sorted(relations.items(), key=lambda item: -item[1]["wal"])
    ]
    return {
        "n": n,
        "write_txns_per_wf": commits / n,
        "wal_per_wf": wal / n,
        "grown_per_wf": sum(grown.get(k, 0) - sizes.get(k, 0) for k in grown) / n,
        "relations": per,
    }


# --- the report -------------------------------------------------------------------


def measured_loop(n: int, user) -> float:
    """N workflows, nothing else; returns the wall time per workflow in ms."""
    from executions.services import execution_start

    t = time.perf_counter()
    for i in range(n):
        execution_start(user=user, workflow=WORKFLOW, input={"n": i})
    return (time.perf_counter() - t) / n * 1000


def main() -> None:
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    n = int(args[-1]) if args else int(os.environ.get("BENCH_PROFILE_N", "200"))
    harness.recreate_database(DB)
    import django

    django.setup()
    from django.contrib.auth import get_user_model

    from config.celery import app
    from executions.services import execution_start

    app.conf.task_always_eager = True
    user = get_user_model().objects.create_user("bench")
    for i in range(WARMUP):
        execution_start(user=user, workflow=WORKFLOW, input={"n": -1 - i})
    if "--loop" in sys.argv:
        print(f"measured_loop: {measured_loop(n, user):.1f} ms per workflow", file=sys.stderr)
        return
    if "--bytes" in sys.argv:
        print("\n".join(bytes_markdown(bytes_pass(BYTES_N, user))))
        return
    counts = count_pass(n, user)
    profile = profile_pass(n, user)
    sizes = bytes_pass(BYTES_N, user)
    result = {
        "date": time.strftime("%Y-%m-%d"),
        "machine": harness.machine(DB),
        "loadavg_1m": round(os.getloadavg()[0], 2),
        "counts": counts,
        "profile": profile,
        "bytes": sizes,
    }
    if "--json" in sys.argv:
        print(json.dumps(result, indent=1))
    doc.write_section("profile", markdown(result))
    print("wrote the profile section of docs/BENCHMARKS.md", file=sys.stderr)


def markdown(result: dict) -> str:
    c, p = result["counts"], result["profile"]
    run, creation = c["run"], c["creation"]
    both = {
        k: creation["by_kind"].get(k, 0) + run["by_kind"].get(k, 0)
        for k in ("SELECT", "INSERT", "UPDATE", "UPDATE+INSERT")
    }
    out = [
        "## Where the time goes (in-process, 5-step no-op workflow)",
        "",
        f"`bench/hotpath.py` on {result['date']} ({result['machine']}; 1-minute load average "
        f"{result['loadavg_1m']} when it ended). The in-process row's work: `execution_start` of "
        f"`{WORKFLOW}`, whose dispatch runs the claim and the slice in the caller.",
        "",
        "### SQL per workflow",
        "",
        "| | statements | SELECT | INSERT | UPDATE | UPDATE+INSERT (one statement) | autocommit statements | BEGIN…COMMIT blocks (writing) | round trips | ms in statements | ms in COMMIT |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for label, part in (("creation (`execution_start`)", creation), ("run (claim + 5 steps)", run)):
        k = part["by_kind"]
        out.append(
            f"| {label} | {part['statements']:.0f} | {k.get('SELECT', 0):.0f} | {k.get('INSERT', 0):.0f} | "
            f"{k.get('UPDATE', 0):.0f} | {k.get('UPDATE+INSERT', 0):.0f} | {part['autocommit_statements']:.0f} | "
            f"{part['explicit_transactions']:.0f} ({part['write_transactions']:.0f}) | {part['round_trips']:.0f} | "
            f"{part['statement_ms']:.1f} | {part['commit_ms']:.1f} |"
        )
    out += [
        f"| **whole workflow** | **{creation['statements'] + run['statements']:.0f}** | {both['SELECT']:.0f} | "
        f"{both['INSERT']:.0f} | {both['UPDATE']:.0f} | {both['UPDATE+INSERT']:.0f} | "
        f"{creation['autocommit_statements'] + run['autocommit_statements']:.0f} | "
        f"{creation['explicit_transactions'] + run['explicit_transactions']:.0f} "
        f"({creation['write_transactions'] + run['write_transactions']:.0f}) | "
        f"{creation['round_trips'] + run['round_trips']:.0f} | "
        f"{creation['statement_ms'] + run['statement_ms']:.1f} | {creation['commit_ms'] + run['commit_ms']:.1f} |",
        "",
        f"Wall time per workflow in this pass: {c['wall_ms_per_wf']:.1f} ms, of which "
        f"{creation['statement_ms'] + run['statement_ms'] + creation['commit_ms'] + run['commit_ms']:.1f} ms "
        "waiting on statements and commits (each timed around the call, so it includes the round trip). "
        "The floor in issue 10 for the run: ≤ 3 statements per step + the claim, 1 commit per step + 1.",
        "",
        "The run's statements, by shape (per workflow):",
        "",
        "| statement | count | ms |",
        "|---|---|---|",
    ]
    out += [f"| `{label}` | {v['count']:.0f} | {v['ms']:.2f} |" for label, v in run["shapes"].items()]
    out += [
        "",
        f"### cProfile ({p['n']} workflows; {p['wall_ms_per_wf']:.1f} ms per workflow under the profiler)",
        "",
        "Every function's own time, grouped by who spent it (a builtin's time goes to the package that called it):",
        "",
        "| who | ms per workflow | share |",
        "|---|---|---|",
    ]
    out += [f"| {f['who']} | {f['ms_per_wf']:.2f} | {f['share']:.0%} |" for f in p["families"]]
    out += [
        "",
        "The runtime's functions, cumulative (they nest):",
        "",
        "| function | calls per workflow | ms per workflow |",
        "|---|---|---|",
    ]
    out += [f"| {k['function']} | {k['calls_per_wf']:.0f} | {k['ms_per_wf']:.2f} |" for k in p["keel_functions"]]
    out += bytes_markdown(result["bytes"])
    return "\n".join(out)


def bytes_markdown(b: dict) -> list[str]:
    out = [
        "",
        f"### Bytes per workflow, by relation ({b['n']} workflows)",
        "",
        f"This database's own WAL (pg_walinspect: the records of its transactions and those touching its "
        f'relations, each charged to the relation of its first block; commits under "(transaction)"): '
        f"**{b['wal_per_wf']:,.0f} B** a workflow in {b['write_txns_per_wf']:.2f} write transactions. "
        f"Growth on disk (pg_relation_size after − before, free space in pages reused counts as nothing): "
        f"**{b['grown_per_wf']:,.0f} B** a workflow.",
        "",
        "| relation | WAL B/wf | of which page images | records/wf | its largest record types (records, bytes per wf) | disk growth B/wf |",
        "|---|---|---|---|---|---|",
    ]
    for r in b["relations"]:
        kinds = ", ".join(f"{k} {count:.1f} ({size:,.0f} B)" for k, (count, size) in r["kinds"].items())
        out.append(
            f"| `{r['relation']}` | {r['wal_per_wf']:,.0f} | {r['fpi_per_wf']:,.0f} | {r['records_per_wf']:.1f} | "
            f"{kinds} | {r['grown_per_wf']:,.0f} |"
        )
    return out


if __name__ == "__main__":
    main()
