"""The process harness the tests and ``scripts/chaos.py`` share: keel's real processes.

``Processes`` starts the sandbox (``manage.py runsandbox``), the web server (gunicorn,
as in production), Celery workers and beat (and, for a run that owns its broker, a
Redis server) with one environment, each a ``Proc`` with its output in a log file, and
kills them all in ``close``. Processes started inside ``with procs.together():`` start
at once and the block ends when every one of them is ready, so a run pays for the
slowest start, not the sum. ``Proc.kill`` is SIGKILL to the process and everything it
started: crash tests and the chaos run use it as a machine's crash. ``PrivatePostgres`` is a throwaway PostgreSQL server a
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
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import requests

from tests.support import forkserver

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
# setpriv --pdeathsig: a child is SIGKILLed when the process that started it dies
# without stopping it (pytest or chaos.py killed), so none outlives its run.
_SETPRIV = shutil.which("setpriv")
# The queues a worker consumes (config/settings.py, CELERY_TASK_QUEUES): the steps, and
# the control tasks beat sends (the sweep, the metrics fold). Named here because this
# module imports no Django; tests/unit/test_queues.py keeps the two equal.
WORKER_QUEUES = "celery,control"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(
    predicate: Callable[[], Any], *, timeout: float = 30, interval: float = 0.4, what: str = "condition"
) -> Any:
    """Poll ``predicate`` until it returns something true, and return that; AssertionError after
    ``timeout``. The first polls come 50 ms apart, then further apart, up to ``interval``."""
    deadline = time.monotonic() + timeout
    pause = min(0.05, interval)  # soon at first, then less often: a long wait polls (and costs) less
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(pause)
        pause = min(pause * 1.5, interval)


class _Session(requests.Session):
    """A session that sends a request again, once, when the connection it reused from its
    pool was closed by the server just as the request went out (gunicorn closes a
    connection idle for ``--keep-alive``, 2 s, between requests: a request sent at that
    moment is answered by nothing, and was never read — sending it again repeats nothing)."""

    def request(self, *args: Any, **kwargs: Any) -> requests.Response:
        try:
            return super().request(*args, **kwargs)
        except requests.ConnectionError as exc:
            if "RemoteDisconnected" not in str(exc):
                raise
        return super().request(*args, **kwargs)


def http(token: str | None = None) -> requests.Session:
    """A session that never goes through a proxy of the environment; with ``token``, as its bearer."""
    session = _Session()
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
    output, 3 s leases swept twice a second and 3 s effect timeouts (a crash is noticed in
    seconds, a retry runs within half a second of its due time), then ``values``. Never
    pytest's async switch nor this process's failpoints."""
    env = {k: v for k, v in os.environ.items() if k not in ("DJANGO_ALLOW_ASYNC_UNSAFE", "RUNTIME_FAILPOINTS")}
    return {
        **env,
        "DJANGO_SETTINGS_MODULE": "config.settings",
        "RUNTIME_LEASE_SECONDS": "3",
        "RUNTIME_SWEEP_SECONDS": "0.5",
        "RUNTIME_HOUSEKEEPING_SECONDS": "2",  # the fold, tally, notifications, schedules (beat's other ticks)
        "RUNTIME_UNHELD_SECONDS": "2",  # the "nothing hangs without a reason" check
        "RUNTIME_EFFECT_TIMEOUT_SECONDS": "3",
        "PYTHONUNBUFFERED": "1",
        # E-mail and webhooks stay as production runs them (KEEL_NOTIFICATIONS on by default):
        # a stack's processes send to the run's receivers (stack.app_env), any other keel
        # process to its var dir's mail folder.
        **values,
    }


def run_manage(*args: str, env: dict[str, str], timeout: float = 120) -> subprocess.CompletedProcess:
    """``manage.py *args`` run to completion, its output captured, whatever its exit code
    (forked from the fork server: tests/support/forkserver.py)."""
    return forkserver.run([str(BIN / "python"), "manage.py", *args], env=env, cwd=ROOT, timeout=timeout)


