"""The processes of the tests, pointed at what the pytest process uses.

``Stack`` is the shared harness (tests/support/procs.py) with the environment of the
*test* database pytest-django created and a Redis database the tests own (flushed
for each stack). The web server, workers and beat connect as the application's role
(``APP_DB_ROLE``, set up by ``grant_app_role`` in tests/conftest.py), as in
production: they may only SELECT and INSERT the append-only tables. The pytest
process stays the owner. Crash tests SIGKILL these processes; nothing here is mocked.

Three lifetimes (the fixtures are in tests/conftest.py):

- ``Sandbox``: the simulated services, started once per pytest process (a run in two
  processes has two) and emptied (``POST /_reset``: tables, faults, configuration)
  before each test that uses it.
- ``SharedStacks``: one stack at a time (web, beat, workers) that tests which kill
  nothing share. ``stack.up(...)`` names what a test needs; consecutive tests asking
  for the same get the same processes (for other workers only, new workers). Between
  two tests the stack settles (``Stack.settle``: nothing running, pending or about to
  be due), then the database is flushed; a stack that doesn't settle, or whose
  processes died, is replaced.
- a test's own ``Stack`` (``@pytest.mark.own_stack``): for tests that kill, stop,
  pause or specially configure processes. It is created only once the shared stack
  is closed, so no two stacks ever consume the same queues.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import redis
from django.conf import settings
from django.db import connection
from django.db.models import Q
from django.utils import timezone

from tests.support.procs import PgBouncer, Proc, Processes, http, keel_env, wait_for
from tests.support.receivers import Mailbox, WebhookReceiver

# The PostgreSQL role the application's processes run as (docs/operations.md, Security).
APP_DB_ROLE = "keel_app"
# How long a shared stack may take to settle after a test before it is replaced.
SETTLE_SECONDS = 3
# Celery's lines for a finished sweep and a finished step task (workers log at INFO).
SWEEP_DONE = re.compile(r"Task executions\.sweep\[[^\]]+\] (?:succeeded|raised|failed)")
ADVANCE_DONE = re.compile(r"Task executions\.advance\[[^\]]+\] (?:succeeded|raised|failed)")
FOLD_DONE = re.compile(r"Task metrics\.fold\[[^\]]+\] (?:succeeded|raised|failed)")


class Sandbox:
    """The sandbox of a test run: one process on one port with its SQLite file in ``tmp``.
    ``reset`` empties it (and starts it again, on the same port, if a test killed it)."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.procs = Processes(tmp, keel_env())
        self.url = self.procs.sandbox_url
        self.proc = self.procs.sandbox()

    def reset(self) -> None:
        if not self.proc.alive():
            self.proc = self.procs.sandbox()
        answer = http().post(f"{self.url}/_reset", timeout=10)
        assert answer.status_code == 200, answer.text

    def close(self) -> None:
        self.procs.close()


@dataclass
class Up:
    """The processes ``Stack.up`` started (or found running)."""

    web: Proc | None
    beat: Proc | None
    workers: list[Proc] = field(default_factory=list)

    @property
    def worker(self) -> Proc:
        [only] = self.workers
        return only

    def all(self) -> list[Proc]:
        return [p for p in (self.web, self.beat, *self.workers) if p is not None]


@dataclass(frozen=True)
class Spec:
    """What ``Stack.up`` was asked for; equal specs share processes."""

    web: bool
    beat: bool
    workers: tuple[str, ...]
    env: tuple[tuple[str, str], ...]
    worker_env: tuple[tuple[str, str], ...]
    web_env: tuple[tuple[str, str], ...]

    @classmethod
    def of(
        cls,
        *,
        web: bool = True,
        beat: bool = True,
        workers: int | tuple[str, ...] = 1,
        worker_env: dict[str, str] | None = None,
        web_env: dict[str, str] | None = None,
        **env: str,
    ) -> Spec:
        names = tuple(f"w{n + 1}" for n in range(workers)) if isinstance(workers, int) else tuple(workers)
        return cls(
            web=web,
            beat=beat,
            workers=names,
            env=tuple(sorted(env.items())),
            worker_env=tuple(sorted((worker_env or {}).items())),
            web_env=tuple(sorted((web_env or {}).items())),
        )


