"""Models that changed app keep their tables, their rows and their content types:
ApiToken (executions → accounts) and TerminalTally (executions → triage), issue 19.
Migrated back to before the move, rows written there, migrated forward again."""

from __future__ import annotations

import io

import pytest
from django.core.management import call_command
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.utils import timezone

from tests.support.stack import APP_DB_ROLE

BEFORE = [("executions", "0015_lean_indexes"), ("accounts", None), ("triage", None)]
AFTER = [("executions", "0016_apitoken_and_terminaltally_moved")]


def _migrate(targets):
    """Migrate to ``targets``; the apps as the database then is."""
    return MigrationExecutor(connection).migrate(targets).apps


@pytest.fixture
def back_to_latest(transactional_db):
    """The test migrates back and forth; the database ends at the latest migrations again,
    with the application role's grants on the tables the rewind dropped and made again
    (the stack's processes of later tests connect as that role)."""
    yield
    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())
    call_command("grant_app_role", APP_DB_ROLE, stdout=io.StringIO())


def test_the_moved_models_keep_their_tables_rows_and_content_types(back_to_latest):
    old = _migrate(BEFORE)
    user = old.get_model("auth", "User").objects.create(username="alice")
    now = timezone.now()
    old.get_model("executions", "ApiToken").objects.create(
        user_id=user.pk, digest="d" * 64, prefix="keel_abcdefg", expires_at=now
    )
    old.get_model("executions", "TerminalTally").objects.create(
        status="completed", workflow="monthly_report", n=7, through=now, taken_at=now
    )
    ContentType = old.get_model("contenttypes", "ContentType")
    for model in ("apitoken", "terminaltally"):  # as a database that ran post_migrate has them
        ContentType.objects.update_or_create(app_label="executions", model=model)
    token_type = ContentType.objects.get(app_label="executions", model="apitoken").pk

    new = _migrate(AFTER)
    token = new.get_model("accounts", "ApiToken").objects.get()
    assert (token.user_id, token.prefix) == (user.pk, "keel_abcdefg")
    assert new.get_model("triage", "TerminalTally").objects.get().n == 7
    ContentType = new.get_model("contenttypes", "ContentType")
    assert ContentType.objects.get(app_label="accounts", model="apitoken").pk == token_type  # its rights follow it
    assert ContentType.objects.filter(app_label="triage", model="terminaltally").exists()
    assert not ContentType.objects.filter(app_label="executions", model__in=["apitoken", "terminaltally"]).exists()
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM executions_apitoken")
        assert cursor.fetchone() == (1,)
