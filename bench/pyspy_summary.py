"""Where the in-process run's wall time goes, from a py-spy sample (no cProfile overhead).

    py-spy record --idle --rate 200 --format raw -o /tmp/keel-spy.txt -- \\
        .venv/bin/python bench/hotpath.py --loop 300
    .venv/bin/python bench/pyspy_summary.py /tmp/keel-spy.txt

py-spy is not a dependency of keel: install it anywhere (e.g. the peers' venv).
``--idle`` keeps the samples where the process waits on PostgreSQL. Only the samples
inside ``measured_loop`` count. Prints two tables: the innermost frame's package (a
frame blocked in psycopg's ``wait``, ``_execute_send`` or ``_exec_command`` is time
waiting on PostgreSQL), and the innermost line of the runtime (executions/) on the
stack: which of its statements the time is spent under.
"""

from __future__ import annotations

import sys
from collections import Counter

WAITING = (".wait (psycopg/", "._execute_send (psycopg/", "._exec_command (psycopg/")
PACKAGES = [
    ("psycopg/", "psycopg, Python side"),
    ("django/db/", "Django ORM: building and compiling queries, model instances"),
    ("django_fsm/", "django-fsm"),
    ("django/", "Django, other"),
    ("celery/", "Celery eager apply"),
    ("kombu/", "Celery eager apply"),
    ("logging/", "logging"),
    ("threading.py", "threads"),
    ("json/", "json"),
    ("executions/", "keel's own code"),
    ("approvals/", "keel's own code"),
    ("artifacts/", "keel's own code"),
]


def package(frame: str) -> str:
    if any(needle in frame for needle in WAITING):
        return "waiting on PostgreSQL (psycopg wait, send)"
    for needle, name in PACKAGES:
        if needle in frame:
            return name
    return "other"


def main() -> None:
    if len(sys.argv) != 2:
        raise SystemExit("usage: bench/pyspy_summary.py PY_SPY_RAW_FILE")
    packages: Counter = Counter()
    lines: Counter = Counter()
    total = 0
    with open(sys.argv[1]) as raw:
        for entry in raw:
            stack, _, count = entry.rstrip().rpartition(" ")
            if "measured_loop (" not in stack or not count.isdigit():
                continue
            n = int(count)
            total += n
            frames = stack.split(";")
            packages[package(frames[-1])] += n
            keel = next((f for f in reversed(frames) if "executions/" in f), "outside the runtime")
            lines[keel] += n
    if not total:
        raise SystemExit("no samples inside measured_loop: record bench/hotpath.py --loop N")
    print(f"{total} samples inside measured_loop\n\n| where | share |\n|---|---|")
    for name, n in packages.most_common():
        print(f"| {name} | {n / total:.1%} |")
    print("\n| innermost runtime frame | share |\n|---|---|")
    for frame, n in lines.most_common(20):
        print(f"| `{frame}` | {n / total:.1%} |")


if __name__ == "__main__":
    main()