# Production's defaults are the tested defaults (docs/design.md §4, fourth round): every keel process
# of the run tells people by e-mail and other systems by webhook, as production does once
# EMAIL_HOST is set — to the run's own receivers (tests/support/receivers.py), started
# once per pytest process. A test may still turn them off (KEEL_NOTIFICATIONS=off).
WEBHOOK_SECRET = "run-webhook-secret"
_outbox: tuple[Mailbox, WebhookReceiver] | None = None


def outbox() -> tuple[Mailbox, WebhookReceiver]:
    """The run's SMTP sink and webhook receiver (this pytest process's; started on first use)."""
    global _outbox
    if _outbox is None:
        _outbox = (Mailbox(), WebhookReceiver(WEBHOOK_SECRET))
    return _outbox


def outbox_env() -> dict[str, str]:
    mailbox, hooks = outbox()
    return {
        "KEEL_NOTIFICATIONS": "on",
        "EMAIL_HOST": "127.0.0.1",
        "EMAIL_PORT": str(mailbox.port),
        "KEEL_WEBHOOK_URL": hooks.url,
        "KEEL_WEBHOOK_SECRET": WEBHOOK_SECRET,
    }


# What the run's processes tell people and systems: actions beside the steps (notifications/).
TOLD = ("notify_approver", "webhook")


def own_actions(execution: dict) -> list[dict]:
    """An execution's ``actions`` (the API's) without the e-mails and webhooks sent beside
    its steps: the workflow's own effects."""
    return [a for a in execution["actions"] if a["type"] not in TOLD]


def untold(queryset):
    """``queryset`` (actions or events) without what telling people and systems writes, in
    its own time beside the steps: a test that says "nothing was written" by an operation
    counts these, never the e-mails and webhooks the run sends meanwhile."""
    from executions.models import Action, ExecutionEvent

    if queryset.model is Action:
        return queryset.filter(beside=False)
    if queryset.model is not ExecutionEvent:
        return queryset
    from django.db.models.fields.json import KeyTextTransform

    told = Action.objects.filter(beside=True).values("key")
    about = queryset.annotate(action_key=KeyTextTransform("key", "payload"))
    return about.exclude(type__startswith="action.", action_key__in=told)


def app_env(tmp: Path, *, pooler: PgBouncer | None = None, **env: str) -> dict[str, str]:
    """The environment of a keel process of this test run: the test database as the
    application's role (through ``pooler``, a PgBouncer in transaction mode, when given),
    the run's Redis, the pytest process's secret key and artifact store, its var dir in
    ``tmp``, e-mail and webhooks to the run's receivers (``outbox_env``), then ``env`` (a
    ``manage.py`` command needs no more)."""
    db = connection.settings_dict
    url = f"postgres://{APP_DB_ROLE}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"
    if pooler is not None:
        url = pooler.url(APP_DB_ROLE, db["NAME"])
        env = {"DATABASE_POOL_MODE": "transaction", **env}
    return keel_env(
        DATABASE_URL=url,
        CELERY_BROKER_URL=settings.CELERY_BROKER_URL,
        KEEL_VAR_DIR=str(tmp / "var"),
        # One key for this process and the stack's (each var dir would otherwise make its own).
        DJANGO_SECRET_KEY=settings.SECRET_KEY,
        KEEL_ARTIFACTS_ROOT=str(settings.ARTIFACTS_ROOT),
        **{**outbox_env(), **env},
    )


