"""A short chaos run (``make chaos`` runs the long one): nothing lost, nothing done twice.

``scripts/chaos.py`` starts its own stack (a PostgreSQL server of its own, its own
Redis on a free port, sandbox, web, beat, three workers), runs 30 executions through
both workflows while SIGKILLing workers, restarting Redis once, crashing and restarting
PostgreSQL once (S32) and delivering Celery messages twice, approves as a manager, and
prints the counts this test checks. It needs no pytest database: it creates and
migrates its own.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest

pytestmark = pytest.mark.processes

ROOT = Path(__file__).resolve().parents[2]


def test_chaos_short_run_loses_nothing_and_duplicates_nothing():
    # A database of its own per run, so a concurrent `make chaos` (keel_chaos) on the
    # same CHAOS_PG is left alone; without CHAOS_PG the server itself is the run's own.
    database = f"keel_chaos_t{os.getpid()}"
    shared_server = os.environ.get("CHAOS_PG", "").rstrip("/")
    result = subprocess.run(
        [
            sys.executable,
            "scripts/chaos.py",
            "--executions",
            "30",
            "--workers",
            "3",
            "--seed",
            "7",
            "--timeout",
            "300",
            "--database",
            database,
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    output = result.stdout + result.stderr

    def count(label: str) -> int | None:
        match = re.search(rf"^{re.escape(label)}: (\d+)$", result.stdout, re.MULTILINE)
        return int(match.group(1)) if match else None

    assert result.returncode == 0, output
    assert count("executions started") == 30, output
    assert count("executions lost") == 0, output
    assert count("duplicate effects") == 0, output
    assert count("executions not terminal or waiting") == 0, output
    assert " 1 redis restart(s), " in result.stdout, output
    if not shared_server:
        assert " 1 postgres restart(s), " in result.stdout, output
        assert "workers up across the postgres restart: " in result.stdout, output

    if shared_server:
        with psycopg.connect(f"{shared_server}/postgres", autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')
