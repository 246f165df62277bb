#!/usr/bin/env python
"""Chaos run: many executions through the real stack while things break under them.

Starts its own stack (a PostgreSQL server of its own, its own Redis child process, the
sandbox, the web server, Celery beat and ``--workers`` Celery workers), starts
``--executions`` executions through the Task API (alternating ``monthly_report`` and
``replacement_order``), approves every pending approval as a manager, confirms the
shipment every replacement order (version 2) waits for (the signal
``shipment_confirmed``, as its requester), and meanwhile:

* SIGKILLs a random worker every 1-3 s and starts a replacement;
* SIGKILLs Redis once, about a third of the way in, and starts it again on the same
  port (nothing persisted: every queued message is gone);
* crashes PostgreSQL once, about two thirds of the way in (an immediate shutdown, as
  ``pg_ctl stop -m immediate``: every connection dropped, crash recovery at the next
  start) and starts it again 1-2 s later on the same port; the web server, beat, the
  workers and the sandbox stay up and must reconnect by themselves (S32);
* delivers ``executions.advance`` a second time for random live executions;
* with ``--pgbouncer`` (``make chaos CHAOS_ARGS="--pgbouncer"``): every process — web,
  beat, the workers and the CLI commands — connects through a PgBouncer of its own in
  transaction mode (``DATABASE_POOL_MODE=transaction``; migrations go direct), which
  the run SIGKILLs and starts again once, about half way (S47).

When everything has settled (or ``--timeout`` passed) the chaos stops, all workers stay
alive for a grace period, and the run prints, one per line::

    executions started: N
    executions lost: X
    duplicate effects: Y
    executions not terminal or waiting: Z

then the details, among them how many workers lived through the PostgreSQL restart and
how many of those wrote step runs after it on the same process. It exits 1 if X, Y or
Z is above zero (or an accepted start could not be made), 2 if the stack could not be
set up, else 0.

    .venv/bin/python scripts/chaos.py --executions 30 --seed 7

Nothing else on the machine is touched. PostgreSQL is a throwaway cluster
(``tests.support.procs.PrivatePostgres``: initdb from ``/usr/lib/postgresql/*/bin``,
trust authentication, fsync off, a free port, run as the ``postgres`` user when this
script runs as root) holding the database ``keel_chaos`` (``--database`` or
``CHAOS_DB``); it is removed at the end. With ``CHAOS_PG`` (e.g.
``postgres://postgres@127.0.0.1:5432``) the database is made on that server instead,
and the run does not restart PostgreSQL: it never restarts a server it does not own.
Redis runs on a free port, and every child process is stopped at the end (children also
get SIGKILL if this script itself dies). Logs stay in the temporary directory printed
at the start and the end.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import random
import re
import signal
import sys
import tempfile
import threading
import time
import traceback
from collections import Counter
from pathlib import Path
from typing import Any

import psycopg
import requests

# Run as `python scripts/chaos.py`: the repository's root holds the shared process harness.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.support.procs import (
    PgBouncer,
    PrivatePostgres,
    Proc,
    Processes,
    approval_decision,
    free_port,
    http,
    keel_env,
    manage,
    worker_ready,
)

TERMINAL = {"completed", "failed", "cancelled"}
# Statuses an execution may legitimately rest in at the end of a run.
RESTING = TERMINAL | {"awaiting_approval", "waiting"}
# Statuses that make progress on their own (or through the auto-approver) while the
# stack runs. A run has settled when no execution is in one of these.
ACTIVE = {"pending", "running", "retry_pending", "awaiting_approval", "waiting"}
GRACE_SECONDS = 60

MONTHS = [f"2026-{m:02d}" for m in range(1, 11)]
ORDERS = [f"ORD-100{n}" for n in range(1, 6)]


def log(msg: str) -> None:
    print(f"[chaos {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def pk(ref: str) -> int:
    """RUN_0042 → 42."""
    return int(ref.removeprefix("RUN_"))


# --- child processes


class Stack(Processes):
    """keel's processes (tests/support/procs.py) on a Redis of their own, which the run
    SIGKILLs and restarts, with ``workers`` workers replaced as a supervisor would."""

    def __init__(self, tmp: Path, database_url: str, workers: int, *, direct_url: str | None = None) -> None:
        # With --pgbouncer, database_url goes through the pooler and migrations go direct.
        self.direct_url = direct_url
        self.workers: list[Proc] = []
        self.n_workers = workers
        self.worker_serial = 0
        self.noticed: set[int] = set()  # pids of workers already reported as exited on their own
        self.redis_proc: Proc | None = None
        self.redis_port = free_port()
        self.broker_url = f"redis://127.0.0.1:{self.redis_port}/0"
        pooled = {"DATABASE_POOL_MODE": "transaction"} if direct_url else {}
        env = keel_env(
            DATABASE_URL=database_url,
            **pooled,
            CELERY_BROKER_URL=self.broker_url,
            KEEL_VAR_DIR=str(tmp / "var"),
            KEEL_ARTIFACTS_ROOT=str(tmp / "var" / "artifacts"),
        )
        # Whatever the caller runs under (pytest's settings, another database) must not
        # leak into the chaos stack.
        for name in ("RUNTIME_FAILPOINT_DIR", "KEEL_TEST_DB_NAME", "KEEL_ARTIFACTS_S3_BUCKET", "RUNTIME_SLICE_SECONDS"):
            env.pop(name, None)
        (tmp / "logs").mkdir(exist_ok=True)
        super().__init__(tmp, env, log_dir=tmp / "logs")

    def manage(self, *args: str, direct: bool = False) -> str:
        """``manage.py``: as every process (through the pooler with --pgbouncer), or
        ``direct`` to PostgreSQL (migrations, as docs/operations.md says)."""
        env = self.env
        if direct and self.direct_url:
            env = {**env, "DATABASE_URL": self.direct_url, "DATABASE_POOL_MODE": "session"}
        return manage(*args, env=env, log=self.log_dir / "manage.log")

    # redis

    def start_redis(self) -> None:
        self.redis_proc = self.redis(self.redis_port)

    def restart_redis(self, down_seconds: float) -> None:
        assert self.redis_proc is not None
        self.redis_proc.kill()
        time.sleep(down_seconds)
        self.start_redis()

    # workers

    def start_worker(self) -> Proc:
        self.worker_serial += 1
        proc = self.worker(f"chaos{self.worker_serial}", ready=False)
        self.workers.append(proc)
        return proc

    def live_workers(self) -> list[Proc]:
        return [w for w in self.workers if w.alive()]

    def exited_on_their_own(self) -> list[Proc]:
        """Workers that died without our SIGKILL, each reported once (a supervisor restarts them)."""
        found = [w for w in self.workers if not w.killed and w.pid not in self.noticed and not w.alive()]
        self.noticed.update(w.pid for w in found)
        return found

    def top_up_workers(self) -> None:
        for _ in range(self.n_workers - len(self.live_workers())):
            self.start_worker()


# --- database


def recreate_database(server: str, name: str) -> str:
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
        raise SystemExit(f"bad database name {name!r}")
    with psycopg.connect(f"{server}/postgres", autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')
    return f"{server}/{name}"


CREATE_USERS = """
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
User = get_user_model()
User.objects.create_user("requester", email="requester@example.com")
manager = User.objects.create_user("manager", email="manager@example.com")
manager.groups.add(Group.objects.get(name="managers"))
print("users created")
"""


# --- load and approvals (threads; they only talk HTTP)


class Shared:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.started: dict[str, dict[str, Any]] = {}  # ref -> {"workflow", "input", "index"}
        self.start_failures: list[str] = []
        self.loading_done = threading.Event()
        self.stop = threading.Event()
        self.replacement_unavailable: str | None = None
        self.post_retries = 0
        self.approvals: Counter[int] = Counter()  # HTTP status -> count
        self.approved_ids: set[int] = set()
        self.signals: Counter[int] = Counter()  # HTTP status -> count
        self.approver_errors: list[str] = []


def post_with_retry(
    session: requests.Session, url: str, body: dict, *, patience: float, shared: Shared, stop: threading.Event
):
    """POST, retrying connection errors and 5xx answers (the body is idempotent by design)."""
    deadline = time.monotonic() + patience
    while True:
        try:
            response = session.post(url, json=body, timeout=30)
            if response.status_code < 500:
                return response
            problem = f"HTTP {response.status_code}: {response.text[:300]}"
        except requests.RequestException as exc:
            problem = repr(exc)
        if time.monotonic() > deadline or stop.is_set():
            raise RuntimeError(problem)
        with shared.lock:
            shared.post_retries += 1
        time.sleep(0.5)


def load(shared: Shared, web_url: str, token: str, n: int, seed: int) -> None:
    session = http(token)
    url = f"{web_url}/api/executions"
    try:
        for i in range(n):
            if shared.stop.is_set():
                return
            workflow = "replacement_order" if i % 2 else "monthly_report"
            if workflow == "replacement_order" and shared.replacement_unavailable:
                workflow = "monthly_report"
            if workflow == "monthly_report":
                payload = {"month": MONTHS[(i // 2) % len(MONTHS)]}
            else:
                payload = {"original_order": ORDERS[(i // 2) % len(ORDERS)]}
            body = {"workflow": workflow, "input": payload, "idempotency_key": f"chaos-{seed}-{i}-{workflow}"}
            try:
                response = post_with_retry(session, url, body, patience=120, shared=shared, stop=shared.stop)
            except RuntimeError as exc:
                shared.start_failures.append(f"#{i} {workflow}: {exc}")
                continue
            if response.status_code == 422 and workflow == "replacement_order" and _names_field(response, "workflow"):
                shared.replacement_unavailable = _detail(response)
                body = {
                    "workflow": "monthly_report",
                    "input": {"month": MONTHS[(i // 2) % len(MONTHS)]},
                    "idempotency_key": f"chaos-{seed}-{i}-monthly_report",
                }
                try:
                    response = post_with_retry(session, url, body, patience=120, shared=shared, stop=shared.stop)
                except RuntimeError as exc:
                    shared.start_failures.append(f"#{i} monthly_report: {exc}")
                    continue
            if response.status_code in (200, 201):
                ref = response.json()["id"]
                with shared.lock:
                    shared.started[ref] = {"workflow": body["workflow"], "input": body["input"], "index": i}
            else:
                shared.start_failures.append(
                    f"#{i} {body['workflow']} {body['input']}: HTTP {response.status_code} {response.text[:300]}"
                )
    finally:
        shared.loading_done.set()


def _names_field(response: requests.Response, field: str) -> bool:
    try:
        detail = response.json().get("detail")
        return any(isinstance(d, dict) and d.get("loc", [])[-1:] == [field] for d in detail)
    except Exception:
        return False


def _detail(response: requests.Response) -> str:
    try:
        return "; ".join(d.get("msg", "") for d in response.json()["detail"])
    except Exception:
        return response.text[:300]


def list_all(session: requests.Session, web_url: str, status: str | None = None) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    cursor = None
    while True:
        params = {k: v for k, v in (("status", status), ("cursor", cursor)) if v}
        response = session.get(f"{web_url}/api/executions", params=params, timeout=30)
        response.raise_for_status()
        page = response.json()
        items.extend(page["items"])
        cursor = page.get("next")
        if not cursor:
            return items


def approve_loop(shared: Shared, web_url: str, token: str) -> None:
    session = http(token)
    while not shared.stop.is_set():
        try:
            for execution in list_all(session, web_url, "awaiting_approval"):
                approval = execution.get("pending_approval")
                if not approval:
                    continue
                # Stable per approval: a retry (or a second sighting) is the same event.
                body = approval_decision(approval, f"chaos-approve-{approval['id']}")
                response = post_with_retry(
                    session,
                    f"{web_url}/api/executions/{execution['id']}/events",
                    body,
                    patience=30,
                    shared=shared,
                    stop=shared.stop,
                )
                with shared.lock:
                    shared.approvals[response.status_code] += 1
                    if response.status_code == 202:
                        shared.approved_ids.add(approval["id"])
                    elif response.status_code != 409:
                        shared.approver_errors.append(
                            f"{execution['id']}: HTTP {response.status_code} {response.text[:300]}"
                        )
        except Exception as exc:  # the approver must keep going whatever happens
            with shared.lock:
                shared.approver_errors.append(repr(exc)[:300])
        shared.stop.wait(0.5)


def confirm_loop(shared: Shared, web_url: str, token: str) -> None:
    """The warehouse: every execution waiting for ``shipment_confirmed`` gets it, under a
    stable event_id per execution (a retry, or a second sighting, is the same event)."""
    session = http(token)
    while not shared.stop.is_set():
        try:
            for execution in list_all(session, web_url, "waiting"):
                gate = execution.get("pending_gate") or {}
                if "shipment_confirmed" not in gate.get("waiting_for", ""):
                    continue
                body = {
                    "type": "signal",
                    "name": "shipment_confirmed",
                    "payload": {"tracking": f"TRK-{execution['id']}"},
                    "event_id": f"chaos-ship-{execution['id']}",
                }
                response = post_with_retry(
                    session,
                    f"{web_url}/api/executions/{execution['id']}/events",
                    body,
                    patience=30,
                    shared=shared,
                    stop=shared.stop,
                )
                with shared.lock:
                    shared.signals[response.status_code] += 1
                    if response.status_code not in (202, 409):
                        shared.approver_errors.append(
                            f"{execution['id']}: signal HTTP {response.status_code} {response.text[:300]}"
                        )
        except Exception as exc:  # the warehouse must keep going whatever happens
            with shared.lock:
                shared.approver_errors.append(repr(exc)[:300])
        shared.stop.wait(0.5)


# --- duplicate deliveries


class Doorbell:
    """Sends ``executions.advance`` straight to the broker: a message the runtime didn't send."""

    def __init__(self, broker_url: str) -> None:
        self.broker_url = broker_url
        self.app = None
        self.connection = None
        self.sent = 0
        self.failed = 0

    def _make(self):
        from celery import Celery

        app = Celery("chaos-doorbell", set_as_current=False)
        app.conf.broker_connection_timeout = 2
        app.conf.broker_connection_retry = False
        app.conf.broker_connection_max_retries = 0
        return app

    def ring(self, ref: str) -> None:
        try:
            if self.app is None:
                self.app = self._make()
                # An explicit connection: Celery prefers $CELERY_BROKER_URL (the caller's,
                # e.g. pytest's) to any broker it is given.
                self.connection = self.app.connection_for_write(self.broker_url)
            self.app.send_task(
                "executions.advance", args=[pk(ref)], retry=False, connection=self.connection, ignore_result=True
            )
            self.sent += 1
        except Exception:
            # Redis may be down right now; start from a fresh connection next time.
            self.failed += 1
            self.close()

    def close(self) -> None:
        for thing in (self.connection, self.app):
            if thing is not None:
                with contextlib.suppress(Exception):
                    thing.close()
        self.app = self.connection = None


