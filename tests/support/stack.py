"""The processes of one test, pointed at what the pytest process uses.

``Stack`` is the shared harness (tests/support/procs.py) with the environment of the
*test* database pytest-django created and a Redis database the tests own (flushed
for each stack). The web server, workers and beat connect as the application's role
(``APP_DB_ROLE``, set up by ``grant_app_role`` in tests/conftest.py), as in
production: they may only SELECT and INSERT the append-only tables. The pytest
process stays the owner. Crash tests SIGKILL these processes; nothing here is mocked.
"""

from __future__ import annotations

from pathlib import Path

import redis
from django.conf import settings
from django.db import connection

from tests.support.procs import Processes, keel_env, wait_for

# The PostgreSQL role the application's processes run as (docs/operations.md, Security).
APP_DB_ROLE = "keel_app"


class Stack(Processes):
    """keel's processes for one test, with failpoints in ``tmp``. Call ``close`` (the fixture does)."""

    def __init__(self, tmp: Path, **env: str) -> None:
        self.failpoint_dir = tmp / "failpoints"
        db = connection.settings_dict
        super().__init__(
            tmp,
            keel_env(
                DATABASE_URL=f"postgres://{APP_DB_ROLE}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}",
                CELERY_BROKER_URL=settings.CELERY_BROKER_URL,
                KEEL_VAR_DIR=str(tmp / "var"),
                # One key for this process and the stack's (each var dir would otherwise make its own).
                DJANGO_SECRET_KEY=settings.SECRET_KEY,
                KEEL_ARTIFACTS_ROOT=str(settings.ARTIFACTS_ROOT),
                RUNTIME_FAILPOINT_DIR=str(self.failpoint_dir),
                **env,
            ),
        )
        redis.Redis.from_url(settings.CELERY_BROKER_URL).flushdb()

    def failpoint_reached(self, name: str) -> bool:
        return (self.failpoint_dir / name.replace(":", "__")).exists()


def pk(ref: str) -> int:
    """RUN_0042 → 42."""
    return int(ref.removeprefix("RUN_"))


def wait_status(api, ref: str, status: str, timeout: float = 40) -> dict:
    """Poll the Task API until ``ref`` is in ``status``; returns the execution."""
    return wait_for(
        lambda: (body := api.execution(ref))["status"] == status and body,
        timeout=timeout,
        what=f"{ref} to be {status}",
    )
