"""S32 (issue 10, "faster must not mean frailer"): PostgreSQL restarts in the middle of a
run; the workers reconnect and go on.

Workers keep their database connection across tasks (``CELERY_DB_REUSE_MAX``) and the
web server across requests (``CONN_MAX_AGE``); both check it before use, so a
connection a database restart killed is replaced, not used. Here the database really
restarts: a PostgreSQL server of the test's own (``PrivatePostgres``; the machine's is
shared with other runs and never touched) is shut down immediately, as in a crash,
while workers are inside steps, and started again before those steps end. Nothing else
is restarted: the same web server, beat, sandbox and worker processes must finish
every execution.
"""

from __future__ import annotations

import re
import threading
import time
from collections import Counter
from datetime import datetime
from pathlib import Path

import psycopg
import pytest
import requests
from celery import Celery

from tests.support.procs import (
    PrivatePostgres,
    Proc,
    Processes,
    approval_decision,
    free_port,
    http,
    keel_env,
    manage,
    wait_for,
)
from tests.support.stack import own_actions

APP_ROLE = "keel_app"
N = 12
# draft_report sleeps this long, and the crash comes as a worker starts it: the server
# is back (down DOWN_SECONDS) before that step ends and is checkpointed.
STEP_SECONDS = 2.5
DOWN_SECONDS = 0.5
IDLE_QUEUE = "s32-idle"
SETTLED = {"completed", "failed", "cancelled", "needs_attention"}

CREATE_USERS = """
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from accounts.tokens import api_token_create
User = get_user_model()
requester = User.objects.create_user("requester", email="requester@example.com")
manager = User.objects.create_user("manager", email="manager@example.com")
manager.groups.add(Group.objects.get(name="managers"))
print(api_token_create(user=requester))
print(api_token_create(user=manager))
"""


@pytest.fixture
def private_postgres(tmp_path):
    postgres = PrivatePostgres(tmp_path)
    postgres.start()
    yield postgres
    postgres.close()


def test_s32_postgres_restart_mid_run_workers_reconnect_and_go_on(private_postgres, sandbox, tmp_path: Path):
    """S32: PostgreSQL crashes and comes back while steps run: 0 lost, 0 duplicate
    effects, 0 stuck; no request and no task fails once it is back; the workers that
    lived through it (same pids, none replaced) finished the work."""
    postgres = private_postgres
    owner_url = f"{postgres.url}/keel"
    with psycopg.connect(f"{postgres.url}/postgres", autocommit=True) as conn:
        conn.execute("CREATE DATABASE keel")
    redis_port = free_port()
    env = keel_env(
        DATABASE_URL=owner_url,
        CELERY_BROKER_URL=f"redis://127.0.0.1:{redis_port}/0",
        KEEL_VAR_DIR=str(tmp_path / "var"),
        KEEL_ARTIFACTS_ROOT=str(tmp_path / "var" / "artifacts"),
    )
    for name in ("KEEL_TEST_DB_NAME", "KEEL_ARTIFACTS_S3_BUCKET", "RUNTIME_SLICE_SECONDS"):
        env.pop(name, None)
    manage("migrate", "--noinput", env=env, log=tmp_path / "manage.log")
    manage("grant_app_role", APP_ROLE, env=env, log=tmp_path / "manage.log")
    requester_token, manager_token = manage("shell", "-c", CREATE_USERS, env=env).split()[-2:]

    # The application's processes connect as its role, with production rights (tests/support/stack.py).
    stack = Processes(
        tmp_path,
        {
            **env,
            "DATABASE_URL": f"postgres://{APP_ROLE}@127.0.0.1:{postgres.port}/keel",
            "RUNTIME_FAILPOINTS": f"before_step:draft_report=sleep:{STEP_SECONDS}",
            "RUNTIME_FAILPOINT_DIR": str(tmp_path / "failpoints"),
        },
        sandbox_url=sandbox.url,
    )
    try:
        with stack.together():
            redis, web, beat = stack.redis(redis_port), stack.web(), stack.beat()
            workers = [stack.worker("s32a"), stack.worker("s32b")]
            # A third worker on a queue of its own: it runs a sweep before the crash and the
            # next one after, and nothing in between, so its connection dies idle.
            idle = stack.worker("s32idle", queues=IDLE_QUEUE)
        ring_idle(env["CELERY_BROKER_URL"], idle)
        requester = http(requester_token)
        api = f"{stack.web_url}/api"

        refs = []
        for i in range(N):
            body = {"workflow": "monthly_report", "input": {"month": f"2026-{i % 10 + 1:02d}"}}
            response = requester.post(f"{api}/executions", json={**body, "idempotency_key": f"s32-{i}"}, timeout=15)
            assert response.status_code == 201, response.text
            refs.append(response.json()["id"])

        def statuses() -> Counter[str]:
            response = requester.get(f"{api}/executions", timeout=15)
            assert response.status_code == 200, response.text
            return Counter(e["status"] for e in response.json()["items"] if e["id"] in refs)

        approver = Approver(http(manager_token), api)
        approver.start()

        # The middle of the run: a third of the drafts done, and a worker starting one now.
        marker = tmp_path / "failpoints" / "before_step__draft_report"
        hits: list[float] = []

        def a_draft_just_started() -> bool:
            mtime = marker.stat().st_mtime if marker.exists() else None
            if mtime is not None and (not hits or mtime != hits[-1]):
                hits.append(mtime)
                return len(hits) > N // 3
            return False

        wait_for(a_draft_just_started, timeout=60, interval=0.05, what="a third of the drafts done, one starting")
        before = statuses()
        # Nobody calls the web server while the database is away: its connections sit idle
        # and dead, as the workers' do, and the first requests after must replace them.
        with approver.paused():
            crashed_at = time.monotonic()
            postgres.restart(kill=True, down_seconds=DOWN_SECONDS)
            back_at, back_wall = time.monotonic(), time.time()
        with psycopg.connect(owner_url) as conn:  # a step run above this id was written after the restart
            mark = conn.execute("SELECT coalesce(max(id), 0) FROM executions_steprun").fetchone()[0]
        ring_idle(env["CELERY_BROKER_URL"], idle)

        wait_for(lambda: set(statuses()) <= SETTLED, timeout=90, interval=0.5, what=f"all {N} executions to settle")
        approver.stop()

        assert before["running"] >= 1 and back_at - crashed_at < STEP_SECONDS, before  # mid-run, mid-step
        final = {ref: requester.get(f"{api}/executions/{ref}", timeout=15).json() for ref in refs}
        not_done = {
            ref: (b["status"], b.get("status_reason")) for ref, b in final.items() if b["status"] != "completed"
        }
        assert not_done == {}  # 0 lost, 0 stuck

        # 0 duplicate effects: every ledger action happened once at the provider, and nothing else did.
        # The workflow's own effects; the e-mails sent beside them (on, as production) are their own.
        actions = [a for body in final.values() for a in own_actions(body)]
        keys = stack.sandbox_stats()["keys"]
        assert len(actions) == 2 * N and all(a["status"] == "succeeded" for a in actions), actions
        assert {a["key"]: keys.get(a["key"], {}).get("effects") for a in actions} == {a["key"]: 1 for a in actions}
        assert sum(v.get("effects", 0) for v in keys.values()) == 2 * N

        # Reconnected before use: once the server was back, no request and no task failed.
        assert [f for f in approver.failures if f[0] >= back_wall] == []
        for proc in [web, *workers, idle]:
            assert errors_since(proc, back_wall) == [], proc.name

        # The same processes went on: none died, none was replaced, and each worker
        # wrote step runs after the restart.
        assert [p.name for p in [redis, sandbox.proc, web, beat, *workers, idle] if not p.alive()] == []
        with psycopg.connect(owner_url) as conn:
            owners = conn.execute("SELECT DISTINCT worker FROM executions_steprun WHERE id > %s", [mark]).fetchall()
        # executions.engine.leases.worker_identity: worker:<host>:<pid>:<nonce>
        assert {int(owner.split(":")[2]) for (owner,) in owners} == {w.pid for w in workers}, owners
        print(f"S32: crashed with {dict(before)}; all completed {time.monotonic() - crashed_at:.1f}s after")
    except BaseException:
        print(stack.logs())
        raise
    finally:
        stack.close()


