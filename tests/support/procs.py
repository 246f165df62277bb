"""The process harness the tests and ``scripts/chaos.py`` share: keel's real processes.

``Processes`` starts the sandbox (``manage.py runsandbox``), the web server (gunicorn,
as in production), Celery workers and beat (and, for a run that owns its broker, a
Redis server) with one environment, each a ``Proc`` with its output in a log file, and
stops them all in ``close``. ``Proc.kill`` is SIGKILL: crash tests and the chaos run
use it as a machine's crash. ``PrivatePostgres`` is a throwaway PostgreSQL server a
run may crash and restart without touching the machine's own. Nothing here imports
Django, so a script outside any Django process can use it; ``tests/support/stack.py``
adds what the pytest process knows (its test database, Redis and secret key).
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import requests

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
# setpriv --pdeathsig: a child is SIGKILLed when the process that started it dies
# without stopping it (pytest or chaos.py killed), so none outlives its run.
_SETPRIV = shutil.which("setpriv")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(
    predicate: Callable[[], Any], *, timeout: float = 30, interval: float = 0.2, what: str = "condition"
) -> Any:
    """Poll ``predicate`` until it returns something true, and return that; AssertionError after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)


def http(token: str | None = None) -> requests.Session:
    """A session that never goes through a proxy of the environment; with ``token``, as its bearer."""
    session = requests.Session()
    session.trust_env = False
    if token:
        session.headers["Authorization"] = f"Bearer {token}"
    return session


def approval_decision(approval: dict, event_id: str, decision: str = "approve") -> dict:
    """The body of ``POST /api/executions/{id}/events`` deciding ``approval`` (an
    execution's ``pending_approval``) for the exact version and hash it shows."""
    return {
        "type": "approval.decision",
        "approval_id": approval["id"],
        "decision": decision,
        "artifact_version": approval["artifact_version"],
        "content_sha256": approval["content_sha256"],
        "event_id": event_id,
    }


def responds(url: str) -> bool:
    """Whether anything answers HTTP at ``url`` within a second, whatever the status."""
    try:
        http().get(url, timeout=1)
        return True
    except requests.RequestException:
        return False


def keel_env(**values: str) -> dict[str, str]:
    """This process's environment for keel's processes: ``config.settings``, unbuffered
    output, 3 s leases swept every second and 3 s effect timeouts (a crash is noticed in
    seconds), then ``values``. Never pytest's async switch nor this process's failpoints."""
    env = {k: v for k, v in os.environ.items() if k not in ("DJANGO_ALLOW_ASYNC_UNSAFE", "RUNTIME_FAILPOINTS")}
    return {
        **env,
        "DJANGO_SETTINGS_MODULE": "config.settings",
        "RUNTIME_LEASE_SECONDS": "3",
        "RUNTIME_SWEEP_SECONDS": "1",
        "RUNTIME_EFFECT_TIMEOUT_SECONDS": "3",
        "PYTHONUNBUFFERED": "1",
        **values,
    }