# --- the run


def histogram(statuses: dict[str, str]) -> Counter[str]:
    return Counter(statuses.values())


def snapshot(session: requests.Session, web_url: str, refs: set[str]) -> dict[str, str]:
    try:
        return {e["id"]: e["status"] for e in list_all(session, web_url) if e["id"] in refs}
    except Exception as exc:
        log(f"could not list executions: {exc!r}")
        return {}


def settled(refs: set[str], statuses: dict[str, str]) -> bool:
    return bool(refs) and all(statuses.get(ref) not in ACTIVE and ref in statuses for ref in refs)


def run(args: argparse.Namespace) -> int:
    rng = random.Random(args.seed)
    tmp = Path(tempfile.mkdtemp(prefix="keel-chaos-"))
    (tmp / "logs").mkdir()
    t0 = time.monotonic()
    log(f"seed {args.seed}; {args.executions} executions, {args.workers} workers; logs in {tmp / 'logs'}")
    # A server of our own, which the run crashes and restarts; never a shared one (CHAOS_PG).
    postgres: PrivatePostgres | None = None
    if os.environ.get("CHAOS_PG"):
        server = os.environ["CHAOS_PG"].rstrip("/")
        log(f"CHAOS_PG: database on {server}, which the run will not restart")
    else:
        postgres = PrivatePostgres(tmp / "logs")
        postgres.start()
        server = postgres.url
        log(f"postgres of our own at {server} (cluster in {postgres.dir})")
    database_url = recreate_database(server, args.database)
    pooler: PgBouncer | None = None
    if args.pgbouncer:
        # Every process (web, beat, workers, the CLI) through PgBouncer in transaction mode;
        # killed and restarted once, halfway; migrations direct.
        port = int(server.rsplit(":", 1)[1])
        pooler = PgBouncer(tmp / "logs", server_port=port, users=("postgres",))
        pooler.start()
        log(f"PgBouncer (transaction mode) on port {pooler.port} in front of {server}")
        stack = Stack(tmp, pooler.url("postgres", args.database), args.workers, direct_url=database_url)
    else:
        stack = Stack(tmp, database_url, args.workers)
    shared = Shared()
    threads: list[threading.Thread] = []
    doorbell = Doorbell(stack.broker_url)
    counters: Counter[str] = Counter()
    try:
        stack.manage("migrate", "--noinput", direct=True)
        stack.manage("shell", "-c", CREATE_USERS)
        tokens = {
            u: stack.manage("create_api_token", u).strip().splitlines()[-1].strip() for u in ("requester", "manager")
        }
        stack.start_redis()
        stack.sandbox()
        stack.web()
        stack.beat()
        for _ in range(args.workers):
            stack.start_worker()
        for worker in stack.workers:
            worker_ready(worker)
        log(
            f"stack up in {time.monotonic() - t0:.1f}s: web {stack.web_url}, sandbox {stack.sandbox_url}, redis {stack.broker_url}"
        )

        threads = [
            threading.Thread(
                target=load, args=(shared, stack.web_url, tokens["requester"], args.executions, args.seed), daemon=True
            ),
            threading.Thread(target=approve_loop, args=(shared, stack.web_url, tokens["manager"]), daemon=True),
            threading.Thread(target=confirm_loop, args=(shared, stack.web_url, tokens["requester"]), daemon=True),
        ]
        for thread in threads:
            thread.start()

        # --- chaos
        session = http(tokens["requester"])
        chaos_start = time.monotonic()
        deadline = chaos_start + args.timeout
        next_kill = chaos_start + rng.uniform(1, 3)
        next_ring = chaos_start + rng.uniform(0.5, 2)
        next_look = chaos_start
        next_report = chaos_start + 10
        redis_restarted = False
        pooler_restarted = False
        pg_restart: PgRestart | None = None
        self_exits: list[str] = []
        statuses: dict[str, str] = {}
        timed_out = False
        while True:
            now = time.monotonic()
            with shared.lock:
                refs = set(shared.started)
            # Once, about two thirds of the way in (after the Redis restart): the database
            # crashes (immediate shutdown, every connection dropped) and comes back. Nothing
            # else is restarted for it. Progress is read from the database itself, every
            # turn: a short run can finish between two snapshots of the API.
            if postgres is not None and redis_restarted and pg_restart is None:
                done_now = count_terminal(database_url)
                if done_now is not None and (
                    done_now >= args.executions * 2 / 3 or now - chaos_start > args.timeout * 2 / 3
                ):
                    pg_restart = restart_postgres(postgres, stack, database_url, done_now, args.executions, rng)
                    counters["postgres restarts"] += 1
            # --pgbouncer, once, about half way: the pooler is SIGKILLed (every client and
            # server connection dropped) and started again on its port (S47).
            if pooler is not None and not pooler_restarted:
                done_now = sum(1 for ref in refs if statuses.get(ref) in TERMINAL)
                if done_now >= args.executions / 2 or now - chaos_start > args.timeout / 2:
                    log(f"SIGKILL pgbouncer ({done_now}/{args.executions} terminal)")
                    pooler.restart(down_seconds=rng.uniform(0.5, 1.5))
                    pooler_restarted = True
                    counters["pgbouncer restarts"] += 1
            if now >= next_look:
                statuses = snapshot(session, stack.web_url, refs) or statuses
                next_look = now + 1
                if shared.loading_done.is_set() and settled(refs, statuses):
                    break
                if not refs and shared.loading_done.is_set():
                    break
            if now > deadline:
                timed_out = True
                log(f"--timeout {args.timeout}s passed with executions still active")
                break
            for worker in stack.exited_on_their_own():
                self_exits.append(f"{worker.name} (exit {worker.popen.returncode}; {_last_problem(worker)})")
                log(f"exited on its own: {self_exits[-1]}")
                stack.top_up_workers()
            if now >= next_kill:
                live = stack.live_workers()
                if live:
                    victim = rng.choice(live)
                    victim.kill()
                    counters["worker kills"] += 1
                stack.top_up_workers()
                next_kill = now + rng.uniform(1, 3)
            # Once, about a third of the way in: the broker dies and forgets everything.
            done = sum(1 for ref in refs if statuses.get(ref) in TERMINAL)
            if not redis_restarted and (done >= args.executions / 3 or now - chaos_start > args.timeout / 3):
                log(f"SIGKILL redis ({done}/{args.executions} terminal)")
                stack.restart_redis(down_seconds=rng.uniform(1, 2))
                redis_restarted = True
                counters["redis restarts"] += 1
            if now >= next_ring:
                live_refs = sorted(ref for ref in refs if statuses.get(ref) not in TERMINAL)
                for ref in rng.sample(live_refs, min(len(live_refs), rng.randint(1, 3))):
                    doorbell.ring(ref)
                next_ring = now + rng.uniform(0.5, 2)
            if now >= next_report:
                log(
                    f"{now - chaos_start:.0f}s: {len(refs)} started, {dict(histogram(statuses))}, {counters['worker kills']} kills"
                )
                next_report = now + 10
            time.sleep(0.1)
        chaos_seconds = time.monotonic() - chaos_start

        # --- grace: no more chaos, every worker alive, the approver still approving
        stack.top_up_workers()
        grace_start = time.monotonic()
        shared.loading_done.wait(timeout=GRACE_SECONDS)
        with shared.lock:
            refs = set(shared.started)
        while time.monotonic() - grace_start < GRACE_SECONDS:
            statuses = snapshot(session, stack.web_url, refs) or statuses
            if settled(refs, statuses) or not refs:
                break
            for worker in stack.exited_on_their_own():
                self_exits.append(f"{worker.name} (exit {worker.popen.returncode}; {_last_problem(worker)})")
            stack.top_up_workers()
            time.sleep(1)
        grace_seconds = time.monotonic() - grace_start
        shared.stop.set()
        for thread in threads:
            thread.join(timeout=35)

        return report(
            args,
            stack,
            shared,
            doorbell,
            tokens,
            counters,
            t0,
            chaos_seconds,
            grace_seconds,
            timed_out,
            redis_restarted,
            postgres is not None,
            pg_restart,
            self_exits,
        )
    finally:
        shared.stop.set()
        doorbell.close()
        stack.close()
        if pooler is not None:
            pooler.close()
        if postgres is not None:
            postgres.close()
            log(f"stopped every child process and removed our postgres; logs in {tmp / 'logs'}")
        else:
            log(f"stopped every child process; logs in {tmp / 'logs'}; database {args.database}")