def manage(*args: str, env: dict[str, str], log: Path | None = None, timeout: float = 300) -> str:
    """Run ``manage.py`` to completion; its stdout. RuntimeError with its output if it fails."""
    done = run_manage(*args, env=env, timeout=timeout)
    if log is not None:
        with open(log, "a") as f:
            f.write(f"$ manage.py {' '.join(args)}\n{done.stdout}{done.stderr}\n")
    if done.returncode != 0:
        raise RuntimeError(f"manage.py {' '.join(args)} failed:\n{done.stdout}{done.stderr}")
    return done.stdout


class Proc:
    """One child process run from the repository's root, stdout and stderr appended to ``log``,
    in a process group of its own (with whatever it starts, e.g. gunicorn's workers).

    ``ready(proc)`` is the condition that says it is up (``wait_ready``), ``what`` names it."""

    def __init__(
        self,
        name: str,
        args: list[str],
        env: dict[str, str],
        log: Path,
        *,
        ready: Callable[[Proc], Any] | None = None,
        what: str = "",
    ) -> None:
        if os.environ.get("KEEL_NO_PROCESSES"):
            raise RuntimeError(f"{name}: this run starts no processes (make test-fast); mark the test `processes`")
        self.name, self.args, self.log = name, args, log
        self.ready, self.what = ready, what or f"{name} to be ready"
        self.killed = False  # stopped by us, as opposed to exiting on its own
        self._out = None  # an exec'd process's log, open while it runs (a forked one opens its own)
        # A Python command is forked from the preloaded fork server (tests/support/forkserver.py);
        # anything else (Redis, PostgreSQL, PgBouncer) is exec'd.
        self.popen: subprocess.Popen | forkserver.Forked | None = forkserver.spawn(args, env=env, cwd=ROOT, log=log)
        if self.popen is None:
            self._out = open(log, "ab")  # noqa: SIM115 - closed in kill()
            prefix = [_SETPRIV, "--pdeathsig", "KILL", "--"] if _SETPRIV else []
            self.popen = subprocess.Popen(
                prefix + args,
                cwd=ROOT,
                env=env,
                stdout=self._out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )

    @property
    def pid(self) -> int:
        return self.popen.pid

    def alive(self) -> bool:
        return self.popen.poll() is None

    def kill(self) -> None:
        """SIGKILL to the process and everything it started: no cleanup, no goodbye,
        exactly like a crashed machine."""
        self.killed = True
        # Never once it has exited: its pid (and group id) may already be another process's
        # (pids wrap at 32768 on these machines, and a run starts thousands of processes).
        if self.popen.poll() is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.popen.pid, signal.SIGKILL)  # its group: gunicorn's workers die with it
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.popen.wait(timeout=10)
        if self._out is not None:
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

    def wait_until(
        self, predicate: Callable[[], Any], *, what: str, timeout: float = 60, interval: float = 0.2
    ) -> None:
        """Until ``predicate()`` is true; AssertionError with the output if the process exits first."""
        wait_for(lambda: predicate() or not self.alive(), timeout=timeout, interval=interval, what=what)
        if not self.alive():
            raise AssertionError(
                f"{self.name} exited ({self.popen.returncode}) before {what}:\n{self.output()[-3000:]}"
            )

    def wait_ready(self, timeout: float = 60) -> None:
        """Until its ``ready`` condition holds (at once without one); AssertionError if it exits first."""
        if self.ready is not None:
            self.wait_until(lambda: self.ready(self), what=self.what, timeout=timeout, interval=0.05)

    def count(self, pattern: re.Pattern[str]) -> int:
        """How many times ``pattern`` matches its output so far."""
        return len(pattern.findall(self.output()))


