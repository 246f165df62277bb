"""Issue 17, item 11: while PostgreSQL (or Redis) is down, the web answers 503 with
``Retry-After`` — JSON on the API, a page that retries by itself on the screens —
never a 500 or a traceback; once it is back, the same processes answer as before.

On real processes: a PostgreSQL server of the test's own (``PrivatePostgres``; the
machine's is shared) stopped and started again under a running web server; a Redis
of the test's own killed under it.
"""

from __future__ import annotations

import re
import time
from pathlib import Path

import psycopg
import pytest

from tests.support.procs import PrivatePostgres, Processes, free_port, http, keel_env, manage, wait_for

pytestmark = pytest.mark.processes  # it starts keel's processes of its own

CREATE_USER = """
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from accounts.tokens import api_token_create

operator = get_user_model().objects.create_user("operator", password="pw-operator-503")
operator.groups.add(Group.objects.get(name="operators"))
print(api_token_create(user=operator))
"""


@pytest.fixture
def private_postgres(tmp_path):
    postgres = PrivatePostgres(tmp_path)
    postgres.start()
    yield postgres
    postgres.close()


def own_stack(postgres: PrivatePostgres, tmp_path: Path) -> tuple[Processes, str, int]:
    with psycopg.connect(f"{postgres.url}/postgres", autocommit=True) as conn:
        conn.execute("CREATE DATABASE keel")
    redis_port = free_port()
    env = keel_env(
        DATABASE_URL=f"{postgres.url}/keel",
        CELERY_BROKER_URL=f"redis://127.0.0.1:{redis_port}/0",
        KEEL_VAR_DIR=str(tmp_path / "var"),
        KEEL_ARTIFACTS_ROOT=str(tmp_path / "var" / "artifacts"),
    )
    for name in ("KEEL_TEST_DB_NAME", "KEEL_ARTIFACTS_S3_BUCKET"):
        env.pop(name, None)
    manage("migrate", "--noinput", env=env, log=tmp_path / "manage.log")
    token = manage("shell", "-c", CREATE_USER, env=env).split()[-1]
    return Processes(tmp_path, env), token, redis_port


def signed_in(web_url: str):
    session = http()
    login = session.get(f"{web_url}/login/", timeout=10)
    csrf = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', login.text).group(1)
    answer = session.post(
        f"{web_url}/login/",
        data={"username": "operator", "password": "pw-operator-503", "csrfmiddlewaretoken": csrf},
        headers={"Referer": f"{web_url}/login/"},
        timeout=10,
    )
    assert answer.status_code == 200 and "Log out" in answer.text, answer.text[:500]
    return session


def test_the_web_answers_503_with_retry_after_while_postgresql_is_down(private_postgres, tmp_path):
    stack, token, redis_port = own_stack(private_postgres, tmp_path)
    try:
        stack.redis(redis_port)
        stack.web()
        api, page = http(token), signed_in(stack.web_url)
        assert api.get(f"{stack.web_url}/api/executions", timeout=10).status_code == 200
        assert page.get(f"{stack.web_url}/", timeout=10).status_code == 200

        private_postgres.stop(kill=True)  # a crash: every connection dies with it
        listed = api.get(f"{stack.web_url}/api/executions", timeout=20)
        assert listed.status_code == 503, listed.text[:500]
        assert listed.headers["Retry-After"] == "5" and listed.headers["Content-Type"] == "application/json"
        assert listed.json()["retry_after"] == 5 and "database" in listed.json()["detail"]
        started = api.post(
            f"{stack.web_url}/api/executions", json={"workflow": "monthly_report", "input": {"month": "2026-08"}}
        )
        assert started.status_code == 503 and started.headers["Retry-After"] == "5"
        screen = page.get(f"{stack.web_url}/", timeout=20)
        assert screen.status_code == 503 and screen.headers["Retry-After"] == "5"
        assert "can&#x27;t reach its database" in screen.text or "can't reach its database" in screen.text
        assert 'http-equiv="refresh"' in screen.text and "Traceback" not in screen.text
        assert "Traceback" not in stack.procs[-1].output(), "a refusal, not an error with a traceback"

        private_postgres.start()
        wait_for(
            lambda: api.get(f"{stack.web_url}/api/executions", timeout=10).status_code == 200,
            timeout=30,
            what="the web server to reconnect",
        )
        assert page.get(f"{stack.web_url}/", timeout=10).status_code == 200
        again = api.post(
            f"{stack.web_url}/api/executions", json={"workflow": "monthly_report", "input": {"month": "2026-08"}}
        )
        assert again.status_code == 201, again.text
    finally:
        stack.close()


def test_the_web_keeps_answering_while_redis_is_down(private_postgres, tmp_path):
    """Redis is the doorbell, not the record: with it gone a start is recorded (201) and
    the sweeper rings once it is back; nothing answers 500."""
    stack, token, redis_port = own_stack(private_postgres, tmp_path)
    try:
        redis = stack.redis(redis_port)
        stack.web()
        api = http(token)
        redis.kill()
        began = time.monotonic()
        started = api.post(
            f"{stack.web_url}/api/executions",
            json={"workflow": "monthly_report", "input": {"month": "2026-08"}},
            timeout=30,
        )
        assert started.status_code == 201, started.text
        assert time.monotonic() - began < 15, "the broker's absence does not hold the request"
        assert api.get(f"{stack.web_url}/api/executions", timeout=10).status_code == 200
        page = signed_in(stack.web_url)
        assert page.get(f"{stack.web_url}/executions/{started.json()['id']}/", timeout=10).status_code == 200
        assert "could not enqueue execution" in stack.procs[-1].output()  # logged, left to the sweeper
    finally:
        stack.close()
