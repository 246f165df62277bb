"""The embedded default: SQLite + Celery's filesystem transport + a real worker, no servers.

This is what `make run` uses; the demo execution must go end to end on it.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from tests.support.procs import Processes, approval_decision, http, keel_env, manage, wait_for
from tests.support.stack import own_actions


def embedded_env(var: Path) -> dict[str, str]:
    """keel's environment on SQLite and Celery's filesystem transport: no DATABASE_URL, no broker URL."""
    env = keel_env(KEEL_VAR_DIR=str(var), RUNTIME_LEASE_SECONDS="5")
    for name in ("DATABASE_URL", "CELERY_BROKER_URL", "KEEL_ARTIFACTS_ROOT"):
        env.pop(name, None)
    return env


@pytest.fixture(scope="module")
def migrated(tmp_path_factory) -> Path:
    """A var dir as `make run` leaves it before seeding (migrated, static files collected), made once."""
    var = tmp_path_factory.mktemp("embedded") / "var"
    env = embedded_env(var)
    manage("migrate", "--noinput", env=env)
    manage("collectstatic", "--noinput", "-v", "0", env=env)
    return var


@pytest.fixture
def embedded(tmp_path, migrated, sandbox):
    """keel's processes on a copy of ``migrated``, with the test run's sandbox."""
    shutil.copytree(migrated, tmp_path / "var")
    procs = Processes(tmp_path, embedded_env(tmp_path / "var"), sandbox_url=sandbox.url)
    yield procs
    procs.close()


def test_demo_execution_completes_on_sqlite_and_the_filesystem_broker(embedded, tmp_path):
    env = embedded.env
    seeded = manage("seed_demo", env=env)
    assert "Started demo execution RUN_0001" in seeded
    assert (tmp_path / "var" / "keel.sqlite3").exists()
    token = manage("create_api_token", "manager", env=env).strip().splitlines()[-1]

    try:
        with embedded.together():
            embedded.worker("embedded", KEEL_NOTIFICATIONS="on")  # as make run: approvals are told by e-mail
            embedded.beat()
            embedded.web(workers=2)  # as the Procfile
        api = http(token)
        base = f"{embedded.web_url}/api/executions/RUN_0001"

        def status(expected):
            try:
                body = api.get(base, timeout=5).json()
            except Exception:
                return None
            return body if body.get("status") == expected else None

        waiting = wait_for(lambda: status("awaiting_approval"), timeout=60, what="the demo to wait for approval")
        approval = waiting["pending_approval"]
        # Issue 22: the manager finds the demo's approval e-mail under var/mail/, with a link that works.
        mail = tmp_path / "var" / "mail"

        def the_email():
            texts = [p.read_text(errors="replace") for p in mail.glob("*.log")] if mail.exists() else []
            return next((t for t in texts if "To: manager@example.com" in t and "RUN_0001" in t), None)

        message = wait_for(the_email, timeout=60, what="the approval e-mail in var/mail/")
        link = f"http://127.0.0.1:8000/approvals/{approval['id']}/"
        assert link in message and "V1" in message
        password = re.search(r"^  manager +(\S+)", seeded, re.M).group(1)
        browser = http()
        page = browser.get(f"{embedded.web_url}/login/", timeout=5)
        csrf = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text).group(1)
        browser.post(
            f"{embedded.web_url}/login/",
            data={"username": "manager", "password": password, "csrfmiddlewaretoken": csrf},
            headers={"Referer": f"{embedded.web_url}/login/"},
            timeout=10,
        )
        opened = browser.get(link.replace("http://127.0.0.1:8000", embedded.web_url), timeout=10)
        assert opened.status_code == 200 and approval["content_sha256"] in opened.text
        decided = api.post(
            f"{base}/events",
            json={
                "type": "approval.decision",
                "approval_id": approval["id"],
                "decision": "approve",
                "artifact_version": approval["artifact_version"],
                "content_sha256": approval["content_sha256"],
                "event_id": "embedded-1",
            },
            timeout=10,
        )
        assert decided.status_code == 202, decided.text
        done = wait_for(lambda: status("completed"), timeout=60, what="the demo to complete")
        assert {a["status"] for a in own_actions(done)} == {"succeeded"}
        stats = embedded.sandbox_stats()
        assert stats["keys"]["RUN_0001:publish:v1"]["effects"] == 1

        # gunicorn + WhiteNoise: pages are never stored; styles come hashed, compressed, cached for good.
        login = http().get(f"{embedded.web_url}/login/", timeout=5)
        assert "no-store" in login.headers["Cache-Control"]
        css = re.search(r'href="(/static/css/app\.[0-9a-f]{12}\.css)"', login.text)
        assert css, login.text
        served = http().get(f"{embedded.web_url}{css.group(1)}", headers={"Accept-Encoding": "gzip"}, timeout=5)
        assert served.status_code == 200 and "immutable" in served.headers["Cache-Control"]
        assert served.headers.get("Content-Encoding") == "gzip"
    except BaseException:
        print(embedded.logs())
        raise


def test_the_support_agent_runs_on_the_offline_model_as_make_run_starts_it(embedded):
    """`make run` with nothing set: the support agent on the offline model, start to finish."""
    env = embedded.env
    manage("seed_demo", "--no-execution", env=env)
    requester = http(manage("create_api_token", "requester", env=env).strip().splitlines()[-1])
    manager = http(manage("create_api_token", "manager", env=env).strip().splitlines()[-1])
    try:
        with embedded.together():
            embedded.worker("embedded")
            embedded.web()
        started = requester.post(
            f"{embedded.web_url}/api/executions",
            json={"workflow": "support_agent", "input": {"ticket": "TCK-1004"}},
            timeout=10,
        )
        assert started.status_code == 201, started.text
        base = f"{embedded.web_url}/api/executions/{started.json()['id']}"

        def status(expected):
            body = requester.get(base, timeout=5).json()
            return body if body.get("status") == expected else None

        approval = wait_for(lambda: status("awaiting_approval"), timeout=60, what="the proposal")["pending_approval"]
        assert approval["action"] == "submit_replacement"
        content = requester.get(
            f"{embedded.web_url}/api/artifacts/{approval['artifact_id']}/versions/1/content", timeout=5
        ).content
        assert (
            content
            == b'{"args":{"original_order":"ORD-1004","quantity":2,"sku":"SKU-TWL-30"},"tool":"submit_replacement"}'
        )
        decided = manager.post(
            f"{base}/events",
            json={
                "type": "approval.decision",
                "approval_id": approval["id"],
                "decision": "approve",
                "artifact_version": approval["artifact_version"],
                "content_sha256": approval["content_sha256"],
                "event_id": "embedded-agent-1",
            },
            timeout=10,
        )
        assert decided.status_code == 202, decided.text
        done = wait_for(lambda: status("completed"), timeout=60, what="the agent to finish")
        assert sorted(a["type"] for a in own_actions(done)) == ["reply_to_customer", "submit_replacement"]
        calls = requester.get(f"{base}/model-calls", timeout=5).json()["items"]
        assert {c["model"] for c in calls} == {"offline-deterministic-1"} and len(
            calls
        ) == 7  # the route (version 2), then the agent round
    except BaseException:
        print(embedded.logs())
        raise


def test_the_quarterly_report_and_its_three_children_run_on_the_embedded_default(embedded):
    """`make run` with nothing set (SQLite, the filesystem broker): a parent and its children
    end to end — three monthly reports approved, the quarterly report approved, published."""
    env = embedded.env
    manage("seed_demo", "--no-execution", env=env)
    requester = http(manage("create_api_token", "requester", env=env).strip().splitlines()[-1])
    manager = http(manage("create_api_token", "manager", env=env).strip().splitlines()[-1])
    try:
        with embedded.together():
            embedded.worker("embedded")
            embedded.beat()
            embedded.web()
        api = f"{embedded.web_url}/api/executions"
        started = requester.post(
            api, json={"workflow": "quarterly_report", "input": {"quarter": "2026-Q1"}}, timeout=10
        )
        assert started.status_code == 201, started.text
        ref = started.json()["id"]

        def body(of: str) -> dict:
            return requester.get(f"{api}/{of}", timeout=5).json()

        def children_awaiting():
            kids = body(ref)["children"]
            return len(kids) == 3 and all(k["status"] == "awaiting_approval" for k in kids) and kids

        kids = wait_for(children_awaiting, timeout=90, what="three monthly reports awaiting approval")
        for n, kid in enumerate(kids):
            decision = approval_decision(body(kid["id"])["pending_approval"], f"embedded-q-{n}")
            assert manager.post(f"{api}/{kid['id']}/events", json=decision, timeout=10).status_code == 202
        waiting = wait_for(
            lambda: (b := body(ref))["status"] == "awaiting_approval" and b, timeout=90, what="the quarterly draft"
        )
        assert waiting["pending_approval"]["action"] == "publish_quarterly"
        decision = approval_decision(waiting["pending_approval"], "embedded-q-parent")
        assert manager.post(f"{api}/{ref}/events", json=decision, timeout=10).status_code == 202
        wait_for(lambda: body(ref)["status"] == "completed", timeout=90, what="the quarterly report to complete")
        assert embedded.sandbox_stats()["keys"][f"{ref}:publish:v1"]["effects"] == 1
    except BaseException:
        print(embedded.logs())
        raise