class Processes:
    """keel's processes for one run, all with ``env`` (plus ``SANDBOX_URL``), logs in
    ``log_dir`` (default ``tmp``) as ``<name>-<n>.log``. Call ``close``.

    With ``sandbox_url`` the run uses a sandbox that is already up (the test run's one)
    instead of starting its own."""

    def __init__(
        self, tmp: Path, env: dict[str, str], *, log_dir: Path | None = None, sandbox_url: str | None = None
    ) -> None:
        self.tmp = tmp
        self.log_dir = log_dir or tmp
        self.procs: list[Proc] = []
        self.sandbox_port = None if sandbox_url else free_port()
        self.sandbox_url = sandbox_url or f"http://127.0.0.1:{self.sandbox_port}"
        self.web_url: str | None = None
        self.env = {**env, "SANDBOX_URL": self.sandbox_url}
        self._starting: list[Proc] | None = None  # inside together(): started, readiness not yet awaited

    def start(
        self, name: str, args: list[str], *, ready: Callable[[Proc], Any] | None = None, what: str = "", **env: str
    ) -> Proc:
        """Start ``args`` as ``name``; with ``ready``, return once it holds (or, inside
        ``together``, when the block ends)."""
        log = self.log_dir / f"{name}-{len(self.procs)}.log"
        proc = Proc(name, args, {**self.env, **env}, log, ready=ready, what=what)
        self.procs.append(proc)
        if ready is not None:
            if self._starting is not None:
                self._starting.append(proc)
            else:
                proc.wait_ready()
        return proc

    @contextlib.contextmanager
    def together(self) -> Iterator[None]:
        """Processes started inside the block start at once; the block ends when every one
        of them is ready (AssertionError naming the first that died or timed out). Inside
        another ``together`` it is part of that one."""
        if self._starting is not None:
            yield
            return
        self._starting = []
        try:
            yield
            for proc in self._starting:
                proc.wait_ready()
        finally:
            self._starting = None

    def sandbox(self, **env: str) -> Proc:
        """The sandbox on ``sandbox_port`` with its SQLite file in ``tmp`` (a restart keeps both), listening."""
        if self.sandbox_port is None:
            raise RuntimeError(f"this run uses the sandbox at {self.sandbox_url}; it starts none of its own")
        db = str(self.tmp / "sandbox.sqlite3")
        args = [str(BIN / "python"), "manage.py", "runsandbox", "--port", str(self.sandbox_port), "--db", db]
        url = f"{self.sandbox_url}/_health"
        return self.start("sandbox", args, ready=lambda _: responds(url), what="the sandbox to listen", **env)

    def web(self, *, workers: int = 1, **env: str) -> Proc:
        """gunicorn on a new port (``web_url``), listening, with production's worker class
        (gunicorn's asgi worker closing idle connections: bodies are read by the event loop,
        docs/operations.md); static files come from WhiteNoise."""
        port = free_port()
        args = [
            str(BIN / "gunicorn"),
            "config.asgi",
            "--worker-class",
            "config.web_worker.ASGIWorker",
            "--bind",
            f"127.0.0.1:{port}",
            "--workers",
            str(workers),
            "--timeout",
            "30",
            "--graceful-timeout",
            "1",
            "--no-control-socket",  # its default path is shared by every gunicorn of the machine
        ]
        self.web_url = url = f"http://127.0.0.1:{port}"
        login = f"{url}/login/"
        return self.start("web", args, ready=lambda _: responds(login), what="the web server to listen", **env)

    def worker(
        self, name: str = "w1", *, ready: bool = True, queues: str = WORKER_QUEUES, beat: bool = False, **env: str
    ) -> Proc:
        """A solo-pool Celery worker named ``<name>-<our pid>`` consuming ``queues`` (``-Q``: the
        steps' and the control queue unless told otherwise); with ``ready``, once it logged "ready.".
        With ``beat``, beat runs inside it (``-B``: forked from the worker once it has loaded
        the app, so it costs no start of its own; it dies with the worker)."""
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
            "-Q",
            queues,
        ]
        if beat:
            args += ["-B", "-s", str(self.tmp / f"beat-{len(self.procs)}")]
        up = worker_is_ready if ready else None
        return self.start(f"worker-{name}", args, ready=up, what=f"worker-{name} to be ready", **env)

    def beat(self, **env: str) -> Proc:
        schedule = str(self.tmp / f"beat-{len(self.procs)}")
        return self.start(
            "beat", [str(BIN / "celery"), "-A", "config", "beat", "--loglevel=INFO", "-s", schedule], **env
        )

    def redis(self, port: int) -> Proc:
        """redis-server on ``port`` of 127.0.0.1, persisting nothing (a restart forgets every
        message), answering PING."""
        args = ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
        return self.start("redis", args, ready=lambda _: redis_pings(port), what="redis to answer")

    def sandbox_stats(self) -> dict:
        return http().get(f"{self.sandbox_url}/_stats", timeout=30).json()

    def close(self) -> None:
        """SIGKILL every process (and what it started): a run's processes keep nothing worth a
        graceful stop, and gunicorn's would wait out its keep-alive connections."""
        for proc in reversed(self.procs):
            proc.kill()

    def logs(self) -> str:
        """The end of every process's log, for a failure report."""
        return "\n".join(f"===== {p.name} =====\n{p.output()[-4000:]}" for p in self.procs)