class PgRestart:
    """What the PostgreSQL restart left to check: which workers lived through it, and the
    last step run committed before they could have written again."""

    def __init__(self, survivors: dict[int, str], mark: int) -> None:
        self.survivors = survivors  # pid -> worker name, alive across the restart
        self.mark = mark  # a step run with a higher id was written after the restart


def count_terminal(database_url: str) -> int | None:
    """Executions completed, failed or cancelled, read from the database (None if it can't be)."""
    try:
        with psycopg.connect(database_url, connect_timeout=2) as conn:
            query = "SELECT count(*) FROM executions_execution WHERE status = ANY(%s)"
            return conn.execute(query, [sorted(TERMINAL)]).fetchone()[0]
    except psycopg.Error:
        return None


def restart_postgres(
    postgres: PrivatePostgres, stack: Stack, database_url: str, done: int, total: int, rng: random.Random
) -> PgRestart:
    survivors = {w.pid: w.name for w in stack.live_workers()}
    down = rng.uniform(1, 2)
    log(f"immediate shutdown of postgres ({done}/{total} terminal), down {down:.1f}s; web, beat, workers stay up")
    postgres.restart(kill=True, down_seconds=down)
    with psycopg.connect(database_url) as conn:
        mark = conn.execute("SELECT coalesce(max(id), 0) FROM executions_steprun").fetchone()[0]
    survivors = {pid: name for pid, name in survivors.items() if any(w.pid == pid and w.alive() for w in stack.workers)}
    log(f"postgres back; {len(survivors)} workers up across the restart")
    return PgRestart(survivors, mark)