class Stack(Processes):
    """keel's processes for tests, using the run's ``sandbox``, with failpoints in ``tmp``.
    Call ``close`` (the fixtures do)."""

    shared = False

    def __init__(self, tmp: Path, sandbox: Sandbox, *, pooler: PgBouncer | None = None, **env: str) -> None:
        self.failpoint_dir = tmp / "failpoints"
        self.run_sandbox = sandbox
        self.pooler = pooler  # every process of the stack connects through it (S46, S47)
        super().__init__(
            tmp,
            app_env(tmp, pooler=pooler, RUNTIME_FAILPOINT_DIR=str(self.failpoint_dir), **env),
            sandbox_url=sandbox.url,
        )
        redis.Redis.from_url(settings.CELERY_BROKER_URL).flushdb()

    def close(self) -> None:
        """As ``Processes.close``; through a pooler, also its server connections to the test
        database (the run's PgBouncer outlives the stack, and its idle pool would count as
        connections of whatever the next test starts)."""
        super().close()
        if self.pooler is not None:
            self.pooler.release(connection.settings_dict["NAME"])

    def sandbox(self, **env: str) -> Proc:
        """The run's sandbox: already up, and emptied for this test."""
        assert not env, "the run's sandbox is started once, with no environment of a test's"
        return self.run_sandbox.proc

    def up(self, **spec: Any) -> Up:
        """Start, together, what ``Spec.of(**spec)`` names: the web server (``web_env``),
        beat, the workers (``worker_env``), all with ``env``; return once all are ready."""
        return self.start_spec(Spec.of(**spec))

    def start_spec(self, spec: Spec) -> Up:
        """The processes ``spec`` names, started together. A shared stack runs its beat inside
        its first worker (``-B``; a shared stack kills nothing, so the two never die apart);
        a stack of a test's own starts beat as a process of its own, as production does."""
        env, web_env = dict(spec.env), dict(spec.web_env)
        with self.together():
            web = self.web(**env, **web_env) if spec.web else None
            beat = self.beat(**env) if spec.beat and not self._embeds_beat(spec) else None
            workers = self.start_workers(spec)
        return Up(web=web, beat=beat, workers=workers)

    def _embeds_beat(self, spec: Spec) -> bool:
        return self.shared and spec.beat and bool(spec.workers)

    def start_workers(self, spec: Spec) -> list[Proc]:
        with self.together():
            return [
                self.worker(name, beat=i == 0 and self._embeds_beat(spec), **dict(spec.env), **dict(spec.worker_env))
                for i, name in enumerate(spec.workers)
            ]

    def failpoint_reached(self, name: str) -> bool:
        return (self.failpoint_dir / name.replace(":", "__")).exists()

    def sweeps(self) -> int:
        """Sweeps finished so far, by every worker of the stack."""
        return sum(p.count(SWEEP_DONE) for p in self.procs if p.name.startswith("worker-"))

    def wait_sweeps(self, n: int = 2, timeout: float = 30) -> None:
        """Until ``n`` more sweeps have finished: what a sweeper would do by now, it did."""
        target = self.sweeps() + n
        wait_for(lambda: self.sweeps() >= target, timeout=timeout, interval=0.1, what=f"{n} more sweeps")

    def settle(self, timeout: float = 30) -> bool:
        """Until no worker has anything to do: no execution running or pending, none due
        within a few seconds. False if that doesn't happen within ``timeout``."""
        from executions.models import Execution, Status

        def quiet() -> bool:
            soon = timezone.now() + dt.timedelta(seconds=5)
            due = Q(status__in=[Status.RETRY_PENDING, Status.WAITING], due_at__lte=soon)
            return not Execution.objects.filter(Q(status__in=[Status.RUNNING, Status.PENDING]) | due).exists()

        try:
            wait_for(quiet, timeout=timeout, interval=0.1, what="the stack to settle")
        except AssertionError:
            return False
        return True