def manage(*args: str, env: dict[str, str], log: Path | None = None, timeout: float = 300) -> str:
    """Run ``manage.py`` to completion; its stdout. RuntimeError with its output if it fails."""
    done = subprocess.run(
        [str(BIN / "python"), "manage.py", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    if log is not None:
        with open(log, "a") as f:
            f.write(f"$ manage.py {' '.join(args)}\n{done.stdout}{done.stderr}\n")
    if done.returncode != 0:
        raise RuntimeError(f"manage.py {' '.join(args)} failed:\n{done.stdout}{done.stderr}")
    return done.stdout


class Proc:
    """One child process run from the repository's root, stdout and stderr appended to ``log``."""

    def __init__(self, name: str, args: list[str], env: dict[str, str], log: Path) -> None:
        self.name, self.args, self.log = name, args, log
        self.killed = False  # stopped by us, as opposed to exiting on its own
        self._out = open(log, "ab")  # noqa: SIM115 - closed in kill()
        prefix = [_SETPRIV, "--pdeathsig", "KILL", "--"] if _SETPRIV else []
        self.popen = subprocess.Popen(
            prefix + args, cwd=ROOT, env=env, stdout=self._out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
        )

    @property
    def pid(self) -> int:
        return self.popen.pid

    def alive(self) -> bool:
        return self.popen.poll() is None

    def kill(self) -> None:
        """SIGKILL: no cleanup, no goodbye, exactly like a crashed machine."""
        self.killed = True
        if self.alive():
            self.popen.send_signal(signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.popen.wait(timeout=10)
        self._out.close()

    def terminate(self) -> None:
        """SIGTERM, without waiting for the process to exit."""
        self.killed = True
        if self.alive():
            self.popen.terminate()

    def stop(self, timeout: float = 10) -> None:
        """SIGTERM, then SIGKILL if it has not exited within ``timeout`` seconds."""
        self.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.popen.wait(timeout=timeout)
        self.kill()

    def output(self) -> str:
        try:
            return self.log.read_text(errors="replace")
        except OSError:
            return ""

    def wait_until(self, predicate: Callable[[], Any], *, what: str, timeout: float = 60) -> None:
        """Until ``predicate()`` is true; AssertionError with the output if the process exits first."""
        wait_for(lambda: predicate() or not self.alive(), timeout=timeout, what=what)
        if not self.alive():
            raise AssertionError(
                f"{self.name} exited ({self.popen.returncode}) before {what}:\n{self.output()[-3000:]}"
            )


class Processes:
    """keel's processes for one run, all with ``env`` (plus ``SANDBOX_URL``), logs in
    ``log_dir`` (default ``tmp``) as ``<name>-<n>.log``. Call ``close``."""

    def __init__(self, tmp: Path, env: dict[str, str], *, log_dir: Path | None = None) -> None:
        self.tmp = tmp
        self.log_dir = log_dir or tmp
        self.procs: list[Proc] = []
        self.sandbox_port = free_port()
        self.sandbox_url = f"http://127.0.0.1:{self.sandbox_port}"
        self.web_url: str | None = None
        self.env = {**env, "SANDBOX_URL": self.sandbox_url}

    def start(self, name: str, args: list[str], **env: str) -> Proc:
        proc = Proc(name, args, {**self.env, **env}, self.log_dir / f"{name}-{len(self.procs)}.log")
        self.procs.append(proc)
        return proc

    def sandbox(self, **env: str) -> Proc:
        """The sandbox on ``sandbox_port`` with its SQLite file in ``tmp`` (a restart keeps both), listening."""
        db = str(self.tmp / "sandbox.sqlite3")
        args = [str(BIN / "python"), "manage.py", "runsandbox", "--port", str(self.sandbox_port), "--db", db]
        proc = self.start("sandbox", args, **env)
        proc.wait_until(lambda: responds(f"{self.sandbox_url}/_health"), what="the sandbox to listen")
        return proc

    def web(self, *, workers: int = 2, **env: str) -> Proc:
        """gunicorn on a new port (``web_url``), listening, with production's worker class
        (asgi: bodies are read by the event loop, docs/operations.md); static files come from
        WhiteNoise."""
        port = free_port()
        args = [
            str(BIN / "gunicorn"),
            "config.asgi",
            "--worker-class",
            "asgi",
            "--bind",
            f"127.0.0.1:{port}",
            "--workers",
            str(workers),
            "--timeout",
            "30",
            "--graceful-timeout",
            "3",
            "--no-control-socket",  # its default path is shared by every gunicorn of the machine
        ]
        proc = self.start("web", args, **env)
        self.web_url = f"http://127.0.0.1:{port}"
        proc.wait_until(lambda: responds(f"{self.web_url}/login/"), what="the web server to listen")
        return proc

    def worker(self, name: str = "w1", *, ready: bool = True, queues: str | None = None, **env: str) -> Proc:
        """A solo-pool Celery worker named ``<name>-<our pid>``; with ``ready``, once it logged "ready.";
        with ``queues`` (``-Q``), consuming only those instead of the default queue."""
        args = [
            str(BIN / "celery"),
            "-A",
            "config",
            "worker",
            "--pool=solo",
            "--loglevel=INFO",  # so a log shows "ready." and what the worker was doing when it died
            "-n",
            f"{name}-{os.getpid()}@%h",
            "--without-gossip",
            "--without-mingle",
            "--without-heartbeat",
            *(["-Q", queues] if queues else []),
        ]
        proc = self.start(f"worker-{name}", args, **env)
        if ready:
            worker_ready(proc)
        return proc

    def beat(self, **env: str) -> Proc:
        schedule = str(self.tmp / f"beat-{len(self.procs)}")
        return self.start(
            "beat", [str(BIN / "celery"), "-A", "config", "beat", "--loglevel=INFO", "-s", schedule], **env
        )

    def redis(self, port: int) -> Proc:
        """redis-server on ``port`` of 127.0.0.1, persisting nothing (a restart forgets every
        message), answering PING."""
        args = ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
        proc = self.start("redis", args)
        proc.wait_until(lambda: redis_pings(port), timeout=20, what="redis to answer")
        return proc

    def sandbox_stats(self) -> dict:
        return http().get(f"{self.sandbox_url}/_stats", timeout=30).json()

    def close(self, timeout: float = 10) -> None:
        """SIGTERM to every process at once, SIGKILL to those still running ``timeout`` seconds later."""
        for proc in reversed(self.procs):
            proc.terminate()
        deadline = time.monotonic() + timeout
        for proc in reversed(self.procs):
            proc.stop(timeout=max(0.1, deadline - time.monotonic()))

    def logs(self) -> str:
        """The end of every process's log, for a failure report."""
        return "\n".join(f"===== {p.name} =====\n{p.output()[-4000:]}" for p in self.procs)


def worker_ready(worker: Proc, timeout: float = 60) -> None:
    """Until a worker logged "ready."; AssertionError with its output if it died first."""
    worker.wait_until(lambda: "ready." in worker.output(), timeout=timeout, what=f"{worker.name} to be ready")


def redis_pings(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1) as s:
            s.sendall(b"PING\r\n")
            return s.recv(16).startswith(b"+PONG")
    except OSError:
        return False


def postgres_bin() -> Path:
    """The newest ``/usr/lib/postgresql/<version>/bin`` (Debian's layout); ``KEEL_PG_BIN`` overrides."""
    if os.environ.get("KEEL_PG_BIN"):
        return Path(os.environ["KEEL_PG_BIN"])
    found = [p for p in Path("/usr/lib/postgresql").glob("*/bin") if (p / "postgres").exists()]
    if not found:
        raise RuntimeError("no PostgreSQL server binaries in /usr/lib/postgresql/*/bin (set KEEL_PG_BIN)")
    return max(found, key=lambda p: [int(n) for n in re.findall(r"\d+", p.parent.name)] or [0])


class PrivatePostgres:
    """A throwaway PostgreSQL server: a new cluster (initdb, trust authentication, fsync
    off) in a directory of its own, listening on a free port of 127.0.0.1 only, no Unix
    socket. A run may stop, crash and restart it; the machine's PostgreSQL is never touched.

    The postmaster runs in the foreground as a ``Proc`` (its log in ``log_dir``, SIGKILLed
    if this process dies). Run as root, the cluster belongs to the ``postgres`` user and
    the server runs as it (PostgreSQL refuses root). ``stop`` sends what ``pg_ctl stop``
    sends: SIGQUIT for ``-m immediate`` (every backend killed, no checkpoint: crash
    recovery at the next start, as after a crash) or SIGINT for ``-m fast``. Data
    survives a restart; the port stays the same. Call ``close``: it stops the server and
    removes the cluster.
    """

    def __init__(self, log_dir: Path, *, user: str = "postgres") -> None:
        self.bin = postgres_bin()
        self.log_dir = log_dir
        self.port = free_port()
        self.user = user
        self.proc: Proc | None = None
        self.starts = 0
        # Its own directory: a caller's temporary directory is often closed to other users.
        self.dir = Path(tempfile.mkdtemp(prefix="keel-pg-"))
        self.data = self.dir / "data"
        self._as_owner: list[str] = []
        if os.geteuid() == 0:
            shutil.chown(self.dir, user, user)
            # Changing the user clears the parent-death signal ``Proc`` set: set it again after.
            death = ["--pdeathsig", "KILL"] if _SETPRIV else []
            self._as_owner = ["setpriv", f"--reuid={user}", f"--regid={user}", "--init-groups", *death, "--"]
        done = subprocess.run(
            [*self._as_owner, str(self.bin / "initdb"), "-D", str(self.data), "-U", "postgres"]
            + ["--auth=trust", "--encoding=UTF8", "--no-locale", "--no-sync", "--no-instructions"],
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode != 0:
            self.close()
            raise RuntimeError(f"initdb failed:\n{done.stdout}{done.stderr}")

    @property
    def url(self) -> str:
        """The server, as its superuser: append ``/<database>``."""
        return f"postgres://postgres@127.0.0.1:{self.port}"

    def start(self, timeout: float = 60) -> None:
        """Start the server on its port; return once it accepts connections."""
        self.starts += 1
        args = [*self._as_owner, str(self.bin / "postgres"), "-D", str(self.data), "-p", str(self.port)]
        for setting in (
            "listen_addresses=127.0.0.1",
            "unix_socket_directories=",
            "fsync=off",
            "full_page_writes=off",
            "max_connections=200",
        ):
            args += ["-c", setting]
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LC_ALL": "C"}
        self.proc = Proc("postgres", args, env, self.log_dir / f"postgres-{self.starts}.log")
        self.proc.wait_until(self.accepts, timeout=timeout, what="PostgreSQL to accept connections")

    def accepts(self) -> bool:
        import psycopg

        try:
            with psycopg.connect(f"{self.url}/postgres", connect_timeout=2):
                return True
        except psycopg.Error:
            return False

    def stop(self, *, kill: bool = True, timeout: float = 60) -> None:
        """``kill``: immediate shutdown (a crash); else a fast one (clients disconnected, checkpoint)."""
        if self.proc is None or not self.proc.alive():
            return
        self.proc.popen.send_signal(signal.SIGQUIT if kill else signal.SIGINT)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.popen.wait(timeout=timeout)
        self.proc.kill()  # already gone unless it hung; closes its log either way

    def restart(self, *, kill: bool = True, down_seconds: float = 0) -> None:
        """Stop (see ``stop``), stay down ``down_seconds``, start again on the same port and data."""
        self.stop(kill=kill)
        time.sleep(down_seconds)
        self.start()

    def close(self) -> None:
        self.stop(kill=True, timeout=20)
        shutil.rmtree(self.dir, ignore_errors=True)
