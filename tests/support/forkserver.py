"""Starting keel's Python processes by forking a preloaded interpreter, for the tests.

Every keel process (a Celery worker, beat, gunicorn, the sandbox, ``manage.py …``)
spends ~0.8 s of CPU importing Django, Celery, psycopg and the rest before it runs a
line of ours, and the suite starts some 500 of them on two cores. So each pytest
process starts one fork server (``python tests/support/forkserver.py``): it imports
those libraries once — never Django's settings, the apps or anything of ours, which
each child loads itself from its own environment — and forks a child per request,
the way gunicorn's ``--preload`` and Celery's prefork pool make their workers. The
child is a real process of its own: its own session and process group (``killpg``
reaches what it starts), its output in its log file, the environment and working
directory it was given, and the command's own entry point (``manage.py``, the
``celery`` and ``gunicorn`` console scripts, ``-m module``) run as ``__main__``. It
is SIGKILLed if the fork server dies, and the fork server if the pytest process
dies (``PR_SET_PDEATHSIG``), so nothing outlives its run.

``spawn`` returns a ``Forked`` with Popen's interface (``pid``, ``poll``, ``wait``,
``send_signal``, ``terminate``, ``returncode``: the fork server reports each child's
exit), ``run`` is ``subprocess.run`` with its output captured. Anything that is not a
Python command (Redis, PostgreSQL, PgBouncer) is started as before, by exec.
``KEEL_TEST_FORKSERVER=0`` turns it off: every process is then exec'd, as ``make
run`` and production start them (tests/integration/test_make_run.py does so always).

Nothing here imports Django (tests/support/procs.py's rule).
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import io
import json
import os
import runpy
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
PR_SET_PDEATHSIG = 1

# What every keel process imports before it reads its settings: loaded once, in the server.
PRELOAD = (
    "django",
    "django.db.models",
    "django.forms",
    "django.template",
    "django.template.defaulttags",
    "django.core.handlers.wsgi",
    "django.core.handlers.asgi",
    "django.core.management",
    "django.views.generic",
    "django.contrib.auth.hashers",
    "celery",
    "celery.app",
    "celery.worker",
    "celery.apps.worker",
    "celery.apps.beat",
    "celery.bin.celery",
    "kombu",
    "kombu.transport.redis",
    "redis",
    "psycopg",
    "pydantic",
    "gunicorn.app.wsgiapp",
    "requests",
    "django_fsm",
    # Read by the apps, the API's schemas and the metrics page, and indifferent to settings:
    "annotated_types",
    "pydantic.types",
    "pydantic.json_schema",
    "pydantic.functional_validators",
    "prometheus_client",
    "markdown",
    "nh3",
    "croniter",
    "unittest.mock",
    "whitenoise",
)


def enabled() -> bool:
    return os.environ.get("KEEL_TEST_FORKSERVER", "1") != "0"


def _die_with_parent() -> None:
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


# --- The server --------------------------------------------------------------------


def _serve() -> None:
    _die_with_parent()
    for name in PRELOAD:
        __import__(name)
    if threading.active_count() != 1:  # a fork copies no thread: the children would miss it
        raise SystemExit(f"forkserver: preloading started threads: {threading.enumerate()}")
    # What was preloaded lives as long as every child: out of the garbage collector's sight
    # (Python's advice before forking workers). Otherwise each child's first full collection
    # walks all of it again while it imports the apps, ~0.2 s of a child's ~0.6 s start.
    gc.collect()
    gc.freeze()
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    signal.set_wakeup_fd(wake_w, warn_on_full_buffer=False)
    requests_in = sys.stdin.buffer
    replies = sys.stdout.buffer

    def say(line: str) -> None:
        replies.write(line.encode() + b"\n")
        replies.flush()

    say("ready")
    buffered = b""
    while True:
        readable, _, _ = select.select([requests_in.fileno(), wake_r], [], [])
        if wake_r in readable:
            with contextlib.suppress(BlockingIOError):
                os.read(wake_r, 4096)
        _reap(say)
        if requests_in.fileno() in readable:
            chunk = os.read(requests_in.fileno(), 65536)
            if not chunk:  # the pytest process is gone
                return
            buffered += chunk
            while b"\n" in buffered:
                line, buffered = buffered.split(b"\n", 1)
                request = json.loads(line)
                pid = os.fork()
                if pid == 0:
                    os.close(wake_r)
                    os.close(wake_w)
                    _child(request)  # never returns
                say(f"pid {pid}")


def _reap(say) -> None:
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        say(f"exit {pid} {os.waitstatus_to_exitcode(status)}")


def _child(request: dict) -> None:
    """In the forked child: become the requested command (this never returns)."""
    code = 1
    try:
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        os.setsid()
        _die_with_parent()
        null = os.open(os.devnull, os.O_RDONLY)
        out = os.open(request["stdout"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        err = (
            out
            if request["stderr"] == request["stdout"]
            else os.open(request["stderr"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        )
        os.dup2(null, 0)
        os.dup2(out, 1)
        os.dup2(err, 2)
        for fd in {null, out, err}:
            os.close(fd)
        sys.stdin = open(0, closefd=False)  # noqa: SIM115 - the process's own stdin
        sys.stdout = io.TextIOWrapper(open(1, "wb", buffering=0, closefd=False), write_through=True)  # noqa: SIM115
        sys.stderr = io.TextIOWrapper(open(2, "wb", buffering=0, closefd=False), write_through=True)  # noqa: SIM115
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        code = _run_main(request["argv"])
    except SystemExit as exit_:
        code = exit_.code if isinstance(exit_.code, int) else (0 if exit_.code is None else 1)
        if not isinstance(exit_.code, int | None):
            print(exit_.code, file=sys.stderr)
    except BaseException:
        traceback.print_exc()
        code = 1
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)


def _run_main(argv: list[str]) -> int:
    """Run ``argv`` (a Python command) as ``__main__`` in this process."""
    if python_command(argv) == "module":
        module, rest = argv[2], argv[3:]
        sys.argv = [module, *rest]
        sys.path[0] = os.getcwd()
        runpy.run_module(module, run_name="__main__", alter_sys=True)
        return 0
    script = argv[1] if _is_python(argv[0]) else argv[0]
    sys.argv = [script, *argv[(2 if _is_python(argv[0]) else 1) :]]
    sys.path[0] = str(Path(script).resolve().parent)
    runpy.run_path(script, run_name="__main__")
    return 0


def _is_python(exe: str) -> bool:
    return Path(exe).name.startswith("python")


def python_command(argv: list[str]) -> str | None:
    """ "module" (``python -m x``), "script" (``python x.py``, a console script of our venv),
    or None: not something the fork server can run."""
    if not argv:
        return None
    if _is_python(argv[0]):
        if len(argv) >= 3 and argv[1] == "-m":
            return "module"
        return "script" if len(argv) >= 2 and not argv[1].startswith("-") else None
    path = Path(argv[0])
    if path.parent == BIN and path.is_file():
        with open(path, "rb") as f:
            first = f.readline()
        return "script" if first.startswith(b"#!") and b"python" in first else None
    return None


# --- The client (the pytest process) -----------------------------------------------


class _Server:
    def __init__(self) -> None:
        prefix = ["setpriv", "--pdeathsig", "KILL", "--"] if shutil.which("setpriv") else []
        env = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}
        self.popen = subprocess.Popen(
            [*prefix, sys.executable, str(Path(__file__).resolve())],
            cwd=ROOT,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
        )
        self.owner = os.getpid()
        self.dead = False
        # Exits by (pid, birth): pids wrap (at 32768 here), so a pid names a child only together
        # with how many children had it before.
        self.exits: dict[tuple[int, int], int] = {}
        self.births: dict[int, int] = {}
        self.changed = threading.Condition()
        self._pids: list[int] = []
        self._lock = threading.Lock()
        if self.popen.stdout.readline().strip() != b"ready":
            raise RuntimeError("the fork server did not start")
        threading.Thread(target=self._read, name="forkserver-replies", daemon=True).start()

    def _read(self) -> None:
        for line in self.popen.stdout:
            kind, *values = line.decode().split()
            with self.changed:
                if kind == "pid":
                    pid = int(values[0])
                    self.births[pid] = self.births.get(pid, 0) + 1
                    self._pids.append(pid)
                elif kind == "exit":
                    pid = int(values[0])
                    self.exits[(pid, self.births.get(pid, 0))] = int(values[1])
                self.changed.notify_all()
        with self.changed:  # the server died: its children died with it (PR_SET_PDEATHSIG)
            self.dead = True
            self.changed.notify_all()

    def spawn(self, argv: list[str], *, env: dict[str, str], cwd: Path, stdout: Path, stderr: Path) -> tuple[int, int]:
        """The new child's (pid, birth)."""
        request = {"argv": argv, "env": env, "cwd": str(cwd), "stdout": str(stdout), "stderr": str(stderr)}
        with self._lock:
            self.popen.stdin.write(json.dumps(request).encode() + b"\n")
            self.popen.stdin.flush()
            with self.changed:
                if not self.changed.wait_for(lambda: self._pids or self.dead, timeout=30) or not self._pids:
                    raise RuntimeError("the fork server did not answer")
                pid = self._pids.pop(0)
                return pid, self.births[pid]


