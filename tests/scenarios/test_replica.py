"""Issue 24, item 4: replica reads, on real processes. A PostgreSQL server of the test's
own with a real streaming replica (``pg_basebackup -R`` on another port), the web server
given ``DATABASE_REPLICA_URL``: the read-only lists read the replica (an execution started
while the replica's replay is paused is on the primary — its own page shows it — but not
in the list, and the list page says how far behind the replica is); once replay resumes
it is listed. A replica URL that doesn't answer: reads fall back to the primary with a
warning, never a 500."""

from __future__ import annotations

import pytest

from tests.support.procs import PrivatePostgres, Processes, StandbyPostgres, http, keel_env, wait_for

USERS = """
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from accounts.tokens import api_token_create
user = get_user_model().objects.create_user("op", email="op@example.com", password="replica-reads-pw-12")
user.groups.add(Group.objects.get(name="operators"))
print("TOKEN", api_token_create(user=user))
from django.conf import settings
from django.contrib.sessions.backends.db import SessionStore
session = SessionStore()
session["_auth_user_id"] = str(user.pk)
session["_auth_user_backend"] = "django.contrib.auth.backends.ModelBackend"
session["_auth_user_hash"] = user.get_session_auth_hash()
session.create()
print("SESSION", settings.SESSION_COOKIE_NAME, session.session_key)
"""


def web_with(tmp, primary_url: str, replica_url: str, **env: str):
    """The web server on ``primary_url`` reading its lists from ``replica_url``; an
    operator's token and a browser session of theirs."""
    procs = Processes(
        tmp,
        keel_env(
            DATABASE_URL=primary_url,
            DATABASE_REPLICA_URL=replica_url,
            KEEL_VAR_DIR=str(tmp / "var"),
            RUNTIME_REPLICA_RECHECK_SECONDS="0.2",
            RUNTIME_REPLICA_LAG_SECONDS="1",
            **env,
        ),
        sandbox_url="http://127.0.0.1:9",
    )
    for name in ("KEEL_TEST_DB_NAME", "RUNTIME_FAILPOINT_DIR"):
        procs.env.pop(name, None)
    from tests.support.procs import manage

    manage("migrate", "--noinput", env={**procs.env, "DATABASE_REPLICA_URL": ""}, log=tmp / "migrate.log")
    out = manage("shell", "-c", USERS, env={**procs.env, "DATABASE_REPLICA_URL": ""}, log=tmp / "users.log")
    token = out.split("TOKEN", 1)[1].split()[0]
    cookie, key = out.split("SESSION", 1)[1].split()[:2]
    procs.web()
    browser = http()
    browser.cookies.set(cookie, key)
    return procs, token, browser


@pytest.mark.processes
def test_the_lists_read_the_replica_say_how_far_behind_it_is_and_fall_back_when_it_is_gone(tmp_path):
    primary = PrivatePostgres(tmp_path)
    primary.start()
    standby = None
    procs = None
    try:
        import psycopg

        with psycopg.connect(f"{primary.url}/postgres", autocommit=True) as conn:
            conn.execute("CREATE DATABASE keel_replica")
        standby = StandbyPostgres(primary, tmp_path)
        standby.start()
        procs, token, browser = web_with(tmp_path, f"{primary.url}/keel_replica", f"{standby.url}/keel_replica")
        api = http(token)
        base = f"{procs.web_url}/api"
        wait_for(lambda: api.get(f"{base}/executions").status_code == 200, timeout=20, what="the list")

        standby.replay(paused=True)
        started = api.post(f"{base}/executions", json={"workflow": "monthly_report", "input": {"month": "2026-03"}})
        assert started.status_code == 201, started.text
        ref = started.json()["id"]
        assert api.get(f"{base}/executions/{ref}").json()["id"] == ref  # its own page: the primary
        assert ref not in [e["id"] for e in api.get(f"{base}/executions").json()["items"]]  # the list: the replica
        notice = wait_for(
            lambda: "behind the primary" in (page := browser.get(f"{procs.web_url}/").text) and page,
            timeout=20,
            what="the list page to say the replica lags",
        )
        assert 'id="replica-notice"' in notice

        standby.replay(paused=False)
        wait_for(
            lambda: ref in [e["id"] for e in api.get(f"{base}/executions").json()["items"]],
            timeout=20,
            what="the replica to catch up",
        )

        # Bad input: the replica stops answering → the lists read the primary, with a
        # warning in the log and on the page, never a 500.
        standby.stop(kill=True)
        again = api.post(f"{base}/executions", json={"workflow": "monthly_report", "input": {"month": "2026-04"}})
        assert again.status_code == 201, again.text
        listed = wait_for(
            lambda: (
                (r := api.get(f"{base}/executions")).status_code == 200
                and again.json()["id"] in [e["id"] for e in r.json()["items"]]
            ),
            timeout=20,
            what="the list read from the primary",
        )
        assert listed and api.get(f"{base}/executions/summary").status_code == 200
        page = browser.get(f"{procs.web_url}/")
        assert page.status_code == 200 and "does not answer" in page.text
        assert "the replica (DATABASE_REPLICA_URL) does not answer; reading from the primary" in procs.logs()
    finally:
        if procs is not None:
            procs.close()
        if standby is not None:
            standby.close()
        primary.close()