def stop_together(*procs: Proc, timeout: float = 10) -> None:
    """SIGTERM to every one of ``procs`` at once (a deploy), then as ``Proc.stop``: the slowest
    to stop sets the time, not the sum."""
    for proc in procs:
        proc.terminate()
    deadline = time.monotonic() + timeout
    for proc in procs:
        proc.stop(timeout=max(0.1, deadline - time.monotonic()))


def worker_is_ready(worker: Proc) -> bool:
    """Whether a worker logged "ready." (it consumes its queues)."""
    return "ready." in worker.output()


def worker_ready(worker: Proc, timeout: float = 60) -> None:
    """Until a worker logged "ready."; AssertionError with its output if it died first."""
    worker.wait_until(
        lambda: worker_is_ready(worker), timeout=timeout, what=f"{worker.name} to be ready", interval=0.05
    )


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


def pgbouncer_bin() -> str:
    """Debian's ``pgbouncer`` (scripts/ensure-services installs it); ``KEEL_PGBOUNCER`` overrides."""
    found = os.environ.get("KEEL_PGBOUNCER") or shutil.which("pgbouncer") or "/usr/sbin/pgbouncer"
    if not Path(found).exists():
        raise RuntimeError("no pgbouncer (apt-get install -y pgbouncer, or scripts/ensure-services)")
    return found