def reconnected_workers(database_url: str, pg_restart: PgRestart) -> set[int]:
    """The pids of workers alive across the restart that wrote a step run after it."""
    with psycopg.connect(database_url) as conn:
        owners = conn.execute(
            "SELECT DISTINCT worker FROM executions_steprun WHERE id > %s", [pg_restart.mark]
        ).fetchall()
    # executions.engine.leases.worker_identity: worker:<host>:<pid>:<nonce>
    pids = {int(parts[2]) for (owner,) in owners if len(parts := owner.split(":")) == 4 and parts[2].isdigit()}
    return pids & set(pg_restart.survivors)


def report(
    args,
    stack: Stack,
    shared: Shared,
    doorbell: Doorbell,
    tokens,
    counters,
    t0,
    chaos_seconds,
    grace_seconds,
    timed_out,
    redis_restarted,
    own_postgres,
    pg_restart,
    self_exits,
) -> int:
    session = http(tokens["requester"])
    with shared.lock:
        started = dict(shared.started)

    # "Lost": an execution the API accepted (201 or 200 with its id) that, at the end,
    #   (a) GET /api/executions/{id} no longer returns (404), or returns as another
    #       workflow than the one started; or
    #   (b) is still `pending` or `running` after the chaos stopped and every worker
    #       stayed alive through the grace period with the sweeper running, i.e. nobody
    #       is able to finish it: the runtime dropped it.
    # "Not terminal or waiting": any status other than completed, failed, cancelled,
    #   awaiting_approval or waiting (so needs_attention, retry_pending, and also the
    #   pending/running ones counted as lost).
    lost: list[str] = []
    odd: list[dict[str, Any]] = []
    final: dict[str, dict[str, Any]] = {}
    for ref, meta in sorted(started.items()):
        body = None
        for _ in range(10):
            try:
                response = session.get(f"{stack.web_url}/api/executions/{ref}", timeout=30)
                if response.status_code in (200, 404):
                    break
            except requests.RequestException:
                pass
            time.sleep(1)
        else:
            response = None
        if response is None or response.status_code != 200:
            lost.append(f"{ref}: GET answered {getattr(response, 'status_code', 'nothing')}")
            continue
        body = response.json()
        final[ref] = body
        if body["workflow"] != meta["workflow"]:
            lost.append(
                f"{ref}: came back as {body['workflow']} {body['input']}, started as {meta['workflow']} {meta['input']}"
            )
        elif body["status"] in ("pending", "running"):
            lost.append(f"{ref}: still {body['status']} at {body['current_step']} after the grace period")
        if body["status"] not in RESTING:
            odd.append(body)

    stats = stack.sandbox_stats()
    keys = stats.get("keys", {})
    duplicates = {k: v["effects"] for k, v in keys.items() if v.get("effects", 0) > 1}
    duplicate_effects = sum(max(0, v.get("effects", 0) - 1) for v in keys.values())
    # A ledger row that says "succeeded" must have left an effect at the provider.
    missing = [
        f"{ref} {a['key']}"
        for ref, body in final.items()
        for a in body.get("actions", [])
        if a["status"] == "succeeded" and keys.get(a["key"], {}).get("effects", 0) < 1
    ]
    statuses = Counter(body["status"] for body in final.values())
    workflows = Counter(meta["workflow"] for meta in started.values())
    action_statuses = Counter(a["status"] for body in final.values() for a in body.get("actions", []))

    print()
    print(f"executions started: {len(started)}")
    print(f"executions lost: {len(lost)}")
    print(f"duplicate effects: {duplicate_effects}")
    print(f"executions not terminal or waiting: {len(odd)}")
    print("status histogram: " + (", ".join(f"{s}={n}" for s, n in sorted(statuses.items())) or "(none)"))
    print("workflows: " + ", ".join(f"{w}={n}" for w, n in sorted(workflows.items())))
    if shared.replacement_unavailable:
        print(
            f"note: replacement_order is not deployed (API said: {shared.replacement_unavailable}); ran monthly_report instead"
        )
    print("ledger actions: " + (", ".join(f"{s}={n}" for s, n in sorted(action_statuses.items())) or "(none)"))
    print(f"succeeded actions without a provider effect: {len(missing)}")
    print(
        f"chaos: {counters['worker kills']} worker kills, {stack.worker_serial} workers started, "
        f"{counters['redis restarts']} redis restart(s), {counters['postgres restarts']} postgres restart(s), "
        f"{doorbell.sent} duplicate advance messages "
        f"({doorbell.failed} could not be sent)"
    )
    print(f"workers that exited on their own (replaced, as a supervisor would): {len(self_exits)}")
    if pg_restart is not None:
        went_on = reconnected_workers(stack.env["DATABASE_URL"], pg_restart)
        rest = [w for w in stack.workers if w.pid in pg_restart.survivors and w.pid not in went_on]
        killed = sum(1 for w in rest if w.killed)
        print(
            f"workers up across the postgres restart: {len(pg_restart.survivors)}; wrote step runs after it "
            f"on the same process: {len(went_on)}; SIGKILLed before writing one: {killed}; "
            f"alive and wrote none: {len(rest) - killed}"
        )
    answers = ", ".join(f"HTTP {s}={n}" for s, n in sorted(shared.approvals.items())) or "none sent"
    print(f"approvals: {answers}; {len(shared.approved_ids)} approved")
    signals = ", ".join(f"HTTP {s}={n}" for s, n in sorted(shared.signals.items())) or "none sent"
    print(f"shipment signals: {signals}")
    print(f"start POST retries: {shared.post_retries}; start failures: {len(shared.start_failures)}")
    print(
        f"time: {time.monotonic() - t0:.0f}s total, {chaos_seconds:.0f}s under chaos, {grace_seconds:.0f}s grace"
        + (" (timed out)" if timed_out else "")
    )
    print(f"logs: {stack.log_dir}")
    print(f"database: {stack.env['DATABASE_URL']}")

    for line in lost:
        print(f"  lost: {line}")
    for body in odd:
        actions = ", ".join(f"{a['key']}={a['status']}/{a['attempts']}" for a in body.get("actions", []))
        print(
            f"  not terminal or waiting: {body['id']} {body['workflow']} {body['status']} at {body['current_step']} "
            f"({body.get('status_reason', '')}) actions: [{actions}]"
        )
    for key, n in sorted(duplicates.items()):
        print(f"  duplicate effect: {key} committed {n} times")
    for line in missing:
        print(f"  succeeded without an effect: {line}")
    for line in shared.start_failures[:20]:
        print(f"  start failure: {line}")
    for line in shared.approver_errors[:10]:
        print(f"  approver: {line}")
    for line in self_exits:
        print(f"  exited on its own: {line}")
    if not redis_restarted:
        print("  note: redis was never restarted (the run ended first)")
    if not own_postgres:
        print("  note: postgres was not restarted (CHAOS_PG names a server this run does not own)")
    elif pg_restart is None:
        print("  note: postgres was never restarted (the run ended first)")
    worker_problems = scan_logs(stack.log_dir)
    if worker_problems:
        print("log lines at ERROR/CRITICAL or with a traceback (distinct messages, most frequent first):")
        for message, n in worker_problems.most_common(15):
            print(f"  {n:5d}x {message}")

    failed = bool(lost or duplicate_effects or odd or shared.start_failures)
    return 1 if failed else 0


