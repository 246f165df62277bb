"""The kit's processes: keel's own commands, started as children of the test and pointed
at the database and the broker the test's process uses.

``Processes`` starts, together, a Celery worker with beat inside it (``-B``: the sweeper
that ends waits, retries and leases), and when asked the web server (gunicorn, as in
production) and the sandbox (keel's fake provider, ``runsandbox``); it returns once each
one is ready, or raises naming the one that died or never got ready, with the end of its
log. Every child runs this interpreter with this process's import path (so it imports
the author's package as the test does), in a session of its own, its output in a log
file under ``tmp``; ``close`` SIGKILLs each one with what it started, and a child dies
with the test's process (``setpriv --pdeathsig``, where the system has it).

The environment (``environment``): this process's, then the database it is connected to
(``DATABASE_URL``), its broker (``CELERY_BROKER_URL``), secret key and artifact store,
a var dir in ``tmp``, ``KEEL_WORKFLOW_MODULES``, the test timings (3 s leases swept
twice a second: a killed worker's execution is taken over in seconds, a wait's timeout
noticed within half a second), then what the caller adds. It imports nothing of the
runtime beyond the settings.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
from collections.abc import Callable, Mapping
from functools import partial
from pathlib import Path
from typing import Any
from urllib.parse import quote

import requests
from django.conf import settings
from django.db import connection

from .waiting import poll

READY_SECONDS = 90  # a cold start on a busy two-core machine takes a few seconds; a broken one never ends
TEST_TIMINGS = {
    "RUNTIME_LEASE_SECONDS": "3",
    "RUNTIME_SWEEP_SECONDS": "0.5",
    "RUNTIME_HOUSEKEEPING_SECONDS": "2",
}
# Never handed on: pytest's async switch, this process's failpoints (they are the kit's argument).
NOT_INHERITED = ("DJANGO_ALLOW_ASYNC_UNSAFE", "RUNTIME_FAILPOINTS", "DJANGO_SETTINGS_MODULE")
_SETPRIV = shutil.which("setpriv")


# How a child is started: ``spawn(argv, env, log)`` → an object with Popen's ``pid``,
# ``poll``, ``wait`` and ``returncode``, the child in a session of its own with its output
# appended to ``log`` — or None to start it by exec (the default, as production does). A
# test suite that starts its Python processes some faster way sets it (keel's own forks
# them from a preloaded interpreter: tests/conftest.py).
spawn: Callable[[list[str], dict[str, str], Path], Any] | None = None


class Child:
    """One process, its output appended to ``log``, in a process group of its own."""

    def __init__(self, name: str, args: list[str], env: Mapping[str, str], log: Path) -> None:
        self.name, self.args, self.log = name, args, log
        started = spawn(args, dict(env), log) if spawn is not None else None
        if started is not None:
            self.popen = started
            return
        prefix = [_SETPRIV, "--pdeathsig", "KILL", "--"] if _SETPRIV else []
        with open(log, "ab") as out:
            self.popen = subprocess.Popen(
                prefix + args,
                env=dict(env),
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )

    def alive(self) -> bool:
        return self.popen.poll() is None

    def output(self) -> str:
        try:
            return self.log.read_text(errors="replace")
        except OSError:
            return ""

    def kill(self) -> None:
        """SIGKILL to the process and everything it started, as a machine's crash."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.popen.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.popen.wait(timeout=10)

    def wait_ready(self, ready: Callable[[], bool], *, what: str) -> None:
        """Until ``ready()``; RuntimeError with the end of the log if the process exits first."""
        poll(
            lambda: ready() or not self.alive(),
            timeout=READY_SECONDS,
            what=f"{self.name}: {what}",
            last_seen=lambda: f"its log ({self.log}) ends:\n{self.output()[-3000:]}",
        )
        if not self.alive():
            raise RuntimeError(
                f"{self.name} exited (status {self.popen.returncode}) before {what}; its log ({self.log}) ends:\n"
                + self.output()[-3000:]
            )


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def answers(url: str) -> bool:
    """Whether anything answers HTTP at ``url`` within a second, whatever the status."""
    try:
        session().get(url, timeout=1)
    except requests.RequestException:
        return False
    return True


def session(token: str | None = None) -> requests.Session:
    """HTTP that never goes through a proxy of the environment; with ``token``, as its bearer."""
    made = requests.Session()
    made.trust_env = False
    if token:
        made.headers["Authorization"] = f"Bearer {token}"
    return made


def database_url() -> str:
    """The database this process is connected to (under pytest-django: the test database),
    as ``DATABASE_URL``. RuntimeError for one no other process can open (SQLite in memory)."""
    db = connection.settings_dict
    if connection.vendor == "postgresql":
        user = quote(db.get("USER") or "", safe="")
        password = f":{quote(db['PASSWORD'], safe='')}" if db.get("PASSWORD") else ""
        host = db.get("HOST") or "127.0.0.1"
        return f"postgres://{user}{password}@{host}:{db.get('PORT') or 5432}/{quote(str(db['NAME']), safe='')}"
    if connection.vendor == "sqlite" and not connection.is_in_memory_db():
        return f"sqlite:///{Path(db['NAME']).resolve()}"
    raise RuntimeError(
        f"the kit's processes can't open this process's database ({connection.vendor}, {db['NAME']}): "
        "run the tests on PostgreSQL (DATABASE_URL), or pass database_url="
    )


def import_path() -> str:
    """This process's import path, as ``PYTHONPATH``: the children import what the test imports."""
    return os.pathsep.join(os.path.abspath(p or os.curdir) for p in sys.path if os.path.isdir(p or os.curdir))


