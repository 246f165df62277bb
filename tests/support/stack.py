"""Real processes for tests: Celery workers, beat, the web server and the sandbox.

Each process runs ``config.settings`` against the *test* database pytest-django
created (its URL goes through the environment) and a Redis database the tests own.
The web server, workers and beat connect as the application's role (``APP_DB_ROLE``,
set up by ``grant_app_role`` in tests/conftest.py), as in production: they may only
SELECT and INSERT the append-only tables. The pytest process stays the owner.
Crash tests SIGKILL these processes; nothing here is mocked.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import redis
import requests
from django.conf import settings
from django.db import connection

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
# The PostgreSQL role the application's processes run as (docs/operations.md, Security).
APP_DB_ROLE = "keel_app"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(
    predicate: Callable[[], Any], *, timeout: float = 30, interval: float = 0.2, what: str = "condition"
) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)


def http() -> requests.Session:
    session = requests.Session()
    session.trust_env = False
    return session


class Proc:
    def __init__(self, name: str, args: list[str], env: dict[str, str], log: Path) -> None:
        self.name, self.args, self.log = name, args, log
        self._out = open(log, "ab")  # noqa: SIM115 - closed in stop()
        self.popen = subprocess.Popen(args, cwd=ROOT, env=env, stdout=self._out, stderr=subprocess.STDOUT)

    @property
    def pid(self) -> int:
        return self.popen.pid

    def alive(self) -> bool:
        return self.popen.poll() is None

    def kill(self) -> None:
        """SIGKILL: no cleanup, no goodbye, exactly like a crashed machine."""
        if self.alive():
            self.popen.send_signal(signal.SIGKILL)
        self.popen.wait(timeout=10)

    def stop(self) -> None:
        if self.alive():
            self.popen.terminate()
            try:
                self.popen.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.kill()
        self._out.close()

    def output(self) -> str:
        return self.log.read_text(errors="replace")


class Stack:
    """Starts and stops the processes of one test. Call ``close`` (the fixture does)."""

    def __init__(self, tmp: Path, **env: str) -> None:
        self.tmp = tmp
        self.procs: list[Proc] = []
        self.sandbox_port = free_port()
        self.sandbox_url = f"http://127.0.0.1:{self.sandbox_port}"
        self.web_url: str | None = None
        self.failpoint_dir = tmp / "failpoints"
        db = connection.settings_dict
        self.env = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "config.settings",
            "DATABASE_URL": f"postgres://{APP_DB_ROLE}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}",
            "CELERY_BROKER_URL": settings.CELERY_BROKER_URL,
            "SANDBOX_URL": self.sandbox_url,
            "KEEL_VAR_DIR": str(tmp / "var"),
            # One key for this process and the stack's (each var dir would otherwise make its own).
            "DJANGO_SECRET_KEY": settings.SECRET_KEY,
            "KEEL_ARTIFACTS_ROOT": str(settings.ARTIFACTS_ROOT),
            "RUNTIME_LEASE_SECONDS": "3",
            "RUNTIME_SWEEP_SECONDS": "1",
            "RUNTIME_FAILPOINT_DIR": str(self.failpoint_dir),
            "RUNTIME_EFFECT_TIMEOUT_SECONDS": "3",
            "PYTHONUNBUFFERED": "1",
            **env,
        }
        self.env.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
        self.env.pop("RUNTIME_FAILPOINTS", None)
        redis.Redis.from_url(settings.CELERY_BROKER_URL).flushdb()

    def _start(self, name: str, args: list[str], **env: str) -> Proc:
        log = self.tmp / f"{name}-{len(self.procs)}.log"
        proc = Proc(name, args, {**self.env, **env}, log)
        self.procs.append(proc)
        return proc

    def sandbox(self, **env: str) -> Proc:
        proc = self._start(
            "sandbox",
            [
                str(BIN / "python"),
                "manage.py",
                "runsandbox",
                "--port",
                str(self.sandbox_port),
                "--db",
                str(self.tmp / "sandbox.sqlite3"),
            ],
            **env,
        )
        wait_for(lambda: _responds(f"{self.sandbox_url}/_health"), what="the sandbox to listen")
        return proc

    def worker(self, name: str = "w1", **env: str) -> Proc:
        proc = self._start(
            f"worker-{name}",
            [
                str(BIN / "celery"),
                "-A",
                "config",
                "worker",
                "--pool=solo",
                "--loglevel=INFO",
                "-n",
                f"{name}-{os.getpid()}@%h",
                "--without-gossip",
                "--without-mingle",
                "--without-heartbeat",
            ],
            **env,
        )
        wait_for(lambda: "ready." in proc.output() or not proc.alive(), timeout=30, what=f"worker {name} to be ready")
        assert proc.alive(), proc.output()
        return proc

    def beat(self, **env: str) -> Proc:
        return self._start(
            "beat",
            [
                str(BIN / "celery"),
                "-A",
                "config",
                "beat",
                "--loglevel=INFO",
                "-s",
                str(self.tmp / f"beat-{len(self.procs)}"),
            ],
            **env,
        )

    def web(self, **env: str) -> Proc:
        port = free_port()
        proc = self._start(
            "web",
            # The production web server (docs/operations.md); static files come from WhiteNoise.
            [
                str(BIN / "gunicorn"),
                "config.wsgi",
                "--bind",
                f"127.0.0.1:{port}",
                "--workers",
                "1",
                "--threads",
                "8",
                "--graceful-timeout",
                "3",
                "--no-control-socket",  # its default path is shared by every gunicorn of the machine
            ],
            **env,
        )
        self.web_url = f"http://127.0.0.1:{port}"
        wait_for(lambda: _responds(f"{self.web_url}/login/"), timeout=30, what="the web server to listen")
        return proc

    def failpoint_reached(self, name: str) -> bool:
        return (self.failpoint_dir / name.replace(":", "__")).exists()

    def sandbox_stats(self) -> dict:
        return http().get(f"{self.sandbox_url}/_stats", timeout=5).json()

    def close(self) -> None:
        for proc in reversed(self.procs):
            proc.stop()

    def logs(self) -> str:
        return "\n".join(f"===== {p.name} =====\n{p.output()[-4000:]}" for p in self.procs)


def _responds(url: str) -> bool:
    try:
        http().get(url, timeout=1)
        return True
    except requests.RequestException:
        return False


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