class PgBouncer:
    """A PgBouncer of its own in ``pool_mode = transaction`` in front of the PostgreSQL at
    ``server_port``, on a free port of 127.0.0.1 (no Unix socket), every database of the
    server reachable by its name, trust authentication for ``users`` (the test server
    trusts 127.0.0.1 too). The settings are the ones docs/operations.md documents for
    production, sized for a test run. Run as root, it runs as ``postgres`` (PgBouncer
    refuses root). ``restart`` kills it (SIGKILL: every client connection and every
    server connection dropped mid-flight) and starts it again on the same port."""

    def __init__(
        self, log_dir: Path, *, server_port: int = 5432, users: tuple[str, ...] = ("postgres", "keel_app")
    ) -> None:
        self.log_dir = log_dir
        self.port = free_port()
        self.proc: Proc | None = None
        self.starts = 0
        self.dir = Path(tempfile.mkdtemp(prefix="keel-pgbouncer-"))
        (self.dir / "users.txt").write_text("".join(f'"{user}" ""\n' for user in users))
        (self.dir / "pgbouncer.ini").write_text(
            "\n".join(
                [
                    "[databases]",
                    f"* = host=127.0.0.1 port={server_port}",
                    "[pgbouncer]",
                    "listen_addr = 127.0.0.1",
                    f"listen_port = {self.port}",
                    "unix_socket_dir =",
                    "auth_type = trust",
                    f"auth_file = {self.dir / 'users.txt'}",
                    "pool_mode = transaction",
                    "max_client_conn = 500",
                    "default_pool_size = 20",
                    "max_db_connections = 40",
                    "server_reset_query =",
                    "server_check_delay = 0",
                    "server_login_retry = 1",
                    "ignore_startup_parameters = extra_float_digits",
                    "admin_users = postgres",
                    "",
                ]
            )
        )
        self._as_owner: list[str] = []
        if os.geteuid() == 0:
            for path in (self.dir, self.dir / "users.txt", self.dir / "pgbouncer.ini"):
                shutil.chown(path, "postgres", "postgres")
            death = ["--pdeathsig", "KILL"] if _SETPRIV else []
            self._as_owner = ["setpriv", "--reuid=postgres", "--regid=postgres", "--init-groups", *death, "--"]

    def url(self, user: str, database: str) -> str:
        return f"postgres://{user}@127.0.0.1:{self.port}/{database}"

    def start(self, timeout: float = 30) -> None:
        self.starts += 1
        args = [*self._as_owner, pgbouncer_bin(), str(self.dir / "pgbouncer.ini")]
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LC_ALL": "C"}
        self.proc = Proc("pgbouncer", args, env, self.log_dir / f"pgbouncer-{self.starts}.log")
        self.proc.wait_until(self.accepts, timeout=timeout, what="PgBouncer to accept connections")

    def accepts(self) -> bool:
        import psycopg

        try:
            with psycopg.connect(self.url("postgres", "postgres"), connect_timeout=2, prepare_threshold=None) as c:
                c.execute("SELECT 1")
                return True
        except psycopg.Error:
            return False

    def release(self, database: str) -> None:
        """Close every connection the pooler holds for ``database`` — its clients' and its
        idle server connections — at once (admin console ``KILL``), then let clients in again
        (``RESUME``). Nothing if the pooler is down."""
        import psycopg

        if self.proc is None or not self.proc.alive():
            return
        admin = self.url("postgres", "pgbouncer")  # the admin console speaks the simple protocol only
        with psycopg.connect(admin, autocommit=True, cursor_factory=psycopg.ClientCursor) as c:
            c.execute(f"KILL {database}")
            c.execute(f"RESUME {database}")

    def restart(self, *, down_seconds: float = 0) -> None:
        if self.proc is not None:
            self.proc.kill()
        time.sleep(down_seconds)
        self.start()

    def close(self) -> None:
        if self.proc is not None:
            self.proc.kill()
        shutil.rmtree(self.dir, ignore_errors=True)


class StandbyPostgres(PrivatePostgres):
    """A streaming replica (hot standby) of a ``PrivatePostgres``: ``pg_basebackup -R`` of
    the primary into a directory of its own, on another free port. ``start``, ``stop`` and
    ``close`` as the primary's; ``pause``/``resume`` its replay (to make it lag on purpose)."""

    def __init__(self, primary: PrivatePostgres, log_dir: Path) -> None:  # no initdb
        self.bin = primary.bin
        self.log_dir = log_dir
        self.port = free_port()
        self.user = primary.user
        self.proc = None
        self.starts = 0
        self.dir = Path(tempfile.mkdtemp(prefix="keel-pg-standby-"))
        self.data = self.dir / "data"
        self._as_owner = primary._as_owner
        if os.geteuid() == 0:
            shutil.chown(self.dir, self.user, self.user)
        done = subprocess.run(
            [*self._as_owner, str(self.bin / "pg_basebackup"), "-D", str(self.data), "-R", "-X", "stream"]
            + ["-h", "127.0.0.1", "-p", str(primary.port), "-U", "postgres", "--no-sync", "--checkpoint=fast"],
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode != 0:
            self.close()
            raise RuntimeError(f"pg_basebackup failed:\n{done.stdout}{done.stderr}")

    def replay(self, *, paused: bool) -> None:
        import psycopg

        with psycopg.connect(f"{self.url}/postgres", autocommit=True) as conn:
            conn.execute("SELECT pg_wal_replay_pause()" if paused else "SELECT pg_wal_replay_resume()")