class SharedStacks:
    """The one shared stack of a test run (or none), and the run's sandbox."""

    def __init__(self, sandbox: Sandbox, tmp_factory: Any, *, pooler: PgBouncer | None = None) -> None:
        self.sandbox = sandbox
        self.tmp_factory = tmp_factory
        self.pooler = pooler
        self.current: tuple[Spec, Stack, Up] | None = None
        self.started = 0  # stacks started, for the run's summary

    def up(self, spec: Spec) -> tuple[Stack, Up]:
        """The shared stack running ``spec``: the current one if it runs that and every one
        of its processes is alive; the current one with new workers if only the workers
        differ; else a new one in its place."""
        if self.current is not None:
            current, stack, up = self.current
            alive = all(p.alive() for p in up.all())
            if current == spec and alive:
                return stack, up
            same_but_workers = replace(current, workers=spec.workers, worker_env=spec.worker_env) == spec
            # (beat runs inside the first worker: with none before or after, start anew)
            if alive and same_but_workers and bool(current.workers) == bool(spec.workers):
                for worker in up.workers:
                    worker.kill()
                up = Up(web=up.web, beat=up.beat, workers=stack.start_workers(spec))
                self.current = (spec, stack, up)
                return stack, up
            self.close()
        stack = Stack(self.tmp_factory.mktemp("shared"), self.sandbox, pooler=self.pooler)
        stack.shared = True
        try:
            up = stack.start_spec(spec)
        except BaseException:
            print(stack.logs())
            stack.close()
            raise
        self.current = (spec, stack, up)
        self.started += 1
        return stack, up

    def close(self) -> None:
        if self.current is not None:
            self.current[1].close()
            self.current = None


class SharedStack:
    """A test's handle on the shared stack: ``up(...)`` as on a ``Stack``; the processes
    come from ``SharedStacks`` and outlive the test. It starts nothing else (a test that
    needs more is marked ``own_stack``)."""

    shared = True

    def __init__(self, stacks: SharedStacks) -> None:
        self.stacks = stacks
        self.sandbox_url = stacks.sandbox.url
        self._stack: Stack | None = None

    def up(self, **spec: Any) -> Up:
        self._stack, up = self.stacks.up(Spec.of(**spec))
        return up

    @property
    def running(self) -> Stack:
        assert self._stack is not None, "call stack.up(...) first"
        return self._stack

    @property
    def web_url(self) -> str | None:
        return self.running.web_url

    @property
    def env(self) -> dict[str, str]:
        return self.running.env

    def sandbox_stats(self) -> dict:
        return http().get(f"{self.sandbox_url}/_stats", timeout=30).json()

    def failpoint_reached(self, name: str) -> bool:
        return self.running.failpoint_reached(name)

    def sweeps(self) -> int:
        return self.running.sweeps()

    def wait_sweeps(self, n: int = 2, timeout: float = 30) -> None:
        self.running.wait_sweeps(n, timeout)

    def logs(self) -> str:
        return self.running.logs() if self._stack is not None else ""

    def finish(self) -> None:
        """At the end of the test: let the stack settle before the database is flushed; one
        that doesn't within a few seconds is closed (a new one starts in less time than a
        long step takes), so nothing it still does reaches the next test."""
        if self._stack is not None and not self._stack.settle(timeout=SETTLE_SECONDS):
            self.stacks.close()

    def __getattr__(self, name: str) -> Any:
        if name in ("web", "worker", "beat", "together", "start"):
            raise AttributeError(f"the shared stack starts nothing but up(); mark the test own_stack to {name}()")
        raise AttributeError(name)


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


def start(api, workflow: str, **input) -> str:
    """A new execution of ``workflow`` with ``input``, started through the API; its id."""
    answer = api.post("/executions", {"workflow": workflow, "input": input})
    assert answer.status_code == 201, answer.text
    return answer.json()["id"]


def up(stack, **worker_env: str) -> None:
    """The shared stack with workers of ``worker_env``."""
    stack.up(worker_env=worker_env)


def approved(api_as, people, ref: str) -> None:
    """The manager approves the version ``ref`` awaits (its requester sees it first)."""
    approval = wait_status(api_as(people["requester"]), ref, "awaiting_approval")["pending_approval"]
    assert api_as(people["manager"]).decide(ref, approval).status_code == 202