def _last_problem(proc: Proc) -> str:
    lines = [ln for ln in proc.output().splitlines() if "CRITICAL" in ln or "ERROR" in ln or "Error:" in ln]
    return lines[-1].strip()[:240] if lines else "no error logged"


_NOISE = re.compile(r"\d{4}-\d\d-\d\d[ T][\d:,.]+|RUN_\d+|\b\d+\b|[0-9a-f]{8,}")


def scan_logs(logs: Path) -> Counter[str]:
    found: Counter[str] = Counter()
    for path in sorted(logs.glob("*.log")):
        if path.name.startswith(("redis", "postgres")) or path.name == "manage.log":
            continue
        kind = re.sub(r"[\d-]+$", "", path.stem)  # worker-chaos3-7 -> worker-chaos
        for line in path.read_text(errors="replace").splitlines():
            if (
                " ERROR " in line
                or " CRITICAL " in line
                or line.startswith("Traceback")
                or re.match(r"^\w+(\.\w+)*(Error|Exception): ", line)
            ):
                found[f"{kind}: {_NOISE.sub('#', line.strip())[:200]}"] += 1
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--executions", type=int, default=200)
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--seed", type=int, default=None, help="random seed (default: random, printed)")
    parser.add_argument(
        "--pgbouncer",
        action="store_true",
        help="every process through a PgBouncer in transaction mode, which the run also restarts once",
    )
    parser.add_argument("--timeout", type=float, default=900, help="seconds of chaos before giving up waiting")
    parser.add_argument(
        "--database", default=os.environ.get("CHAOS_DB", "keel_chaos"), help="database to drop and create"
    )
    args = parser.parse_args()
    if args.seed is None:
        args.seed = random.SystemRandom().randrange(1_000_000)

    def on_term(signum, frame):  # cleanup in run()'s finally, as with Ctrl-C
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, signal.default_int_handler)  # even when started with SIGINT ignored (`cmd &`)
    try:
        return run(args)
    except KeyboardInterrupt:
        log("interrupted")
        return 130
    except Exception:
        traceback.print_exc()
        log("the chaos run could not complete (see above)")
        return 2


if __name__ == "__main__":
    sys.exit(main())
