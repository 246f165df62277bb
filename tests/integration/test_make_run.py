"""Issue 17, item 12: ``make run PORT=… SANDBOX_PORT=…`` without editing the Procfile:
the printed URL and every process follow the ports (the worker publishes to that
sandbox); and each process can run alone (``make run-web``, ``make run-sandbox``…),
so stopping one leaves the others running. The embedded default, as a newcomer runs
it: SQLite and the filesystem broker in a directory of the test's own.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import uuid
from pathlib import Path

import pytest

from tests.support.procs import ROOT, approval_decision, free_port, http, keel_env, manage, responds, wait_for

pytestmark = pytest.mark.processes  # it starts keel's processes of its own


@pytest.fixture
def embedded_env(tmp_path) -> dict[str, str]:
    env = keel_env(KEEL_VAR_DIR=str(tmp_path / "var"), RUNTIME_LEASE_SECONDS="5")
    for name in (
        "DATABASE_URL",
        "CELERY_BROKER_URL",
        "KEEL_ARTIFACTS_ROOT",
        "SANDBOX_URL",
        "PORT",
        "KEEL_TEST_DB_NAME",
    ):
        env.pop(name, None)
    return env


class Make:
    """``make TARGET …`` in a process group of its own (honcho and its children with it)."""

    def __init__(self, args: list[str], env: dict[str, str], log: Path) -> None:
        self.log = log
        self._out = open(log, "ab")  # noqa: SIM115 - closed in stop()
        self.popen = subprocess.Popen(
            ["make", *args], cwd=ROOT, env=env, stdout=self._out, stderr=subprocess.STDOUT, start_new_session=True
        )

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def stop(self) -> None:
        if self.popen.poll() is None:
            os.killpg(self.popen.pid, signal.SIGTERM)
            try:
                self.popen.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(self.popen.pid, signal.SIGKILL)
                self.popen.wait(timeout=10)
        self._out.close()


def test_make_run_follows_the_ports_it_is_given(embedded_env, tmp_path):
    port, sandbox_port = free_port(), free_port()
    run = Make(["run", f"PORT={port}", f"SANDBOX_PORT={sandbox_port}"], embedded_env, tmp_path / "make-run.log")
    try:
        wait_for(lambda: responds(f"http://127.0.0.1:{port}/login/") or run.popen.poll() is not None, timeout=180)
        assert run.popen.poll() is None, run.output()[-3000:]
        assert f"Dashboard: http://127.0.0.1:{port}/" in run.output()
        assert responds(f"http://127.0.0.1:{sandbox_port}/_health"), run.output()[-3000:]
        assert not responds("http://127.0.0.1:8000/login/") or port == 8000

        # The worker is pointed at that sandbox: the demo report, approved, is published there.
        token = manage("create_api_token", "manager", env=embedded_env).strip().splitlines()[-1]
        api, base = http(token), f"http://127.0.0.1:{port}/api/executions/RUN_0001"
        waiting = wait_for(
            lambda: (body := api.get(base, timeout=5).json()).get("status") == "awaiting_approval" and body,
            timeout=120,
            what="the demo to wait for approval",
        )
        decided = api.post(f"{base}/events", json=approval_decision(waiting["pending_approval"], uuid.uuid4().hex))
        assert decided.status_code == 202, decided.text
        wait_for(lambda: api.get(base, timeout=5).json()["status"] == "completed", timeout=120, what="completion")
        stats = http().get(f"http://127.0.0.1:{sandbox_port}/_stats", timeout=5).json()
        assert stats["keys"]["RUN_0001:publish:v1"]["effects"] == 1
        assert (tmp_path / "var" / "sandbox.sqlite3").exists(), "the sandbox's file is under KEEL_VAR_DIR too"
    finally:
        run.stop()


def _logged_in(base: str, username: str, password: str):
    """A browser-like session logged in at ``base`` (the login form, its CSRF token)."""
    session = http()
    form = session.get(f"{base}/login/", timeout=10)
    csrf = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', form.text).group(1)
    session.post(
        f"{base}/login/",
        data={"username": username, "password": password, "csrfmiddlewaretoken": csrf},
        headers={"Referer": f"{base}/login/"},
        timeout=10,
    )
    return session


def test_each_process_runs_alone_and_a_second_make_run_worker_logs_nobody_out_and_mail_follows_the_port(
    embedded_env, tmp_path
):
    """Issue 17, item 12: ``make run-sandbox`` runs alone beside ``make run-web`` and
    stopping it leaves the web server. Issue 39, items 4, 5 and 2, the README's way:
    ``make run-web PORT=p``, then ``make run-worker PORT=p`` in two more terminals and
    ``make run-beat PORT=p``. The later
    ``make``s seed again and change no password (item 5: the operator's session lives on,
    no password is printed again); the two workers are two live rows with their own node
    names (item 2: both were ``celery@host``); the demo's approval e-mail links to the
    dashboard on p (item 4: it said 127.0.0.1:8000)."""
    port = free_port()
    env = {**embedded_env, "KEEL_NOTIFICATIONS": "on", "RUNTIME_WORKER_HEARTBEAT_SECONDS": "1"}
    for name in ("KEEL_BASE_URL", "EMAIL_HOST"):
        env.pop(name, None)  # the Makefile's base URL; mail to files under var/mail
    base = f"http://127.0.0.1:{port}"
    web = Make(["run-web", f"PORT={port}"], env, tmp_path / "make-web.log")
    others: list[Make] = []
    try:
        wait_for(lambda: responds(f"{base}/login/") or web.popen.poll() is not None, timeout=180)
        assert web.popen.poll() is None, web.output()[-3000:]
        passwords = dict(re.findall(r"^  (requester|manager|operator|auditor) +(\S+)", web.output(), re.M))
        assert len(passwords) == 4, web.output()[-3000:]
        operator = _logged_in(base, "operator", passwords["operator"])

        # Each process runs alone: the sandbox started and stopped beside the web server
        # leaves it running (make has exited; honcho passes the TERM on, not always first).
        sandbox_port = free_port()
        sandbox = Make(["run-sandbox", f"SANDBOX_PORT={sandbox_port}"], env, tmp_path / "make-sandbox.log")
        try:
            wait_for(lambda: responds(f"http://127.0.0.1:{sandbox_port}/_health"), timeout=180, what="the sandbox")
        finally:
            sandbox.stop()
        wait_for(lambda: not responds(f"http://127.0.0.1:{sandbox_port}/_health"), timeout=20, what="the sandbox gone")
        assert operator.get(f"{base}/api/workers", timeout=10).status_code == 200, "the web server is still up"

        def live() -> list[dict]:
            answer = operator.get(f"{base}/api/workers", timeout=10)
            assert answer.status_code == 200, f"the operator's session ended: {answer.status_code}"
            return [w for w in answer.json()["items"] if w["alive"]]

        for n, target in enumerate(["run-worker", "run-worker", "run-beat"], start=1):
            others.append(Make([target, f"PORT={port}"], env, tmp_path / f"make-{n}.log"))
            if target == "run-worker":
                wait_for(lambda n=n: len(live()) >= n or others[-1].popen.poll() is not None, timeout=180)
                assert others[-1].popen.poll() is None, others[-1].output()[-3000:]
        rows = live()
        assert len(rows) == 2 and len({w["node"] for w in rows}) == 2 and len({w["pid"] for w in rows}) == 2, rows
        for later in others:
            wait_for(lambda later=later: "Demo users exist" in later.output(), timeout=120, what="its seed")
            assert not any(p in later.output() for p in passwords.values()), later.output()[-2000:]

        mail = tmp_path / "var" / "mail"

        def the_email():
            texts = [p.read_text(errors="replace") for p in mail.glob("*.log")] if mail.exists() else []
            return next((t for t in texts if "To: manager@example.com" in t and "RUN_0001" in t), None)

        message = wait_for(the_email, timeout=120, what="the approval e-mail in var/mail/")
        assert f"{base}/approvals/" in message and "127.0.0.1:8000" not in message, message[-2000:]
        assert live(), "still logged in, still two workers"
    finally:
        for make in reversed(others):
            make.stop()
        web.stop()
