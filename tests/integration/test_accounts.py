"""Accounts that resist guessing: the login form locks a username out after repeated
failures from one address (django-axes), and every failure is recorded in the database."""

from __future__ import annotations

from datetime import timedelta

import pytest
from axes.models import AccessAttempt, AccessFailureLog, AccessLog
from django.conf import settings
from django.contrib.auth import get_user_model
from django.test import Client
from django.utils import timezone

PASSWORD = "right-horse-battery"


@pytest.fixture
def alice(db):
    return get_user_model().objects.create_user("alice", password=PASSWORD)


def log_in(client: Client, username: str, password: str):
    return client.post("/login/", {"username": username, "password": password})


def logged_in(client: Client) -> bool:
    return "_auth_user_id" in client.session


def test_the_right_password_logs_in_and_is_logged(alice):
    client = Client()
    response = log_in(client, "alice", PASSWORD)
    assert response.status_code == 302 and logged_in(client)
    assert AccessLog.objects.filter(username="alice").count() == 1


def test_lockout_after_repeated_failures_then_even_the_right_password_is_refused(alice):
    limit = settings.AXES_FAILURE_LIMIT
    assert limit == 5
    client = Client()
    for n in range(1, limit):
        response = log_in(client, "alice", f"guess-{n}")
        assert response.status_code == 200 and "didn't match" in response.content.decode(), n
    # The limit-th failure locks the pair out.
    response = log_in(client, "alice", f"guess-{limit}")
    assert response.status_code == 429

    response = log_in(client, "alice", PASSWORD)
    body = response.content.decode()
    assert response.status_code == 429 and not logged_in(client)
    assert "Too many failed logins" in body and f"after {limit} failed attempts" in body

    # Recorded (audited) in the database: who, from where, how many times.
    attempt = AccessAttempt.objects.get(username="alice")
    assert attempt.ip_address == "127.0.0.1" and attempt.failures_since_start >= limit
    assert AccessFailureLog.objects.filter(username="alice").count() >= limit
    assert not AccessLog.objects.filter(username="alice").exists()

    # Another user from the same address is not locked out by alice's failures.
    get_user_model().objects.create_user("bob", password=PASSWORD)
    other = Client()
    assert log_in(other, "bob", PASSWORD).status_code == 302 and logged_in(other)


def test_the_lockout_ends_after_the_cooloff_and_a_success_resets_the_count(alice):
    client = Client()
    for n in range(settings.AXES_FAILURE_LIMIT):
        log_in(client, "alice", f"guess-{n}")
    assert log_in(client, "alice", PASSWORD).status_code == 429
    # Time passes (the cool-off is measured from the last attempt).
    AccessAttempt.objects.filter(username="alice").update(
        attempt_time=timezone.now() - settings.AXES_COOLOFF_TIME - timedelta(seconds=1)
    )
    response = log_in(client, "alice", PASSWORD)
    assert response.status_code == 302 and logged_in(client)
    assert not AccessAttempt.objects.filter(username="alice").exists()