_server: _Server | None = None
_server_lock = threading.Lock()


def _the_server() -> _Server:
    global _server
    with _server_lock:
        if _server is None or _server.owner != os.getpid() or _server.dead:
            _server = _Server()
        return _server


class Forked:
    """A forked child, with the part of Popen's interface the harness uses."""

    def __init__(self, argv: list[str], *, env: dict[str, str], cwd: Path, stdout: Path, stderr: Path) -> None:
        self.args = argv
        self._server = _the_server()
        self.pid, self._birth = self._server.spawn(argv, env=env, cwd=cwd, stdout=stdout, stderr=stderr)
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            with self._server.changed:
                self.returncode = self._server.exits.get(
                    (self.pid, self._birth), -signal.SIGKILL if self._server.dead else None
                )
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        with self._server.changed:
            done = self._server.changed.wait_for(
                lambda: (self.pid, self._birth) in self._server.exits or self._server.dead, timeout=timeout
            )
        if not done:
            raise subprocess.TimeoutExpired(self.args, timeout)
        return self.poll()

    def send_signal(self, sig: int) -> None:
        if self.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, sig)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)


def spawn(argv: list[str], *, env: dict[str, str], cwd: Path, log: Path) -> Forked | None:
    """``argv`` forked from the server, its output appended to ``log``; None if it is not a
    Python command or the fork server is off (the caller execs it)."""
    if not enabled() or python_command(argv) is None:
        return None
    return Forked(argv, env=env, cwd=cwd, stdout=log, stderr=log)


def run(argv: list[str], *, env: dict[str, str], cwd: Path, timeout: float) -> subprocess.CompletedProcess:
    """``subprocess.run(argv, capture_output=True, text=True, timeout=…)``, forked when it can be."""
    if not enabled() or python_command(argv) is None:
        return subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False)
    with tempfile.TemporaryDirectory(prefix="keel-run-") as tmp:
        out, err = Path(tmp) / "stdout", Path(tmp) / "stderr"
        child = Forked(argv, env=env, cwd=cwd, stdout=out, stderr=err)
        try:
            code = child.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(child.pid, signal.SIGKILL)
            child.wait(timeout=10)
            raise
        read = lambda p: p.read_text(errors="replace") if p.exists() else ""  # noqa: E731
        return subprocess.CompletedProcess(argv, code, read(out), read(err))


if __name__ == "__main__":
    # Started as a script: sys.path[0] is this folder; the children put their own first.
    _serve()