def ring_idle(broker_url: str, idle: Proc) -> None:
    """One sweep on the idle worker's queue; until it logged one more finished task."""
    done = len(_TASK_DONE.findall(idle.output()))
    app = Celery("s32", set_as_current=False)
    # An explicit connection: Celery prefers $CELERY_BROKER_URL (pytest's) to its ``broker``.
    with app.connection_for_write(broker_url) as connection:
        app.send_task("executions.sweep", queue=IDLE_QUEUE, connection=connection, ignore_result=True)
    idle.wait_until(lambda: len(_TASK_DONE.findall(idle.output())) > done, what="the idle worker's sweep", timeout=30)


_TASK_DONE = re.compile(r"Task executions\.sweep\[\S+\] (succeeded|raised)")
_LOG_ERROR = re.compile(
    r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) ERROR (celery\.app\.trace Task .* raised|django\.request) .*"
)


def errors_since(proc: Proc, since: float) -> list[str]:
    """A failed Celery task or an answered 500 in ``proc``'s log at or after ``since`` (epoch)."""
    found = []
    for line in proc.output().splitlines():
        match = _LOG_ERROR.match(line)
        if match and datetime.strptime(match.group(1), "%Y-%m-%d %H:%M:%S,%f").timestamp() >= since:
            found.append(line[:300])
    return found


class Approver:
    """The manager, approving whatever waits until stopped; every failed call is kept
    with its time (and tried again), and ``paused`` holds it between two calls."""

    def __init__(self, session: requests.Session, api: str) -> None:
        self.session, self.api = session, api
        self.failures: list[tuple[float, str]] = []
        self._turn = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=30)

    def paused(self) -> threading.Lock:
        return self._turn

    def _run(self) -> None:
        while not self._stop.wait(0.3):
            with self._turn:
                try:
                    self._approve_all()
                except requests.RequestException as exc:
                    self.failures.append((time.time(), repr(exc)))

    def _approve_all(self) -> None:
        response = self.session.get(f"{self.api}/executions", params={"status": "awaiting_approval"}, timeout=15)
        if response.status_code != 200:
            self.failures.append((time.time(), f"list: HTTP {response.status_code}"))
            return
        for execution in response.json()["items"]:
            approval = execution["pending_approval"]
            body = approval_decision(approval, f"s32-approve-{approval['id']}")
            answer = self.session.post(f"{self.api}/executions/{execution['id']}/events", json=body, timeout=15)
            if answer.status_code not in (202, 409):
                self.failures.append((time.time(), f"{execution['id']}: HTTP {answer.status_code}"))
