"""Production settings from the environment (issue 11): no published secret key, a
production switch that refuses unsafe starts, `check --deploy` clean with the documented
environment, and `Cache-Control: no-store` on everything the application renders."""

from __future__ import annotations

import re
import secrets
import stat
import subprocess
import sys

import pytest
from django.test import Client

from tests.support.procs import ROOT
from tests.support.settings_probe import PRINT_KEY, clean_env, django

STRONG_KEY = "9vQ2-kX7pL4mZ8rT1wY6nB3cF5hJ0dS" * 2  # 64 characters, many distinct


def test_without_a_key_one_is_made_once_kept_private_and_shared(tmp_path):
    env = clean_env(tmp_path)
    runs = [
        subprocess.Popen(
            [sys.executable, "-c", f"import django; django.setup(); {PRINT_KEY}"],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(4)
    ]
    keys = {run.communicate(timeout=60)[0].strip() for run in runs}
    assert all(run.returncode == 0 for run in runs)
    kept = tmp_path / "var" / "secret_key"
    assert keys == {kept.read_text().strip()}  # four processes started together: one key
    assert len(kept.read_text().strip()) >= 50
    assert stat.S_IMODE(kept.stat().st_mode) == 0o600
    assert not [p for p in kept.parent.iterdir() if p.name.startswith(".secret_key")]
    # No key in the repository: a fresh directory makes a different one.
    other = django(clean_env(tmp_path / "other"), PRINT_KEY)
    assert other.returncode == 0 and other.stdout.strip() not in keys
    assert "insecure-dev-key" not in (ROOT / "config" / "settings.py").read_text()


def test_a_key_file_others_can_read_is_refused(tmp_path):
    assert django(clean_env(tmp_path), PRINT_KEY).returncode == 0
    (tmp_path / "var" / "secret_key").chmod(0o644)
    done = django(clean_env(tmp_path), PRINT_KEY)
    assert done.returncode != 0 and "is readable by other users (mode 644); chmod 600 it." in done.stderr


@pytest.mark.parametrize(
    ("extra", "sentence"),
    [
        ({"DJANGO_ALLOWED_HOSTS": "keel.example.com"}, "KEEL_ENV=production needs DJANGO_SECRET_KEY"),
        (
            {"DJANGO_ALLOWED_HOSTS": "keel.example.com", "DJANGO_SECRET_KEY": STRONG_KEY, "DJANGO_DEBUG": "on"},
            "KEEL_ENV=production refuses DJANGO_DEBUG=on",
        ),
        ({"DJANGO_SECRET_KEY": STRONG_KEY}, "KEEL_ENV=production needs DJANGO_ALLOWED_HOSTS"),
    ],
)
def test_production_refuses_to_start_unsafe(tmp_path, extra, sentence):
    done = django(clean_env(tmp_path, KEEL_ENV="production", **extra), PRINT_KEY)
    assert done.returncode != 0
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("django.core.exceptions.ImproperlyConfigured: " + sentence), last
    assert not (tmp_path / "var" / "secret_key").exists()


def test_an_unknown_keel_env_is_refused(tmp_path):
    done = django(clean_env(tmp_path, KEEL_ENV="prod"), PRINT_KEY)
    assert done.returncode != 0 and "KEEL_ENV must be 'development' or 'production', not 'prod'." in done.stderr


def documented_production_env() -> dict[str, str]:
    """The `export` lines under "The production environment" in docs/operations.md."""
    text = (ROOT / "docs" / "operations.md").read_text()
    section = text.split("### The production environment", 1)[1]
    block = section.split("```sh", 1)[1].split("```", 1)[0]
    found = dict(re.findall(r"^export (\w+)=(\S+)", block, flags=re.M))
    assert {"KEEL_ENV", "DJANGO_SECRET_KEY", "DJANGO_ALLOWED_HOSTS"} <= found.keys(), found
    return found


def test_check_deploy_is_clean_with_the_documented_production_environment(tmp_path):
    documented = documented_production_env()
    # Placeholders (…) become real values; the check reads settings only, it connects nowhere.
    documented["DJANGO_SECRET_KEY"] = secrets.token_urlsafe(50)
    documented = {k: v.replace("…", "secret") for k, v in documented.items()}
    env = clean_env(tmp_path, **documented)
    done = subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "System check identified no issues" in done.stdout

    shown = django(
        env,
        "from django.conf import settings as s; print(s.SECURE_SSL_REDIRECT, s.SECURE_HSTS_SECONDS, "
        "s.SESSION_COOKIE_SECURE, s.CSRF_COOKIE_SECURE, s.SESSION_COOKIE_AGE, s.DEBUG, s.SECURE_PROXY_SSL_HEADER)",
    )
    assert shown.stdout.split() == [
        "True",
        "31536000",
        "True",
        "True",
        "43200",
        "False",
        "('HTTP_X_FORWARDED_PROTO',",
        "'https')",
    ]


def test_security_settings_follow_the_environment(tmp_path):
    env = clean_env(
        tmp_path,
        DJANGO_SECURE_HSTS_SECONDS="600",
        DJANGO_SECURE_SSL_REDIRECT="true",
        DJANGO_SESSION_COOKIE_SECURE="1",
        DJANGO_CSRF_COOKIE_SECURE="yes",
        DJANGO_SESSION_COOKIE_AGE="900",
        DJANGO_ALLOWED_HOSTS="a.example, b.example",
        DJANGO_CSRF_TRUSTED_ORIGINS="https://a.example",
    )
    shown = django(
        env,
        "from django.conf import settings as s; print(s.SECURE_HSTS_SECONDS, s.SECURE_SSL_REDIRECT, "
        "s.SESSION_COOKIE_SECURE, s.CSRF_COOKIE_SECURE, s.SESSION_COOKIE_AGE, s.ALLOWED_HOSTS, s.CSRF_TRUSTED_ORIGINS)",
    )
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.strip() == "600 True True True 900 ['a.example', 'b.example'] ['https://a.example']"


def test_no_store_on_pages_and_api_but_not_on_static_files(people):
    signed_in = Client()
    signed_in.force_login(people["requester"].user)
    bearer = {"HTTP_AUTHORIZATION": f"Bearer {people['requester'].token}"}
    answers = {
        "list page": signed_in.get("/"),
        "login page": Client().get("/login/"),
        "API 200": Client().get("/api/executions", **bearer),
        "API 401": Client().get("/api/executions"),
        "API 404": Client().get("/api/executions/RUN_9999", **bearer),
        "API via session": signed_in.get("/api/executions"),
    }
    for what, response in answers.items():
        assert "no-store" in response.get("Cache-Control", ""), (what, response.status_code)
    static = Client().get("/static/css/app.css")
    assert static.status_code == 200
    assert "no-store" not in static.get("Cache-Control", "")