def environment(*, tmp: Path, modules: str, db_url: str | None, extra: Mapping[str, str]) -> dict[str, str]:
    """The environment of every process of the kit (the module's docstring)."""
    inherited = {k: v for k, v in os.environ.items() if k not in NOT_INHERITED}
    return {
        **inherited,
        "DJANGO_SETTINGS_MODULE": "config.settings",
        "PYTHONPATH": import_path(),
        "PYTHONUNBUFFERED": "1",
        "DATABASE_URL": db_url or database_url(),
        "CELERY_BROKER_URL": settings.CELERY_BROKER_URL,
        "DJANGO_SECRET_KEY": settings.SECRET_KEY,
        "KEEL_ARTIFACTS_ROOT": str(settings.ARTIFACTS_ROOT),
        "KEEL_VAR_DIR": str(tmp / "var"),
        "KEEL_WORKFLOW_MODULES": modules,
        "RUNTIME_FAILPOINT_DIR": str(tmp / "failpoints"),
        **TEST_TIMINGS,
        **extra,
    }


PROVIDERS = {
    "openai": lambda url: {
        "RUNTIME_MODEL_CLIENT": "openai",
        "RUNTIME_MODEL": "gpt-test",
        "OPENAI_BASE_URL": f"{url}/v1",
        "OPENAI_API_KEY": "sk-test",
    },
    "anthropic": lambda url: {
        "RUNTIME_MODEL_CLIENT": "anthropic",
        "RUNTIME_MODEL": "claude-test",
        "ANTHROPIC_BASE_URL": url,
        "ANTHROPIC_API_KEY": "sk-ant-test",
    },
    "offline": lambda url: {"RUNTIME_MODEL_CLIENT": "offline"},
}


def provider_env(model: str, sandbox_url: str) -> dict[str, str]:
    """The workers' environment for keel's model client ``model`` played by the sandbox."""
    if model not in PROVIDERS:
        raise ValueError(f"model must be one of {', '.join(sorted(PROVIDERS))}, not {model!r}")
    return PROVIDERS[model](sandbox_url)


class Processes:
    """keel's processes for one kit, all with ``env``, their logs in ``tmp``. Call ``close``."""

    def __init__(self, tmp: Path, env: Mapping[str, str]) -> None:
        self.tmp = tmp
        self.env = dict(env)
        self.children: list[Child] = []
        self.web_url: str | None = None
        self.sandbox_url: str | None = None

    def start(self, *, web: bool, sandbox: bool, workers: int, model: str = "offline") -> None:
        """The sandbox (first: the workers are told its URL), the workers and the web server,
        started at once; returns when every one is ready. ``model``: ``offline``, or the
        provider (``openai``, ``anthropic``) whose wire format the workers speak to the sandbox."""
        if os.environ.get("KEEL_NO_PROCESSES"):  # keel's own inner loop (make test-fast) starts none
            raise RuntimeError("KEEL_NO_PROCESSES is set: this run starts no processes (mark the test `processes`)")
        waits: list[tuple[Child, Callable[[], bool], str]] = []
        if sandbox:
            port = free_port()
            self.sandbox_url = self.env["SANDBOX_URL"] = f"http://127.0.0.1:{port}"
            db = str(self.tmp / "sandbox.sqlite3")
            child = self._spawn("sandbox", ["-m", "django", "runsandbox", "--port", str(port), "--db", db])
            waits.append((child, partial(answers, f"{self.sandbox_url}/_health"), "the sandbox listens"))
            self.env.update(provider_env(model, self.sandbox_url))
        elif model != "offline":
            raise ValueError(f"model={model!r} is played by the sandbox: start it (sandbox=True)")
        for n in range(1, workers + 1):
            child = self.worker(f"w{n}", beat=n == 1, wait=False)
            waits.append((child, partial(worker_ready, child), "the worker is ready"))
        if web:
            port = free_port()
            self.web_url = f"http://127.0.0.1:{port}"
            args = ["-m", "gunicorn", "config.asgi", "--worker-class", "asgi", "--bind", f"127.0.0.1:{port}"]
            args += ["--workers", "1", "--timeout", "30", "--graceful-timeout", "1", "--no-control-socket"]
            child = self._spawn("web", args)
            waits.append((child, partial(answers, f"{self.web_url}/login/"), "the web server listens"))
        for child, ready, what in waits:
            child.wait_ready(ready, what=what)

    def worker(self, name: str, *, beat: bool = False, wait: bool = True) -> Child:
        """A solo-pool worker consuming every queue of the settings; with ``beat``, beat inside it."""
        args = ["-m", "celery", "-A", "config", "worker", "--pool=solo", "--loglevel=INFO"]
        args += ["-n", f"kit-{name}-{os.getpid()}-{len(self.children)}@%h", "--without-gossip", "--without-mingle"]
        args += ["--without-heartbeat"]
        if beat:
            args += ["-B", "-s", str(self.tmp / f"beat-{len(self.children)}")]
        child = self._spawn(f"worker-{name}", args)
        if wait:
            child.wait_ready(lambda: worker_ready(child), what="the worker is ready")
        return child

    def _spawn(self, name: str, args: list[str]) -> Child:
        child = Child(name, [sys.executable, *args], self.env, self.tmp / f"{name}-{len(self.children)}.log")
        self.children.append(child)
        return child

    def close(self) -> None:
        for child in reversed(self.children):
            child.kill()

    def logs(self) -> str:
        """The end of every process's log, for a failure report."""
        return "\n".join(f"===== {c.name} ({c.log}) =====\n{c.output()[-4000:]}" for c in self.children)


def worker_ready(worker: Child) -> bool:
    """Whether a worker logged "ready." (it consumes its queues)."""
    return "ready." in worker.output()
