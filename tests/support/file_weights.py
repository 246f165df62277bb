"""Rewrite tests/file_weights.txt from one run's durations (docs/testing.md, "Several pytest processes"):

    make test PYTEST_ARGS="--durations=0 -q" | tee /tmp/durations.log
    .venv/bin/python -m tests.support.file_weights /tmp/durations.log

Sums each file's setup, call and teardown seconds; files under 3 s are left out (they
count 3 s when unlisted).
"""

from __future__ import annotations

import re
import sys
from collections import Counter
from datetime import date
from pathlib import Path

LINE = re.compile(r"\s*([\d.]+)s (?:setup|call|teardown)\s+(\S+?)::")
OUT = Path(__file__).resolve().parents[1] / "file_weights.txt"
HEADER = """\
# Seconds each test file took in one `make test` ({day}; setup, call and teardown of its
# tests, from --durations=0): tests/conftest.py sends the heaviest files to the pytest
# processes first, so the run does not end on one long file while the others idle.
# Only the order depends on it; a file not listed weighs 3 s. Refresh: python -m tests.support.file_weights.
"""


def read() -> dict[str, float]:
    """Seconds per test file (its path from the repository's root), as listed."""
    weights = {}
    for line in OUT.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            seconds, path = line.split(maxsplit=1)
            weights[path] = float(seconds)
    return weights


def main(log: str) -> None:
    seconds: Counter[str] = Counter()
    for line in Path(log).read_text(errors="replace").splitlines():
        if found := LINE.match(line):
            seconds[found.group(2)] += float(found.group(1))
    if not seconds:
        raise SystemExit(f"{log}: no --durations lines in it (run pytest with --durations=0)")
    rows = [f"{round(s)} {path}" for path, s in seconds.most_common() if s >= 3]
    OUT.write_text(HEADER.format(day=date.today().isoformat()) + "\n".join(rows) + "\n")
    print(f"{OUT}: {len(rows)} files")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit("usage: python -m tests.support.file_weights DURATIONS_LOG")
    main(sys.argv[1])
