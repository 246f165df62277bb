"""The embedded default: SQLite + Celery's filesystem transport + a real worker, no servers.

This is what `make run` uses; the demo execution must go end to end on it.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from tests.support.procs import ROOT, Proc, free_port, http, wait_for

PY = sys.executable


@pytest.fixture
def embedded_env(tmp_path):
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("DATABASE_URL", "CELERY_BROKER_URL", "DJANGO_ALLOW_ASYNC_UNSAFE", "KEEL_ARTIFACTS_ROOT")
    }
    sandbox_port = free_port()
    env.update(
        DJANGO_SETTINGS_MODULE="config.settings",
        KEEL_VAR_DIR=str(tmp_path / "var"),
        SANDBOX_URL=f"http://127.0.0.1:{sandbox_port}",
        RUNTIME_LEASE_SECONDS="5",
        RUNTIME_SWEEP_SECONDS="1",
        PYTHONUNBUFFERED="1",
    )
    return env, sandbox_port


def manage(env, *args) -> str:
    done = subprocess.run([PY, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_demo_execution_completes_on_sqlite_and_the_filesystem_broker(embedded_env, tmp_path):
    env, sandbox_port = embedded_env
    manage(env, "migrate", "--noinput")
    manage(env, "collectstatic", "--noinput", "-v", "0")  # as `make run` does
    seeded = manage(env, "seed_demo")
    assert "Started demo execution RUN_0001" in seeded
    assert (tmp_path / "var" / "keel.sqlite3").exists()
    token = manage(env, "create_api_token", "manager").strip().splitlines()[-1]

    web_port = free_port()
    bin_dir = os.path.dirname(PY)
    procs = [
        Proc(
            "sandbox",
            [PY, "manage.py", "runsandbox", "--port", str(sandbox_port), "--db", str(tmp_path / "sb.sqlite3")],
            env,
            tmp_path / "sandbox.log",
        ),
        Proc(
            "worker",
            [
                f"{bin_dir}/celery",
                "-A",
                "config",
                "worker",
                "--pool=solo",
                "-l",
                "INFO",
                "--without-gossip",
                "--without-mingle",
            ],
            env,
            tmp_path / "worker.log",
        ),
        Proc("beat", [f"{bin_dir}/celery", "-A", "config", "beat", "-l", "INFO"], env, tmp_path / "beat.log"),
        Proc(
            "web",
            [
                f"{bin_dir}/gunicorn",
                "config.wsgi",
                "--bind",
                f"127.0.0.1:{web_port}",
                "--workers",
                "2",
                "--threads",
                "4",
                "--no-control-socket",  # as the Procfile
            ],
            env,
            tmp_path / "web.log",
        ),
    ]
    try:
        api = http()
        api.headers["Authorization"] = f"Bearer {token}"
        base = f"http://127.0.0.1:{web_port}/api/executions/RUN_0001"

        def status(expected):
            try:
                body = api.get(base, timeout=5).json()
            except Exception:
                return None
            return body if body.get("status") == expected else None

        waiting = wait_for(lambda: status("awaiting_approval"), timeout=60, what="the demo to wait for approval")
        approval = waiting["pending_approval"]
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
        assert {a["status"] for a in done["actions"]} == {"succeeded"}
        stats = http().get(f"http://127.0.0.1:{sandbox_port}/_stats", timeout=5).json()
        assert stats["keys"]["RUN_0001:publish:v1"]["effects"] == 1

        # gunicorn + WhiteNoise: pages are never stored; styles come hashed, compressed, cached for good.
        login = http().get(f"http://127.0.0.1:{web_port}/login/", timeout=5)
        assert "no-store" in login.headers["Cache-Control"]
        css = re.search(r'href="(/static/css/app\.[0-9a-f]{12}\.css)"', login.text)
        assert css, login.text
        served = http().get(
            f"http://127.0.0.1:{web_port}{css.group(1)}", headers={"Accept-Encoding": "gzip"}, timeout=5
        )
        assert served.status_code == 200 and "immutable" in served.headers["Cache-Control"]
        assert served.headers.get("Content-Encoding") == "gzip"
    except BaseException:
        for p in procs:
            print(f"===== {p.name} =====\n{p.output()[-3000:]}")
        raise
    finally:
        for p in procs:
            p.stop()
