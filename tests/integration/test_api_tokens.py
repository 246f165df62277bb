"""API tokens expire, can be revoked by command, and reading doesn't write on every request."""

from __future__ import annotations

import io
from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from accounts.models import ApiToken
from accounts.tokens import api_token_issue


@pytest.fixture
def alice(db):
    return get_user_model().objects.create_user("alice", password="pw-alice-123")


def bearer_get(token: str, path: str = "/api/executions"):
    return Client().get(path, HTTP_AUTHORIZATION=f"Bearer {token}")


def token_writes(queries) -> int:
    return sum(1 for q in queries if q["sql"].startswith("UPDATE") and "executions_apitoken" in q["sql"])


def test_create_api_token_prints_the_token_alone_last_and_expires_by_days(alice):
    out, err = io.StringIO(), io.StringIO()
    call_command("create_api_token", "alice", "--days", "7", stdout=out, stderr=err)
    token = out.getvalue().strip().splitlines()[-1]
    assert token.startswith("keel_") and " " not in token
    row = ApiToken.objects.get(user=alice)
    assert row.prefix == token[:12]
    assert timedelta(days=6, hours=23) < row.expires_at - timezone.now() <= timedelta(days=7)
    assert "expires" in err.getvalue() and f"--id {row.pk}" in err.getvalue()
    assert bearer_get(token).status_code == 200

    call_command("create_api_token", "alice", stdout=io.StringIO(), stderr=io.StringIO())
    default = ApiToken.objects.filter(user=alice).last()
    assert timedelta(days=89, hours=23) < default.expires_at - timezone.now() <= timedelta(days=90)


@pytest.mark.parametrize("days", ["0", "-3", "3651"])
def test_create_api_token_refuses_a_lifetime_out_of_range(alice, days):
    with pytest.raises(CommandError, match="between 1 and 3650 days"):
        call_command("create_api_token", "alice", "--days", days, stdout=io.StringIO(), stderr=io.StringIO())
    assert not ApiToken.objects.exists()


def test_an_expired_token_is_a_401(alice):
    issued = api_token_issue(user=alice, days=1)
    assert bearer_get(issued.token).status_code == 200
    ApiToken.objects.filter(pk=issued.id).update(expires_at=timezone.now() - timedelta(seconds=1))
    response = bearer_get(issued.token)
    assert response.status_code == 401 and "authentication required" in response.json()["detail"]


def test_revoke_one_by_id_or_prefix_then_all(alice):
    first, second, third = (api_token_issue(user=alice) for _ in range(3))
    out = io.StringIO()
    call_command("revoke_api_token", "alice", "--id", str(first.id), stdout=out)
    assert f"Revoked 1 token(s) of alice: #{first.id} {first.prefix}" in out.getvalue()
    assert bearer_get(first.token).status_code == 401
    assert bearer_get(second.token).status_code == 200

    call_command("revoke_api_token", "alice", "--prefix", second.prefix, stdout=out)
    assert bearer_get(second.token).status_code == 401
    assert bearer_get(third.token).status_code == 200

    out = io.StringIO()
    call_command("revoke_api_token", "alice", stdout=out)
    assert "Revoked 1 token(s) of alice" in out.getvalue()
    assert bearer_get(third.token).status_code == 401
    out = io.StringIO()
    call_command("revoke_api_token", "alice", stdout=out)
    assert "alice has no API tokens; nothing to revoke." in out.getvalue()


def test_revoke_refuses_bad_input_and_revokes_nothing(alice):
    kept = api_token_issue(user=alice)
    api_token_issue(user=alice)
    with pytest.raises(CommandError, match="no user named 'bob'"):
        call_command("revoke_api_token", "bob", stdout=io.StringIO())
    with pytest.raises(CommandError, match=r"alice has no token #999999; nothing revoked\. alice's tokens: #"):
        call_command("revoke_api_token", "alice", "--id", "999999", stdout=io.StringIO())
    with pytest.raises(CommandError, match="has no token starting with 'nope'"):
        call_command("revoke_api_token", "alice", "--prefix", "nope", stdout=io.StringIO())
    with pytest.raises(CommandError, match="'keel_' matches 2 tokens; give more characters or the id"):
        call_command("revoke_api_token", "alice", "--prefix", "keel_", stdout=io.StringIO())
    assert ApiToken.objects.filter(user=alice).count() == 2
    assert bearer_get(kept.token).status_code == 200


def test_bearer_reads_write_last_used_at_at_most_once_a_minute(alice):
    issued = api_token_issue(user=alice)
    with CaptureQueriesContext(connection) as first:
        assert bearer_get(issued.token).status_code == 200
    assert token_writes(first) == 1
    used = ApiToken.objects.get(pk=issued.id).last_used_at
    assert used is not None
    with CaptureQueriesContext(connection) as again:
        for _ in range(5):
            assert bearer_get(issued.token).status_code == 200
    assert token_writes(again) == 0
    assert ApiToken.objects.get(pk=issued.id).last_used_at == used

    ApiToken.objects.filter(pk=issued.id).update(last_used_at=timezone.now() - timedelta(seconds=61))
    with CaptureQueriesContext(connection) as later:
        assert bearer_get(issued.token).status_code == 200
    assert token_writes(later) == 1
    assert ApiToken.objects.get(pk=issued.id).last_used_at > used
