"""keel next to DBOS, LangGraph, a bare Celery chain and pgbench, from one run
(`make bench-peers`): the "peers" section of docs/BENCHMARKS.md, with issue 25's ratios.

    .venv/bin/python bench/side_by_side.py RESULTS      (a peers-YYYYMMDD.json, or the folder holding it)

RESULTS is what ``/work/shared/bench-peers/run_all.sh`` wrote with keel's row added
through ``OURS_CMD`` (bench/peers_row.py). A copy is kept as docs/bench-peers.json so
the section can be written again without running anything.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import doc

COPY = doc.DOC.parent / "bench-peers.json"
COLUMNS = [
    ("system", "system"),
    ("mode", "mode"),
    ("concurrency", "conc."),
    ("workflows_per_s", "workflows/s"),
    ("steps_per_s", "steps/s"),
    ("p50_ms", "p50 ms"),
    ("p99_ms", "p99 ms"),
    ("commits_per_wf", "commits/wf"),
    ("write_txns_per_wf", "write txns/wf"),
    ("wal_syncs_per_wf", "WAL fsyncs/wf"),
    ("wal_bytes_per_wf", "WAL bytes/wf"),
    ("table_bytes_per_wf", "table bytes/wf"),
    ("loadavg_1m", "load 1m"),
]


def load(path: Path) -> dict:
    if path.is_dir():
        found = sorted(path.glob("peers-*.json"))
        if not found:
            raise SystemExit(f"bench/side_by_side.py: no peers-*.json in {path}")
        path = found[-1]
    result = json.loads(path.read_text())
    if path.resolve() != COPY.resolve():
        shutil.copyfile(path, COPY)
    return result


def row(result: dict, system: str, *, mode: str = "", concurrency=None) -> dict | None:
    for s in result["systems"]:
        if s["system"] != system:
            continue
        for r in s.get("rows", []):
            if mode in r.get("mode", "") and (concurrency is None or r.get("concurrency") == concurrency):
                return r
    return None


def extra(result: dict, system: str, key: str) -> dict | None:
    for s in result["systems"]:
        if s["system"] == system and key in s:
            return s[key]
    return None


def cell(value) -> str:
    if value is None:
        return "—"
    if isinstance(value, float):
        return f"{value:,.2f}" if value < 100 else f"{value:,.0f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def ratio(ours, theirs) -> float | None:
    if ours is None or theirs in (None, 0):
        return None
    return ours / theirs


def targets(result: dict) -> list[tuple[str, str, str, str, str]]:
    """(target, keel, peer, measured ratio or value, met?)."""
    keel_in = row(result, "keel", mode="in-process", concurrency=1)
    keel_c1 = row(result, "keel", mode="closed loop", concurrency=1)
    keel_c8 = row(result, "keel", mode="closed loop", concurrency=8)
    keel_open = row(result, "keel", mode="open")
    dbos_c1 = row(result, "dbos", concurrency=1)
    dbos_c8 = row(result, "dbos", concurrency=8)
    celery_open = row(result, "celery", mode="open")
    celery_c8 = row(result, "celery", mode="closed loop", concurrency=8)
    langgraph_sync = row(result, "langgraph", mode="durability=sync", concurrency=1)
    resume = extra(result, "keel", "resume_latency") or {}
    rss = extra(result, "keel", "worker_rss") or {}

    def get(r, key):
        return None if r is None else r.get(key)

    out = []

    def at_least(name, ours, theirs, key, floor, peer):
        q = ratio(get(ours, key), get(theirs, key))
        out.append(
            (
                name,
                cell(get(ours, key)),
                f"{cell(get(theirs, key))} ({peer})",
                "—" if q is None else f"{q:.2f}×",
                "—" if q is None else ("yes" if q >= floor else "no"),
            )
        )

    at_least("in-process, concurrency 1: steps/s ≥ 2.0× DBOS", keel_in, dbos_c1, "steps_per_s", 2.0, "DBOS c1")
    at_least(
        "in-process, concurrency 1: steps/s ≥ 1.3× LangGraph (durability sync)",
        keel_in,
        langgraph_sync,
        "steps_per_s",
        1.3,
        "LangGraph sync c1",
    )
    at_least(
        "Celery, 2 processes, concurrency 8: steps/s ≥ 1.0× the bare Celery chain at 8",
        keel_c8,
        celery_c8,
        "steps_per_s",
        1.0,
        "Celery c8",
    )
    at_least(
        "open loop: steps/s ≥ 1.0× the bare Celery chain", keel_open, celery_open, "steps_per_s", 1.0, "Celery open"
    )
    q = ratio(get(keel_c1, "p50_ms"), get(dbos_c1, "p50_ms"))
    out.append(
        (
            "Celery, concurrency 1: p50 latency ≤ DBOS's",
            f"{cell(get(keel_c1, 'p50_ms'))} ms",
            f"{cell(get(dbos_c1, 'p50_ms'))} ms (DBOS c1)",
            "—" if q is None else f"{q:.2f}×",
            "—" if q is None else ("yes" if q <= 1.0 else "no"),
        )
    )
    keel_rows = [r for r in (keel_in, keel_c1, keel_c8, keel_open) if r]
    own = [r["own_write_txns_per_wf"] for r in keel_rows if r.get("own_write_txns_per_wf") is not None]
    worst = max(own, default=None)
    out.append(
        (
            "write transactions per workflow ≤ 7 (keel: its own, from the WAL)",
            f"{cell(get(keel_in, 'own_write_txns_per_wf'))} in-process, ≤ {cell(worst)} in every row",
            f"{cell(get(dbos_c1, 'write_txns_per_wf'))} (DBOS c1, cluster-wide)",
            "—",
            "—" if worst is None else ("yes" if worst <= 7 else "no"),
        )
    )
    q = ratio(get(keel_in, "table_bytes_per_wf"), get(dbos_c1, "table_bytes_per_wf"))
    out.append(
        (
            "table bytes per workflow ≤ DBOS's (in-process vs DBOS c1)",
            cell(get(keel_in, "table_bytes_per_wf")),
            f"{cell(get(dbos_c1, 'table_bytes_per_wf'))} (DBOS c1)",
            "—" if q is None else f"{q:.2f}×",
            "—" if q is None else ("yes" if q <= 1.0 else "no"),
        )
    )
    # DBOS's WAL figures are cluster-wide, each an upper bound of its own: the lowest
    # of its rows is the tightest; it can prove "no", never "yes".
    bounds = [(r.get("wal_bytes_per_wf"), f"DBOS c{r.get('concurrency')}") for r in (dbos_c1, dbos_c8) if r]
    theirs, which = min((b for b in bounds if b[0] is not None), default=(None, ""))
    ours = get(keel_in, "own_wal_bytes_per_wf")
    q = ratio(ours, theirs)
    verdict = "—" if q is None else ("no" if q > 1.0 else "not shown: DBOS's figure is cluster-wide")
    out.append(
        (
            "WAL bytes per workflow ≤ DBOS's (keel's own in-process, the same ±2% in every row, vs DBOS's lowest cluster-wide row)",
            cell(ours),
            f"≤ {cell(theirs)} ({which}, cluster-wide)",
            "—" if q is None else f"≥ {q:.2f}×",
            verdict,
        )
    )
    for key, limit in (("p50_ms", 5), ("p99_ms", 10)):
        value = resume.get(key)
        out.append(
            (
                f"resume latency {key[:3]} < {limit} ms",
                f"{cell(value)} ms (n={resume.get('n', '—')})",
                "—",
                "—",
                "—" if value is None else ("yes" if value < limit else "no"),
            )
        )
    served = rss.get("executions_served")
    value = rss.get("max_child_mb")
    out.append(
        (
            "worker RSS < 150 MB after 10,000 executions (issue 10's, kept)",
            f"{cell(value)} MB per process after {cell(served)} executions (parent {cell(rss.get('parent_mb'))} MB)",
            "—",
            "—",
            "—"
            if value is None
            else ("yes" if value < 150 else "no") + ("" if (served or 0) >= 10_000 else " (fewer run)"),
        )
    )
    return out


def markdown(result: dict) -> str:
    m = result["machine"]
    n = result["n"]
    out = [
        "## Side by side: keel, DBOS, LangGraph, a bare Celery chain, pgbench (`make bench-peers`)",
        "",
        f"One run on {result['date']}, N = {n} workflows per row: {m['cpus']} × {m['cpu']}, {m['mem_gib']} GiB; "
        f"PostgreSQL {m['postgres']} (synchronous_commit={m['synchronous_commit']}, "
        f"wal_sync_method={m['wal_sync_method']}); Redis {m['redis']}; Python {m['python']}. "
        "The work: one workflow = 5 no-op steps, durable where the system is. "
        "The peers' scripts are `/work/shared/bench-peers` (read their README); keel's row is "
        "`bench/peers_row.py`. The raw results: `docs/bench-peers.json`.",
        "",
        "### Issue 25's targets",
        "",
        "| target | keel | peer | ratio | met |",
        "|---|---|---|---|---|",
    ]
    out += ["| " + " | ".join(t) + " |" for t in targets(result)]
    out += ["", "### Every row", "", "| " + " | ".join(h for _, h in COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    for s in result["systems"]:
        for r in s.get("rows", []):
            out.append("| " + " | ".join(cell(r.get(k)) for k, _ in COLUMNS) + " |")
    pg = next((s for s in result["systems"] if s["system"] == "postgres-pgbench"), None)
    if pg:
        out += [
            "",
            f"PostgreSQL itself (pgbench, one UPDATE per transaction, {pg['seconds_per_run']} s each): "
            + "; ".join(
                f"{r['case']} × {r['clients']} client{'s' if r['clients'] > 1 else ''}: {r['tps']:,.0f} TPS "
                f"({r['latency_ms']} ms)"
                for r in pg["runs"]
            )
            + ".",
        ]
    own = [r for s in result["systems"] if s["system"] == "keel" for r in s.get("rows", [])]
    if any("own_write_txns_per_wf" in r for r in own):
        out += [
            "",
            "keel's own write transactions and WAL bytes per workflow (its database's records alone, read "
            "back with pg_walinspect): "
            + "; ".join(
                f"{r['mode'].split(',')[0].split(':')[0]} ({r['concurrency']}): {r.get('own_write_txns_per_wf')} "
                f"write txns, {cell(r.get('own_wal_bytes_per_wf'))} WAL bytes"
                for r in own
            )
            + ".",
        ]
    resume = extra(result, "keel", "resume_latency")
    rss = extra(result, "keel", "worker_rss")
    if resume:
        out += [
            "",
            f"keel's resume latency ({resume['n']} `bench_gate` executions, one at a time, on the same 2 worker "
            f"processes): p50 {resume['p50_ms']} ms, p99 {resume['p99_ms']} ms, mean {resume['mean_ms']} ms — "
            f"from {resume['from']} to the {resume['to']}.",
        ]
    if rss:
        trail = ", ".join(
            f"{s['executions']:,}: {' / '.join(str(c) for c in s['children_mb'])} MB"
            for s in rss["samples"][:: max(1, len(rss["samples"]) // 6)]
        )
        out += [
            "",
            f"keel's worker memory (VmRSS of each of the 2 prefork processes, by executions served): {trail}; "
            f"after {rss['executions_served']:,}: {rss['max_child_mb']} MB at most, the parent {rss['parent_mb']} MB.",
        ]
    out += [
        "",
        "How to read it: commits/wf is the system's own database's `xact_commit` (read-only transactions and "
        "connection start-ups included); write txns/wf, WAL fsyncs/wf and WAL bytes/wf are cluster-wide, so "
        "anything else writing to the same PostgreSQL meanwhile (other test runs on this shared machine) is "
        "counted in them (keel's own, exact, are listed above). "
        "`load 1m` is the machine's 1-minute load average when the row ended: compare rows of the same run, "
        "and rows at a similar load.",
    ]
    return "\n".join(out)


def main() -> None:
    if len(sys.argv) != 2:
        raise SystemExit("usage: bench/side_by_side.py RESULTS  (peers-YYYYMMDD.json or its folder)")
    result = load(Path(sys.argv[1]))
    doc.write_section("peers", markdown(result))
    print("wrote the peers section of docs/BENCHMARKS.md", file=sys.stderr)


if __name__ == "__main__":
    main()
